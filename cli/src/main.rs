//! The `kubenest` command.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = kubenest_cli::Cli::parse();
    kubenest_cli::init_tracing();
    kubenest_cli::run(cli).await
}
