//! `kubenest alerts`: the organization's alerts (silent clusters, Apps past their progress
//! deadline), and `kubenest alerts ack ID`.

use clap::{Args, Subcommand, ValueEnum};
use kubenest_api::alerts::AlertResponse;

use super::{Global, Table, cell};
use crate::api;

/// Which alerts to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlertState {
    /// Raised, nobody acknowledged them yet.
    Open,
    /// Acknowledged, still holding.
    Acknowledged,
    /// Ended.
    Resolved,
}

impl AlertState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Acknowledged => "acknowledged",
            Self::Resolved => "resolved",
        }
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AlertsArgs {
    /// Only alerts in this state (every alert otherwise).
    #[arg(long)]
    pub state: Option<AlertState>,
    #[command(subcommand)]
    pub command: Option<AlertsCommand>,
}

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// Acknowledge an alert: it stays until what it is about ends, marked as seen by you.
    Ack { id: String },
}

pub async fn run(global: &Global, args: AlertsArgs) -> anyhow::Result<()> {
    let mut client = global.client()?;
    let org = global.org(&mut client).await?;
    match args.command {
        None => {
            let mut path = format!("/api/v1/orgs/{org}/alerts");
            if let Some(state) = args.state {
                path.push_str(&format!("?state={}", state.as_str()));
            }
            let alerts: Vec<AlertResponse> = client.get_as(&path).await?;
            global.print(&alerts, |alerts| {
                Table::rows(
                    [
                        "ID", "STATE", "SEVERITY", "KIND", "SUBJECT", "OPENED", "MESSAGE",
                    ],
                    alerts,
                    |a| {
                        vec![
                            cell(&a.id),
                            cell(&a.state),
                            cell(&a.severity),
                            cell(&a.kind),
                            format!("{}/{}", cell(&a.subject_kind), cell(&a.subject_name)),
                            cell(&a.opened_at),
                            cell(&a.message),
                        ]
                    },
                )
            });
        }
        Some(AlertsCommand::Ack { id }) => {
            let alert: AlertResponse = client
                .post_as(
                    &format!("/api/v1/orgs/{org}/alerts/{}/ack", api::query_value(&id)),
                    &serde_json::Map::new(),
                )
                .await?;
            global.done(&alert, &format!("alert {id} acknowledged"));
        }
    }
    Ok(())
}
