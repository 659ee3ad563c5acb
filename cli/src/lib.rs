//! `kubenest`: the user CLI over the REST API (`login`, `clusters`, `projects`, `apps`,
//! `templates`, ...), and the local environment (`kubenest dev up`, `kubenest dev tour`).
//!
//! The library half is what the end-to-end tests drive: [`system::System`] starts the kubenest
//! programs on a test-kit environment, [`tour`] is the scripted walk through the product, and
//! [`api::Client`] is the REST client both use.

pub mod api;
pub mod cmd;
pub mod dev;
pub mod system;
pub mod tour;

use clap::{Parser, Subcommand};

/// kubenest: run applications on many Kubernetes clusters from one control plane.
#[derive(Debug, Parser)]
#[command(name = "kubenest", version, about)]
pub struct Cli {
    #[command(flatten)]
    global: cmd::Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Api(cmd::ApiCommand),
    /// The local development environment.
    Dev {
        #[command(subcommand)]
        command: dev::DevCommand,
    },
}

/// Logs to stderr; `RUST_LOG` filters (default `warn` for commands, `info` for `dev`).
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

impl Cli {
    /// Whether this is a `dev` command (which logs its progress).
    pub fn is_dev(&self) -> bool {
        matches!(self.command, Command::Dev { .. })
    }
}

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Api(command) => cmd::run(&cli.global, command).await,
        Command::Dev { command } => dev::run(command).await,
    }
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
