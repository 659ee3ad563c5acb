//! The app's command line: serve (the default), or `get URL`.

use std::time::Duration;

/// The demo web app of kubenest.
#[derive(Debug, clap::Parser)]
#[command(name = "kubenest-demo", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// What to do instead of serving.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// GET a URL, print the body, exit non-zero unless the answer is a 2xx.
    Get(GetArgs),
}

/// Settings of the app.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// HTTP port (on every address).
    #[arg(long, env = "PORT", default_value_t = 8080)]
    pub port: u16,
    /// PostgreSQL URL (`postgres://user:password@host:port/db`); unset: not checked.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Redis URL (`redis://:password@host:port`); unset: not checked.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,
    /// The version the app reports (defaults to the build's).
    #[arg(long, env = "DEMO_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    pub demo_version: String,
    /// Seconds each backend check may take before it counts as failed.
    #[arg(long, env = "DEMO_CHECK_TIMEOUT_SECONDS", default_value_t = 5)]
    pub check_timeout_seconds: u64,
    /// Share of the requests to `/` answered `500` on purpose, from 0 to 1; spread evenly over
    /// the requests, not drawn at random, so that a revision's error rate is what was asked.
    #[arg(long, env = "DEMO_ERROR_RATIO", default_value_t = 0.0)]
    pub error_ratio: f64,
    /// MiB the process allocates, writes and keeps every second, until its container reaches
    /// its memory limit and is killed; 0: none.
    #[arg(long, env = "DEMO_LEAK_MB_PER_S", default_value_t = 0)]
    pub leak_mb_per_s: u32,
    /// Seconds after which the process exits with status 1, a crash after warm-up; unset or 0:
    /// never.
    #[arg(long, env = "DEMO_EXIT_AFTER_S")]
    pub exit_after_s: Option<u64>,
    /// An `http://` URL the app GETs [`Self::load_per_second`] times a second while it runs
    /// (traffic for another workload); unset: none.
    #[arg(long, env = "DEMO_LOAD_URL")]
    pub load_url: Option<String>,
    /// Requests a second to [`Self::load_url`], 1 to 1000.
    #[arg(long, env = "DEMO_LOAD_PER_SECOND", default_value_t = 10)]
    pub load_per_second: u32,
}

/// A setting the app refuses to start with; the message names the setting.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingError {
    /// `DEMO_ERROR_RATIO` is not a share.
    #[error("DEMO_ERROR_RATIO (--error-ratio) must be between 0 and 1, not {0}")]
    ErrorRatio(f64),
    /// `DEMO_LOAD_URL` is not an `http://` URL.
    #[error("DEMO_LOAD_URL (--load-url) must be an http:// URL")]
    LoadUrl,
    /// `DEMO_LOAD_PER_SECOND` is out of its range.
    #[error("DEMO_LOAD_PER_SECOND (--load-per-second) must be between 1 and 1000, not {0}")]
    LoadRate(u32),
}

impl ServeArgs {
    /// The bound of one backend check.
    pub fn check_timeout(&self) -> Duration {
        Duration::from_secs(self.check_timeout_seconds.max(1))
    }

    /// When the process is to exit on purpose, if ever.
    pub fn exit_after(&self) -> Option<Duration> {
        self.exit_after_s
            .filter(|&seconds| seconds > 0)
            .map(Duration::from_secs)
    }

    /// Refuses settings out of their range (clap only checks that they parse).
    pub fn validate(&self) -> Result<(), SettingError> {
        // Written so that NaN is refused too.
        if !(0.0..=1.0).contains(&self.error_ratio) {
            return Err(SettingError::ErrorRatio(self.error_ratio));
        }
        if let Some(url) = &self.load_url
            && (!url.starts_with("http://") || reqwest::Url::parse(url).is_err())
        {
            return Err(SettingError::LoadUrl);
        }
        if !(1..=1000).contains(&self.load_per_second) {
            return Err(SettingError::LoadRate(self.load_per_second));
        }
        Ok(())
    }
}

/// `kubenest-demo get URL`.
#[derive(Debug, Clone, clap::Args)]
pub struct GetArgs {
    /// The URL to GET (`http://` only).
    pub url: String,
    /// Seconds before the request counts as failed.
    #[arg(long, default_value_t = 10)]
    pub timeout_seconds: u64,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn verify_cli() {
        Args::command().debug_assert();
    }

    #[test]
    fn get_is_a_subcommand_and_serving_the_default() {
        let args = Args::parse_from(["kubenest-demo", "get", "http://web:8080/"]);
        assert!(matches!(args.command, Some(Command::Get(ref g)) if g.url == "http://web:8080/"));
        let args = Args::parse_from(["kubenest-demo", "--port", "9000"]);
        assert!(args.command.is_none());
        assert_eq!(args.serve.port, 9000);
    }

    #[test]
    fn misbehaviour_is_off_unless_asked() {
        let args = Args::parse_from(["kubenest-demo"]);
        assert_eq!(args.serve.error_ratio, 0.0);
        assert_eq!(args.serve.leak_mb_per_s, 0);
        assert_eq!(args.serve.exit_after(), None);
        assert_eq!(args.serve.validate(), Ok(()));
        let zero = Args::parse_from(["kubenest-demo", "--exit-after-s", "0"]);
        assert_eq!(zero.serve.exit_after(), None);
        let args = Args::parse_from([
            "kubenest-demo",
            "--error-ratio",
            "0.3",
            "--leak-mb-per-s",
            "16",
            "--exit-after-s",
            "90",
        ]);
        assert_eq!(args.serve.error_ratio, 0.3);
        assert_eq!(args.serve.leak_mb_per_s, 16);
        assert_eq!(args.serve.exit_after(), Some(Duration::from_secs(90)));
    }

    #[test]
    fn an_error_ratio_outside_zero_to_one_is_refused_by_its_name() {
        for ratio in [0.0, 0.5, 1.0] {
            let args = Args::parse_from(["kubenest-demo", "--error-ratio", &ratio.to_string()]);
            assert_eq!(args.serve.validate(), Ok(()), "{ratio}");
        }
        for ratio in ["1.5", "-0.1", "NaN", "inf"] {
            let args = Args::parse_from(["kubenest-demo", &format!("--error-ratio={ratio}")]);
            let error = args.serve.validate().expect_err(ratio).to_string();
            assert!(error.contains("DEMO_ERROR_RATIO"), "{error}");
            assert!(error.contains("--error-ratio"), "{error}");
            assert!(error.contains(ratio), "{error}");
        }
    }
}
