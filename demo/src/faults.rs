//! The app's misbehaviour on purpose, for a deployment platform to catch: answers that fail at
//! a set ratio, and memory that is taken and never given back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The ratio's resolution: the schedule counts in whole parts per million, so that its
/// arithmetic is exact and 30 of 100 requests fail at 0.3, never 29 or 31.
const PARTS: u128 = 1_000_000;

/// One MiB, the unit of the leak.
const MIB: usize = 1024 * 1024;

/// Which requests fail on purpose: request n (counting from 1) fails when rounding n × ratio
/// gives more than rounding (n − 1) × ratio. The failures are then spread evenly, and after
/// any n requests exactly round(n × ratio) of them have failed. Clones share the count.
#[derive(Debug, Clone)]
pub struct ErrorSchedule {
    per_million: u64,
    answered: Arc<AtomicU64>,
}

impl ErrorSchedule {
    /// The schedule of `ratio`, a share from 0 to 1 (anything else is taken as the nearest
    /// end, NaN as 0: the settings are validated before they get here).
    pub fn new(ratio: f64) -> Self {
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        Self {
            // In [0, 1_000_000] after the clamp: the cast cannot truncate.
            per_million: (ratio * 1_000_000.0).round() as u64,
            answered: Arc::default(),
        }
    }

    /// Counts one more request and says whether it is to fail, with its number.
    pub fn next(&self) -> (u64, bool) {
        let n = self
            .answered
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        (n, fails(n, self.per_million))
    }
}

/// Whether request `n` (from 1) fails at a ratio of `per_million` parts per million.
fn fails(n: u64, per_million: u64) -> bool {
    let n = u128::from(n);
    failed_after(n, per_million) > failed_after(n.saturating_sub(1), per_million)
}

/// How many of the first `n` requests fail: n × ratio, rounded half up.
fn failed_after(n: u128, per_million: u64) -> u128 {
    (n * u128::from(per_million) + PARTS / 2) / PARTS
}

/// Takes `mib_per_second` MiB every second and keeps them until the process ends (the task
/// is aborted with the app, or the kernel's OOM killer ends the container first).
pub async fn leak(mib_per_second: u32) {
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticks.tick().await;
        match take(mib_per_second) {
            Ok(block) => {
                held.push(block);
                let total = held.iter().map(Vec::len).sum::<usize>() / MIB;
                tracing::info!(
                    held_mib = total,
                    "leaking memory on purpose (DEMO_LEAK_MB_PER_S)"
                );
            }
            Err(error) => {
                tracing::warn!(%error, mib = mib_per_second, "could not take more memory");
            }
        }
    }
}

/// `mib` MiB with every byte written: a page that was only reserved would not count against
/// the container's memory limit.
fn take(mib: u32) -> Result<Vec<u8>, std::collections::TryReserveError> {
    let len = usize::try_from(mib)
        .unwrap_or(usize::MAX)
        .saturating_mul(MIB);
    let mut block = Vec::new();
    block.try_reserve_exact(len)?;
    // Not zero: zeroed memory may be mapped lazily and never become resident.
    block.resize(len, 0xA5);
    Ok(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round half up of n × num / den, in exact integers.
    fn expected(n: u64, num: u64, den: u64) -> u64 {
        (2 * n * num + den) / (2 * den)
    }

    #[test]
    fn exactly_the_rounded_share_of_requests_fails_after_any_number_of_them() {
        for (num, den) in [
            (0, 1),
            (1, 10),
            (1, 4),
            (29, 100),
            (3, 10),
            (1, 2),
            (3, 4),
            (1, 1),
        ] {
            let schedule = ErrorSchedule::new(num as f64 / den as f64);
            let mut failed = 0;
            for n in 1..=1000 {
                let (number, fails) = schedule.next();
                assert_eq!(number, n);
                failed += u64::from(fails);
                assert_eq!(failed, expected(n, num, den), "{num}/{den} after {n}");
            }
        }
    }

    #[test]
    fn thirty_of_a_hundred_fail_at_three_tenths_and_spread_evenly() {
        let schedule = ErrorSchedule::new(0.3);
        let fails: Vec<bool> = (0..100).map(|_| schedule.next().1).collect();
        assert_eq!(fails.iter().filter(|&&f| f).count(), 30);
        // Never two failures in a row at 0.3.
        assert!(fails.windows(2).all(|w| !(w[0] && w[1])));
    }

    #[test]
    fn none_fails_at_zero_and_every_one_at_one() {
        let never = ErrorSchedule::new(0.0);
        let always = ErrorSchedule::new(1.0);
        for _ in 0..100 {
            assert!(!never.next().1);
            assert!(always.next().1);
        }
    }

    #[test]
    fn clones_share_the_count() {
        let schedule = ErrorSchedule::new(0.5);
        let clone = schedule.clone();
        assert_eq!(schedule.next().0, 1);
        assert_eq!(clone.next().0, 2);
    }

    #[test]
    fn a_leaked_block_has_every_byte_written() {
        let block = take(1).expect("one MiB");
        assert_eq!(block.len(), MIB);
        assert!(block.iter().all(|&b| b == 0xA5));
        assert!(take(0).expect("nothing").is_empty());
    }
}
