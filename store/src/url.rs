//! A database URL whose password never reaches a log.

/// A PostgreSQL URL. `Debug` and `Display` hide the password.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Wraps a `postgres://` URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL with its password, for the driver only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn redacted(&self) -> String {
        // postgres://user:password@host/db → postgres://user:***@host/db
        let Some((scheme, rest)) = self.0.split_once("://") else {
            return "***".into();
        };
        match rest.split_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => self.0.clone(),
            },
            None => self.0.clone(),
        }
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DatabaseUrl({})", self.redacted())
    }
}

impl std::fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        let url = DatabaseUrl::new("postgres://kubenest:s3cret@db:5432/kubenest");
        assert_eq!(url.to_string(), "postgres://kubenest:***@db:5432/kubenest");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert_eq!(url.expose(), "postgres://kubenest:s3cret@db:5432/kubenest");
        let no_password = DatabaseUrl::new("postgres://postgres@127.0.0.1:5432/x");
        assert_eq!(
            no_password.to_string(),
            "postgres://postgres@127.0.0.1:5432/x"
        );
    }
}
