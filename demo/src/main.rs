//! The `kubenest-demo` binary: the demo web app, or its HTTP client (`kubenest-demo get URL`).

use std::process::ExitCode;

use clap::Parser;
use kubenest_demo::{Args, Command};

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    match args.command {
        Some(Command::Get(get)) => Ok(kubenest_demo::client::main(get).await),
        None => {
            tracing_subscriber::fmt()
                // Colours only on a terminal: a pod's log is a file.
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info".into()),
                )
                .init();
            let listener = tokio::net::TcpListener::bind(("0.0.0.0", args.serve.port)).await?;
            kubenest_demo::run(args.serve, listener, kubenest_demo::shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
