//! The `kubenest-hub` binary.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = kubenest_hub::Args::parse();
    let _telemetry = kubenest_runtime::logs::init(args.log_format, "info", "kubenest-hub")?;
    let listener = std::net::TcpListener::bind(args.listen)?;
    let admin = std::net::TcpListener::bind(args.admin_listen)?;
    let shutdown = kubenest_runtime::shutdown::on_signal();
    kubenest_hub::run(args, listener, admin, shutdown).await?;
    Ok(())
}
