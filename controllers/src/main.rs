//! The `kubenest-controllers` binary: leader-elected management-plane controllers.

use clap::Parser;
use kubenest_controllers::args::{Args, Replica};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _telemetry = kubenest_runtime::logs::init(args.log_format, "info", "kubenest-controllers")?;
    let replica = Replica::start(args).await?;
    replica.run(kubenest_runtime::shutdown::on_signal()).await?;
    Ok(())
}
