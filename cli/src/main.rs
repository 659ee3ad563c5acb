//! The `kubenest` command.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = kubenest_cli::Cli::parse();
    kubenest_cli::init_tracing("warn");
    if let Err(error) = kubenest_cli::run(cli).await {
        let status = kubenest_cli::exit::status(&error);
        // `apps diff` printed the differences; its status says they were found.
        if status != kubenest_cli::exit::DIFF_FOUND {
            eprintln!("error: {error:#}");
        }
        std::process::exit(status);
    }
}
