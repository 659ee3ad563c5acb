//! The `kubenest-agent` binary: dials the hub and runs the cluster-side controllers.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = kubenest_agent::args::Args::parse();
    kubenest_runtime::logs::init_json("info")?;
    let config = args.config().await?;
    kubenest_agent::run(config, kubenest_runtime::shutdown::on_signal()).await?;
    Ok(())
}
