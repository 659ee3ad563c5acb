//! The one retry backoff of every kubenest program: the agent's dial to the hub, the backends'
//! dials to each hub replica, the controllers' resends of a command. The capped exponential is
//! backon's ([`backon::ExponentialBuilder`], no limit on attempts); each delay is then drawn
//! uniformly between a floor and that ceiling ("full jitter"), so the many agents or objects that
//! failed together do not come back in the same instant. (backon's own jitter adds up to the
//! current delay on top, which keeps retries bunched at the ceiling.)

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use rand::Rng;

/// Jittered, capped, doubling delays; [`Backoff::reset`] after a success.
#[derive(Debug)]
pub struct Backoff {
    builder: ExponentialBuilder,
    ceilings: ExponentialBackoff,
    floor: Duration,
    cap: Duration,
}

impl Backoff {
    /// Delays whose ceiling starts at `base` and doubles per attempt up to `cap`; each is drawn
    /// from `[0, ceiling]`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        let builder = ExponentialBuilder::new()
            .with_min_delay(base)
            .with_max_delay(cap)
            .with_factor(2.0)
            .without_max_times();
        Self {
            ceilings: builder.build(),
            builder,
            floor: Duration::ZERO,
            cap,
        }
    }

    /// Draws each delay from `[floor, ceiling]` instead (a floor above the ceiling wins).
    pub fn with_floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceilings.next().unwrap_or(self.cap).max(self.floor);
        spread(self.floor, ceiling)
    }

    /// Starts again from the first delay.
    pub fn reset(&mut self) {
        self.ceilings = self.builder.build();
    }
}

/// Uniformly random in `[low, high]` (millisecond steps).
pub fn spread(low: Duration, high: Duration) -> Duration {
    let low = u64::try_from(low.as_millis()).unwrap_or(u64::MAX);
    let high = u64::try_from(high.as_millis()).unwrap_or(u64::MAX).max(low);
    Duration::from_millis(rand::rng().random_range(low..=high))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn delays_are_full_jitter_under_a_doubling_cap_and_start_over_on_reset() {
        let (base, cap) = (Duration::from_millis(500), Duration::from_secs(30));
        let mut backoff = Backoff::new(base, cap);
        for attempt in 0..12 {
            let ceiling = (base * 2u32.pow(attempt)).min(cap);
            assert!(backoff.next_delay() <= ceiling, "attempt {attempt}");
        }
        // Spread, not a fixed delay: 200 draws at the cap are not all alike.
        let draws: BTreeSet<_> = (0..200).map(|_| backoff.next_delay()).collect();
        assert!(draws.len() > 100);
        assert!(draws.iter().all(|d| *d <= cap));
        backoff.reset();
        assert!(backoff.next_delay() <= base);
    }

    #[test]
    fn a_floor_holds_under_every_delay() {
        let second = Duration::from_secs(1);
        let mut backoff =
            Backoff::new(Duration::from_millis(100), Duration::from_secs(30)).with_floor(second);
        assert!((0..100).all(|_| backoff.next_delay() >= second));
    }
}
