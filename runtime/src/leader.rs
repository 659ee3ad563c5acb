//! Leader election with a `coordination.k8s.io` Lease: of several replicas of a program (the
//! controllers) exactly one does the work; the others wait and take over within one lease duration when the
//! leader stops renewing (a crash) or at once when it steps down (a clean shutdown).
//!
//! Every write is guarded by the Lease's resourceVersion, so two candidates can never both
//! believe they acquired it. Expiry is judged on the candidate's own monotonic clock, never by
//! comparing the holder's `renewTime` with the local wall clock: a standby notes when it last saw
//! the Lease's record change, and the lease has expired once it has seen no change for a whole
//! lease duration (client-go's rule). Two machines' clocks may disagree by minutes; the leader
//! then neither loses its lease early nor keeps it late.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

/// How one candidate takes part.
#[derive(Debug, Clone)]
pub struct Election {
    pub leases: Api<Lease>,
    /// The Lease's name, shared by all candidates.
    pub name: String,
    /// This candidate, unique among them (e.g. the pod name).
    pub identity: String,
    /// A leader that has not renewed for this long is replaced.
    pub lease_duration: Duration,
    /// How often the leader renews and the others try.
    pub retry: Duration,
    /// The Lease's record as this candidate last saw it change.
    observed: Arc<Mutex<Option<Observed>>>,
}

/// A Lease's record (holder and renew time, as written) and when this candidate first saw it,
/// by its own monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    record: (Option<String>, Option<String>),
    at: Instant,
}

impl Observed {
    /// What is known after seeing `record` at `now`: the same record keeps its first sighting.
    fn after(
        previous: Option<&Observed>,
        record: (Option<String>, Option<String>),
        now: Instant,
    ) -> Self {
        match previous {
            Some(seen) if seen.record == record => seen.clone(),
            _ => Observed { record, at: now },
        }
    }

    /// Whether the holder has not renewed for `duration`, as this candidate saw it.
    fn expired(&self, now: Instant, duration: Duration) -> bool {
        now.saturating_duration_since(self.at) > duration
    }
}

impl Election {
    /// The usual timings: a 10 s lease renewed every 2 s, so a failover takes at most ~12 s.
    pub fn new(leases: Api<Lease>, name: &str, identity: &str) -> Self {
        Self {
            leases,
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(10),
            retry: Duration::from_secs(2),
            observed: Arc::default(),
        }
    }

    fn now() -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::now())
    }

    /// Whether the holder in `spec` has stopped renewing: its record has not changed, as this
    /// candidate saw it, for the lease's duration.
    fn expired(&self, spec: &LeaseSpec) -> bool {
        let record = (
            spec.holder_identity.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
        );
        let duration = spec
            .lease_duration_seconds
            .map_or(self.lease_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
        let now = Instant::now();
        let mut observed = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        let seen = Observed::after(observed.as_ref(), record, now);
        let expired = seen.expired(now, duration);
        *observed = Some(seen);
        expired
    }

    /// Takes or renews the Lease; returns whether this candidate holds it now.
    pub async fn try_acquire(&self) -> Result<bool, kube::Error> {
        let seconds = i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.leases.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(Self::now()),
                    renew_time: Some(Self::now()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(other) => Err(other),
            };
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let vacant = spec.holder_identity.as_deref().is_none_or(str::is_empty);
        if !ours && !vacant && !self.expired(&spec) {
            return Ok(false);
        }
        if !ours {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(Self::now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(Self::now());
        spec.lease_duration_seconds = Some(seconds);
        lease.spec = Some(spec);
        // `replace` carries the resourceVersion read above: a concurrent writer makes it fail.
        match self
            .leases
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// Gives the Lease up (if held), so a standby takes over at once.
    pub async fn step_down(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.leases.get_opt(&self.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        lease.spec = Some(spec);
        match self
            .leases
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// Waits until this candidate leads, then runs `lead` with a token that is cancelled when
    /// leadership is lost (renewal failing for a whole lease duration, or another holder) or
    /// `shutdown` fires. Returns after `lead` has returned; steps down on shutdown.
    /// Returns `true` if leadership was lost (the caller should exit and start over).
    pub async fn run<F, Fut>(&self, shutdown: CancellationToken, lead: F) -> bool
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            match self.try_acquire().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "leader election: lease unavailable"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(self.retry) => {}
            }
        }
        tracing::info!(identity = %self.identity, "leading");
        let leading = shutdown.child_token();
        let renew = async {
            let mut last_renewed = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    _ = leading.cancelled() => return false,
                    _ = tokio::time::sleep(self.retry) => {}
                }
                match self.try_acquire().await {
                    Ok(true) => last_renewed = tokio::time::Instant::now(),
                    Ok(false) => {
                        tracing::warn!("leader election: another replica holds the lease");
                        leading.cancel();
                        return true;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "leader election: renewal failed");
                        // Stop before a standby may take over: it waits a whole lease duration.
                        if last_renewed.elapsed() + self.retry >= self.lease_duration {
                            leading.cancel();
                            return true;
                        }
                    }
                }
            }
        };
        let (lost, ()) = tokio::join!(renew, async {
            lead(leading.clone()).await;
            leading.cancel();
        });
        if !lost && let Err(error) = self.step_down().await {
            tracing::warn!(%error, "leader election: could not step down");
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(renewed: &str) -> (Option<String>, Option<String>) {
        (Some("replica-a".into()), Some(renewed.into()))
    }

    #[test]
    fn a_holders_clock_skew_neither_ends_its_lease_early_nor_keeps_it_late() {
        let start = Instant::now();
        let duration = Duration::from_secs(10);
        let at = |seconds: u64| start + Duration::from_secs(seconds);

        // The holder's clock is an hour behind: its renew times look long expired, but they keep
        // changing, so the lease lives.
        let mut seen = Observed::after(None, record("2026-12-06T03:00:00Z"), at(0));
        for (second, renewed) in [(2, "03:00:02"), (4, "03:00:04"), (30, "03:00:30")] {
            let renewed = format!("2026-12-06T{renewed}Z");
            seen = Observed::after(Some(&seen), record(&renewed), at(second - 1));
            assert!(!seen.expired(at(second), duration), "at {second} s");
        }

        // The holder's clock is an hour ahead and it has died: its last renew time looks fresh
        // for an hour, but the record stops changing, so the lease ends one duration later.
        let ahead = record("2026-12-06T05:00:00Z");
        let seen = Observed::after(None, ahead.clone(), at(100));
        let seen = Observed::after(Some(&seen), ahead, at(105));
        assert_eq!(seen.at, at(100), "the same record keeps its first sighting");
        assert!(!seen.expired(at(110), duration));
        assert!(seen.expired(at(111), duration));
    }
}
