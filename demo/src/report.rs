//! What the app answers: pure data, and the rules that decide whether it is healthy.

use serde::Serialize;

/// The answer of `GET /`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Report {
    pub app: &'static str,
    /// `DEMO_VERSION`, or the build's version.
    pub version: String,
    /// The pod (`HOSTNAME`) that answered.
    pub hostname: String,
    pub postgres: PostgresCheck,
    pub redis: RedisCheck,
    /// Every configured backend was reached and gave back what was written.
    pub ok: bool,
}

/// What the app found of its PostgreSQL.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PostgresCheck {
    /// `DATABASE_URL` is set.
    pub configured: bool,
    /// The URL without its password.
    pub target: Option<String>,
    /// A connection was made and the queries ran.
    pub connected: bool,
    /// `SELECT version()`.
    pub server: Option<String>,
    /// The row written by this request, as read back.
    pub row: Option<Row>,
    /// The row read back equals the row written.
    pub read_back: bool,
    pub error: Option<String>,
}

/// A row of the app's `demo_visits` table.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub note: String,
}

/// What the app found of its Redis.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct RedisCheck {
    /// `REDIS_URL` is set.
    pub configured: bool,
    /// The URL without its password.
    pub target: Option<String>,
    /// A connection was made (and authenticated) and the commands ran.
    pub connected: bool,
    /// The key this request set.
    pub key: Option<String>,
    /// The value read back from it.
    pub value: Option<String>,
    /// The value read back equals the value set.
    pub read_back: bool,
    pub error: Option<String>,
}

impl PostgresCheck {
    /// A backend that is not configured is healthy; a configured one must have answered.
    pub fn healthy(&self) -> bool {
        !self.configured || (self.connected && self.read_back)
    }
}

impl RedisCheck {
    /// A backend that is not configured is healthy; a configured one must have answered.
    pub fn healthy(&self) -> bool {
        !self.configured || (self.connected && self.read_back)
    }
}

impl Report {
    /// The report of `version` on `hostname` from the two checks.
    pub fn new(version: &str, hostname: &str, postgres: PostgresCheck, redis: RedisCheck) -> Self {
        let ok = postgres.healthy() && redis.healthy();
        Self {
            app: "kubenest-demo",
            version: version.to_owned(),
            hostname: hostname.to_owned(),
            postgres,
            redis,
            ok,
        }
    }
}

/// `url` with its password replaced by `***`, for logs and answers: the password is the one
/// thing of a connection string that must not travel.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => userinfo.to_owned(),
    };
    format!("{scheme}://{user}@{host}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password_and_keeps_the_rest() {
        assert_eq!(
            redact("postgres://app:s3cr%40t@db.shop.svc:5432/app?sslmode=disable"),
            "postgres://app:***@db.shop.svc:5432/app?sslmode=disable"
        );
        assert_eq!(
            redact("redis://:pw@cache.shop.svc:6379"),
            "redis://:***@cache.shop.svc:6379"
        );
        // An @ in the password does not leak its first part.
        assert_eq!(redact("redis://u:a@b@h:1/0"), "redis://u:***@h:1/0");
    }

    #[test]
    fn redact_leaves_urls_without_a_password_alone() {
        assert_eq!(redact("redis://cache:6379"), "redis://cache:6379");
        assert_eq!(redact("postgres://app@db/app"), "postgres://app@db/app");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn unconfigured_backends_are_healthy_and_configured_ones_must_answer() {
        let none = Report::new("1", "h", PostgresCheck::default(), RedisCheck::default());
        assert!(none.ok);
        let down = PostgresCheck {
            configured: true,
            error: Some("refused".into()),
            ..Default::default()
        };
        assert!(!Report::new("1", "h", down, RedisCheck::default()).ok);
        let wrong = RedisCheck {
            configured: true,
            connected: true,
            read_back: false,
            ..Default::default()
        };
        assert!(!Report::new("1", "h", PostgresCheck::default(), wrong).ok);
        let up = RedisCheck {
            configured: true,
            connected: true,
            read_back: true,
            ..Default::default()
        };
        assert!(Report::new("1", "h", PostgresCheck::default(), up).ok);
    }
}
