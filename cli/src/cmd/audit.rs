//! `kubenest audit`: the organization's audit log (organization admins), newest first: every
//! mutation by REST, kubectl or GitOps, who made it and what became of it.

use clap::{Args, ValueEnum};
use kubenest_api::audit::{AuditEntryView, AuditPage};

use super::{Global, Table, cell};
use crate::api;

/// The path a mutation came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditPath {
    Rest,
    Kubectl,
    Gitops,
}

/// What became of a mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditOutcome {
    Succeeded,
    Refused,
    Failed,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this actor's entries (a user name, or `kubernetes:{user}`).
    #[arg(long)]
    pub actor: Option<String>,
    /// Only entries of this path.
    #[arg(long, value_enum)]
    pub path: Option<AuditPath>,
    /// Only entries with this outcome.
    #[arg(long, value_enum)]
    pub outcome: Option<AuditOutcome>,
    /// Only entries on this kind (`apps`, `clusters`, `App`, ...).
    #[arg(long)]
    pub kind: Option<String>,
    /// How many entries, newest first (the pages are read until there are this many).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
}

fn value_name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

pub async fn run(global: &Global, args: AuditArgs) -> anyhow::Result<()> {
    let mut client = global.client()?;
    let org = global.org(&mut client).await?;
    let mut filters = Vec::new();
    if let Some(actor) = &args.actor {
        filters.push(format!("actor={}", api::query_value(actor)));
    }
    if let Some(path) = args.path {
        filters.push(format!("path={}", value_name(path)));
    }
    if let Some(outcome) = args.outcome {
        filters.push(format!("outcome={}", value_name(outcome)));
    }
    if let Some(kind) = &args.kind {
        filters.push(format!("resource_kind={}", api::query_value(kind)));
    }
    let mut items: Vec<AuditEntryView> = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let wanted = args.limit as usize - items.len();
        let mut query = filters.clone();
        query.push(format!("limit={}", wanted.min(500)));
        if let Some(token) = &token {
            query.push(format!("continue={}", api::query_value(token)));
        }
        let page: AuditPage = client
            .get_as(&format!("/api/v1/orgs/{org}/audit?{}", query.join("&")))
            .await?;
        items.extend(page.items);
        token = page.continue_token;
        if token.is_none() || items.len() >= args.limit as usize {
            break;
        }
    }
    global.print(&items, |entries| {
        Table::rows(
            [
                "AT", "ACTOR", "PATH", "ACTION", "RESOURCE", "OUTCOME", "STATUS",
            ],
            entries,
            |e| {
                vec![
                    cell(&e.at),
                    cell(&e.actor),
                    cell(&e.path),
                    cell(&e.action),
                    format!("{}/{}", cell(&e.resource_kind), cell(&e.resource_name)),
                    cell(&e.outcome),
                    e.status.to_string(),
                ]
            },
        )
    });
    Ok(())
}
