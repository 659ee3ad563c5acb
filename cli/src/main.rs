//! The `kubenest` command.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = kubenest_cli::Cli::parse();
    kubenest_cli::init_tracing("warn");
    if let Err(error) = kubenest_cli::run(cli).await {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
