//! Redeploy: `kubenest.io/redeploy: <token>` restarts the workloads at the same revision, once
//! per token. `app.redeploy` is re-sent with backoff until the agent accepts it (the status
//! router then marks the token handled).

use std::time::Duration;

use kube::ResourceExt;
use kubenest_contracts as wire;
use kubenest_crds::app::App;
use kubenest_crds::names::annotations;

use super::record::new_deployment;
use crate::intents::{ObjectKey, Sent};
use crate::placement::Placement;
use crate::plane::Plane;
use crate::reconcile::Error;
use kubenest_store::Operation;

/// Sends `app.redeploy` while a redeploy request is not yet carried out; lowers `retry` to when
/// it is due again.
pub(super) async fn redeploy(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    revision: &str,
    retry: &mut Option<Duration>,
) -> Result<(), Error> {
    let Some(token) = app.annotations().get(annotations::REDEPLOY) else {
        return Ok(());
    };
    let status = app.status.clone().unwrap_or_default();
    if status.handled_redeploy.as_deref() == Some(token.as_str()) {
        return Ok(());
    }
    let due_key = format!("{}/redeploy", key.uid);
    if !plane.intents.due(&due_key) {
        *retry = Some(plane.intents.until_due(&due_key));
        return Ok(());
    }
    let spec = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    let intent_key = format!("{}/redeploy/{token}", key.uid);
    let new = new_deployment(
        app,
        key,
        placement,
        intent_key,
        revision,
        Operation::Redeploy,
        spec,
    );
    let (row, _) = plane.history.record_deployment(&new).await?;
    let command = wire::AppRedeploy {
        app: super::app_ref(key, placement),
        revision: revision.to_owned(),
        restart_id: wire::Id::new(row.id.to_string()),
    };
    let sent = Sent::AppRedeploy {
        app: key.clone(),
        token: token.clone(),
        deployment: row.id,
        org: placement.org_id.clone(),
    };
    if let Err(error) = plane.send(placement, command, sent).await {
        tracing::debug!(%error, "app.redeploy not routed");
    }
    let delay = plane.intents.backoff(&due_key);
    *retry = Some(retry.map_or(delay, |r| r.min(delay)));
    Ok(())
}
