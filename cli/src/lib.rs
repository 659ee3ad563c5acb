//! `kubenest`: the user CLI over the REST API (`login`, `clusters`, `projects`, `apps`,
//! `templates`, ...). It talks to the REST API only: no Kubernetes client, no database.
//!
//! The library half is [`api::Client`], the REST client, and the commands' helpers in [`cmd`]
//! (waiting for an App, tables); the local environment (`kubenest-devenv`) drives the product
//! with the same client.

pub mod api;
pub mod cmd;
pub mod exit;

use clap::Parser;

/// kubenest: run applications on many Kubernetes clusters from one control plane.
#[derive(Debug, Parser)]
#[command(name = "kubenest", version, about)]
pub struct Cli {
    #[command(flatten)]
    global: cmd::Global,
    #[command(subcommand)]
    command: cmd::ApiCommand,
}

/// Logs to stderr; `RUST_LOG` filters (`default` otherwise: `warn` for `kubenest`, `info` for
/// the local environment's `kubenest-dev`, which logs its progress).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // The kube client logs every failed readiness poll while clusters start; those are
        // expected, and the kit reports a real failure itself.
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(format!("{default},kube_client=off"))
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    cmd::run(&cli.global, cli.command).await
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn api_commands_parse_as_documented() {
        let cli = Cli::try_parse_from([
            "kubenest",
            "apps",
            "apply",
            "-f",
            "app.yaml",
            "--project",
            "shop",
            "--wait",
            "-o",
            "json",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cli.global.output, cmd::Output::Json);
        assert!(Cli::try_parse_from(["kubenest", "apps", "rollback", "web"]).is_err());
        assert!(Cli::try_parse_from(["kubenest", "alerts", "--state", "open"]).is_ok());
        assert!(Cli::try_parse_from(["kubenest", "alerts", "ack", "a1"]).is_ok());
        assert!(Cli::try_parse_from(["kubenest", "alerts", "--state", "sleeping"]).is_err());
        assert!(
            Cli::try_parse_from([
                "kubenest",
                "audit",
                "--path",
                "kubectl",
                "--outcome",
                "refused"
            ])
            .is_ok()
        );
        assert!(Cli::try_parse_from(["kubenest", "audit", "--path", "ftp"]).is_err());
        assert!(Cli::try_parse_from(["kubenest", "audit", "--limit", "0"]).is_err());
        assert!(
            Cli::try_parse_from([
                "kubenest",
                "templates",
                "deploy",
                "t",
                "--project",
                "p",
                "--name",
                "a",
                "--param",
                "novalue"
            ])
            .is_err()
        );
    }
}
