//! The `kubenest-agent` binary: dials the hub and runs the cluster-side controllers.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = kubenest_agent::args::Args::parse();
    let _telemetry = kubenest_runtime::logs::init(args.log_format, "info", "kubenest-agent")?;
    let admin_listen = args.admin_listen;
    let config = args.config().await?;
    let shutdown = kubenest_runtime::shutdown::on_signal();
    kubenest_agent::metrics::admin(&config.client)
        .bind(admin_listen, shutdown.clone())
        .await?;
    kubenest_agent::run(config, shutdown).await?;
    Ok(())
}
