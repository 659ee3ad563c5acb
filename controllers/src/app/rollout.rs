//! One rollout pass of an App's current generation, in four steps that each have a file:
//! [`facts`](super::facts) gathers (reads only), [`plan`](super::plan) decides (pure, a table
//! test), [`act`](super::act) carries out the steps (the deployment row before any send), and
//! [`conclude`](super::conclude) weighs and writes the status. A rollback request is carried out
//! before any of it ([`super::rollback`]), and so is what a failed verification asks
//! ([`super::verified`]).

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kubenest_crds::app::App;
use kubenest_crds::names::annotations;

use super::plan::{self, Plan};
use super::record::write_status;
use super::{act, conclude, facts, rollback, verified};
use crate::intents::ObjectKey;
use crate::plane::Plane;
use crate::reconcile::Error;

/// Rolls out the App's current generation (or carries out a rollback request first).
pub(super) async fn apply(app: &App, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    if let Some(target) = app.annotations().get(annotations::ROLLBACK_TO) {
        return rollback::rollback(app, plane, key, target).await;
    }
    if let Some(action) = verified::act(app, plane, key).await? {
        return Ok(action);
    }
    let (facts, target) = facts::gather(app, plane, key).await?;
    match plan::plan(&facts, target) {
        Plan::Wait { status, requeue } => {
            write_status(plane, key, app.metadata.generation, &facts.old, &status).await?;
            Ok(Action::requeue(requeue))
        }
        Plan::Roll(built, steps) => {
            let acted = act::act(app, plane, key, &facts, *built, &steps).await?;
            conclude::conclude(app, plane, key, &facts, acted).await
        }
    }
}
