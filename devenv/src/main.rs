//! The `kubenest-dev` command.

use clap::Parser;

#[tokio::main]
async fn main() {
    let args = kubenest_devenv::Args::parse();
    kubenest_cli::init_tracing("info");
    if let Err(error) = kubenest_devenv::run(args).await {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
