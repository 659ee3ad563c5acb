//! The `kubenest-apiserver` binary: the REST facade and live event stream.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = kubenest_apiserver::args::Args::parse();
    let _telemetry = kubenest_runtime::logs::init(args.log_format, "info", "kubenest-apiserver")?;
    let shutdown = kubenest_runtime::shutdown::on_signal();
    kubenest_apiserver::args::run(args, shutdown).await?;
    Ok(())
}
