//! `kubenest`: the user CLI. For now it runs the local environment (`kubenest dev up`); the REST
//! commands arrive with the API.

mod dev;

use clap::{Parser, Subcommand};

/// kubenest: run applications on many Kubernetes clusters from one control plane.
#[derive(Debug, Parser)]
#[command(name = "kubenest", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The local development environment.
    Dev {
        #[command(subcommand)]
        command: dev::DevCommand,
    },
}

/// Logs to stderr; `RUST_LOG` filters (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // The kube client logs every failed readiness poll while clusters start; those are
        // expected, and the kit reports a real failure itself.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
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
}
