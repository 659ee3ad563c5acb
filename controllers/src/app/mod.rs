//! The App controller: durable intent.
//!
//! For every generation of an App it computes the revision (the spec's hash), writes the
//! deployment row to PostgreSQL **before** anything is sent, and re-sends the complete desired
//! state (`app.deploy`) with backoff until the agent reports that revision observed. While it
//! waits, a `Progressing` condition names why (`ClusterUnreachable`, `HubUnavailable`,
//! `AwaitingAgent`, `RollingOut`). The progress deadline does not end the intent: a revision the
//! cluster has not got when it passes is `DeliveryDelayed` (the `Progressing` reason still says
//! why) and is sent on until the cluster confirms it or a newer revision supersedes it. Once the
//! agent has the revision it judges the rollout against the same deadline, counted from when it
//! got it; its reports (written into the status by the status router) decide the phase and the
//! deployment's outcome, which is recorded once, when it is final.
//!
//! Requests that are not spec changes travel as annotations, so kubectl and REST share one path:
//! `kubenest.io/redeploy: <token>` restarts the workloads at the same revision (once per token),
//! `kubenest.io/rollback-to: <deployment id>` restores that deployment's spec snapshot as a new
//! revision. Deletion holds a finalizer until the agent confirms everything is removed.
//!
//! # Layout: gather → plan → act → conclude
//!
//! The build of the deploy, its validation, the revision and the assessment are pure and live in
//! [`kubenest_domain::app`]. Here: [`controller`] (the driver and the watch), `rollout` (one
//! generation's pass, which reads as its four steps: `facts`, `plan` (pure), `act`, `conclude`),
//! `weigh` (the pure status and requeue decisions), `record` (status writes and history rows),
//! `holding` (the finalizer), `rollback`, and `cleanup` (deletion).

mod act;
mod cleanup;
mod conclude;
pub mod controller;
mod facts;
#[cfg(test)]
mod fixtures;
mod holding;
mod plan;
mod record;
mod rollback;
mod rollout;
mod verified;
mod weigh;

use std::time::Duration;

use kubenest_contracts as wire;

use crate::intents::ObjectKey;
use crate::placement::Placement;

/// How long after a send an accepted (durably stored) revision is sent again if still not
/// reported observed.
const ACCEPTED_RESEND: Duration = Duration::from_secs(20);
/// The longest a recorded App waits for the rest of a burst's rows before it is dispatched.
const BURST_WAIT: Duration = Duration::from_secs(1);

/// The App as commands name it.
fn app_ref(key: &ObjectKey, placement: &Placement) -> wire::AppRef {
    wire::AppRef {
        app_id: wire::Id::new(&key.uid),
        name: wire::Name::new(&key.name),
        project_id: wire::Id::new(&placement.project_id),
        namespace: wire::Name::new(&placement.namespace),
    }
}
