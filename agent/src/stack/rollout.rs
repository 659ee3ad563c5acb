//! Act: applies a plan, step by step, and returns what the cluster answered to each.

use serde_json::Value;

use super::Error;
use super::plan::{Desired, Kind, Plan, Work};
use crate::addon::{self, AddonOutcome};
use crate::apply::ObjectId;
use crate::build;
use crate::context::Context;

/// What the cluster answered to one step of the plan.
#[derive(Debug)]
pub enum Answer {
    /// The chart's outcome, or why it failed.
    Chart(Result<AddonOutcome, String>),
    /// The objects as applied, in order, up to the first the cluster refused (with why).
    Objects {
        live: Vec<(ObjectId, Value)>,
        refused: Option<(ObjectId, String)>,
    },
    /// Nothing to apply: the workload waits for its image, or its build failed.
    Waiting { failed: bool, message: String },
}

/// Applies every step of `plan`, in order; one answer per step. Only a build request the
/// cluster refuses stops the pass: any other refusal is the component's answer.
pub async fn apply(ctx: &Context, plan: &Plan<'_>) -> Result<Vec<Answer>, Error> {
    let mut answers = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let answer = match &step.work {
            Work::Chart(target) => Answer::Chart(match addon::apply(ctx, target).await {
                Ok(outcome) => Ok(outcome),
                Err(error) => {
                    if step.kind == Kind::Addon {
                        tracing::warn!(addon = target.name, %error, "addon failed");
                    }
                    Err(error.to_string())
                }
            }),
            Work::Objects(objects) => self::objects(ctx, objects).await,
            Work::Build {
                request,
                failed,
                message,
            } => {
                if let Some(request) = request {
                    build::store(ctx, request.clone()).await?;
                }
                Answer::Waiting {
                    failed: *failed,
                    message: message.clone(),
                }
            }
        };
        answers.push(answer);
    }
    Ok(answers)
}

/// Applies a workload's objects in order, stopping at the first the cluster refuses: the
/// component then waits (and fails at the deadline) with the cluster's answer as its message.
async fn objects(ctx: &Context, objects: &[Desired]) -> Answer {
    let mut live = Vec::with_capacity(objects.len());
    for desired in objects {
        let applied = if desired.restore {
            ctx.applier.restore(&desired.object).await
        } else {
            ctx.applier.apply(&desired.object, desired.force).await
        };
        match applied {
            Ok(object) => live.push((desired.id.clone(), object)),
            Err(error) => {
                tracing::warn!(%error, "cannot apply");
                return Answer::Objects {
                    live,
                    refused: Some((desired.id.clone(), error.to_string())),
                };
            }
        }
    }
    Answer::Objects {
        live,
        refused: None,
    }
}
