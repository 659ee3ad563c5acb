//! `kubenest-dev`: the local kubenest for development, and the system tests' environment.
//!
//! - [`system::System`] starts the kubenest release programs (hub replicas, leader-elected
//!   controllers, the API server, one agent per workload cluster) as processes on a test-kit
//!   [`Environment`](kubenest_testkit::Environment) of real clusters and PostgreSQL.
//! - [`up`] is `kubenest-dev up` (`make dev`): one such system until Ctrl-C, and its `dev.env`.
//! - [`machines`] is `kubenest-dev machines up N | list | down`: the `local` provider's machines
//!   on this host ([`kubenest_machines`]), which outlive the command, and their machines file.
//! - [`tour`] is `kubenest-dev tour` (`make tour`): the scripted walk through the product over
//!   the REST API, with the user CLI's [`api::Client`](kubenest_cli::api::Client).
//!
//! The system tests (`tests/it/system.rs`) and the end-to-end benchmark (`benches/e2e.rs`) run the
//! same [`system::System`]. The user `kubenest` binary depends on none of this: the test kit,
//! the vendored etcd and sqlx stay here.

pub mod builds;
pub mod machines;
pub mod system;
pub mod tour;
pub mod up;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// kubenest-dev: the whole kubenest on this machine, and a walk through it.
#[derive(Debug, Parser)]
#[command(name = "kubenest-dev", version, about)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the local environment in the foreground and stop it on Ctrl-C.
    Up(up::UpArgs),
    /// Walk through the product on a running `up` (reads `dev.env`): register, deploy,
    /// change, roll back, drift, pause, resume, delete.
    Tour {
        /// The `dev.env` of the running environment.
        #[arg(long, default_value = ".kubenest/dev.env")]
        env_file: PathBuf,
    },
    /// Local machines on this host, reached over SSH like VMs (root): up N, list, down.
    Machines(machines::MachinesArgs),
}

/// Runs one parsed command line.
pub async fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Up(up) => up::run(up).await,
        Command::Tour { env_file } => {
            let env = tour::DevEnv::read(&env_file)?;
            tour::run(&env, &mut tour::Printer::stdout()).await
        }
        Command::Machines(args) => machines::run(args, &mut std::io::stdout()).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn verify_cli() {
        Args::command().debug_assert();
    }
}
