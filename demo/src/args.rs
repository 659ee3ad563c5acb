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
}

impl ServeArgs {
    /// The bound of one backend check.
    pub fn check_timeout(&self) -> Duration {
        Duration::from_secs(self.check_timeout_seconds.max(1))
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
}
