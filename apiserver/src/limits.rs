//! Per-user, per-endpoint request rate limits (reads and writes apart) and a per-address limit on logins.
//! These buckets are per replica: they shield a replica from one noisy caller. The limit that
//! must hold across replicas, failed logins per address and per user at an address, lives in
//! PostgreSQL ([`crate::auth::accounts::Accounts::login_blocked`]).
//!
//! An address is the client's as the trusted proxies report it ([`crate::client_address`]),
//! and an IPv6 client counts as its /64 ([`login_key`]): one subscriber holds a whole /64 and
//! could otherwise try from a fresh address each time.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::client_address::TrustedProxies;
use crate::error::ApiError;

/// Requests per second per user, and the bursts allowed; login attempts per minute per
/// address, and which proxies say what the address is.
#[derive(Debug, Clone)]
pub struct LimitsConfig {
    pub reads_per_second: u32,
    pub writes_per_second: u32,
    pub logins_per_minute_per_address: u32,
    pub trusted_proxies: TrustedProxies,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            reads_per_second: 200,
            writes_per_second: 50,
            logins_per_minute_per_address: 30,
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

/// The buckets.
#[derive(Debug)]
pub struct Limits {
    reads: DefaultKeyedRateLimiter<String>,
    writes: DefaultKeyedRateLimiter<String>,
    logins: DefaultKeyedRateLimiter<IpAddr>,
    proxies: TrustedProxies,
}

/// What the login limits count `address` as: an IPv4 address itself, an IPv6 address its /64.
pub fn login_key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let [a, b, c, d, ..] = v6.segments();
            IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

fn quota_per_second(n: u32) -> Quota {
    let n = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(n).allow_burst(n.saturating_mul(NonZeroU32::new(2).unwrap_or(n)))
}

fn refuse(
    outcome: Result<(), governor::NotUntil<governor::clock::QuantaInstant>>,
    what: &str,
) -> Result<(), ApiError> {
    outcome.map_err(|not_until| {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        ApiError::too_many(format!("too many {what}; slow down"), wait.as_secs().max(1))
    })
}

impl Limits {
    pub fn new(config: LimitsConfig) -> Self {
        let per_minute =
            NonZeroU32::new(config.logins_per_minute_per_address).unwrap_or(NonZeroU32::MIN);
        Self {
            reads: RateLimiter::keyed(quota_per_second(config.reads_per_second)),
            writes: RateLimiter::keyed(quota_per_second(config.writes_per_second)),
            logins: RateLimiter::keyed(Quota::per_minute(per_minute)),
            proxies: config.trusted_proxies,
        }
    }

    /// The proxies whose word on a client's address counts.
    pub fn proxies(&self) -> &TrustedProxies {
        &self.proxies
    }

    /// Counts a request of `user` to `endpoint` (method and route): each endpoint has its own
    /// bucket, so a burst on one leaves the others usable.
    pub fn check_user(&self, user: &str, endpoint: &str, write: bool) -> Result<(), ApiError> {
        let (bucket, what) = if write {
            (&self.writes, "changes")
        } else {
            (&self.reads, "requests")
        };
        refuse(bucket.check_key(&format!("{user} {endpoint}")), what)
    }

    /// Counts a login attempt from `address` (its [`login_key`]).
    pub fn check_login(&self, address: IpAddr) -> Result<(), ApiError> {
        refuse(self.logins.check_key(&login_key(address)), "login attempts")
    }

    /// Forgets idle keys (call now and then).
    pub fn shrink(&self) {
        self.reads.retain_recent();
        self.writes.retain_recent();
        self.logins.retain_recent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_over_the_burst_is_refused_with_retry_after_and_others_are_not() {
        let limits = Limits::new(LimitsConfig {
            reads_per_second: 1,
            writes_per_second: 1,
            logins_per_minute_per_address: 1,
            ..LimitsConfig::default()
        });
        let apps = "POST /api/v1/apps";
        assert!(limits.check_user("ada", apps, true).is_ok());
        assert!(limits.check_user("ada", apps, true).is_ok());
        let refused = limits.check_user("ada", apps, true).unwrap_err();
        assert_eq!(refused.status, 429);
        assert!(refused.retry_after.is_some());
        assert!(limits.check_user("bob", apps, true).is_ok());
        assert!(limits.check_user("ada", "POST /api/v1/orgs", true).is_ok());
        assert!(limits.check_user("ada", "GET /api/v1/apps", false).is_ok());
    }

    #[test]
    fn login_attempts_count_per_ipv4_address_and_per_ipv6_slash_64() {
        let limits = Limits::new(LimitsConfig {
            logins_per_minute_per_address: 1,
            ..LimitsConfig::default()
        });
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(limits.check_login(ip("203.0.113.7")).is_ok());
        assert_eq!(
            limits.check_login(ip("203.0.113.7")).unwrap_err().status,
            429
        );
        assert!(limits.check_login(ip("203.0.113.8")).is_ok());
        assert!(limits.check_login(ip("2001:db8:1:2::1")).is_ok());
        // Another address of the same /64 is the same client.
        assert!(limits.check_login(ip("2001:db8:1:2:ffff::9")).is_err());
        assert!(limits.check_login(ip("2001:db8:1:3::1")).is_ok());
        assert_eq!(login_key(ip("::ffff:203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(login_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
    }
}
