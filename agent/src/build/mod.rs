//! Image builds from Git: a BuildRequest becomes a Job of the builder image in the App's
//! namespace ([`job`]: Git and buildah check out, build the Dockerfile and push), whose outcome
//! the agent reports as `build.status`, a failure with the builder's last lines. A Git workload
//! asks for the build of its revision and runs the image once the build succeeded; a failed
//! build runs again when the App's Secrets change ([`retry_failed`]).

use kubenest_crds::names::{field_managers, labels};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_contracts as wire;

use crate::context::Context;
use crate::crd::{BuildRequest, BuildRequestProgress, StatusPatch, build_request_name};
use crate::ready::{Readiness, with_ready};
use crate::render::object_name;

mod job;
pub use job::{CA_CONFIG_MAP, ca_config_map, failure, job, progress};

/// A Git workload's image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    Ready(String),
    Building(String),
    Failed(String),
}

/// Stores a BuildRequest (idempotent), labelled with its App.
pub async fn store(ctx: &Context, request: wire::BuildRequest) -> Result<(), kube::Error> {
    let name = build_request_name(request.build_id.as_str());
    let mut object = BuildRequest::new(
        &name,
        crate::crd::BuildRequestSpec {
            request: request.clone(),
        },
    );
    object.metadata.labels = Some(BTreeMap::from([
        (labels::APP_ID.to_owned(), request.app.app_id.to_string()),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_AGENT.to_owned(),
        ),
    ]));
    Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            &name,
            &PatchParams::apply(field_managers::AGENT_COMMANDS).force(),
            &Patch::Apply(&object),
        )
        .await?;
    Ok(())
}

/// Removes an App's builds: its BuildRequests and their Jobs.
pub async fn forget_app(ctx: &Context, app: &wire::AppRef) -> Result<(), kube::Error> {
    let selector = format!("{}={}", labels::APP_ID, app.app_id);
    let params = kube::api::DeleteParams::background();
    let list = kube::api::ListParams::default();
    Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace)
        .delete_collection(&params, &list.clone().labels(&selector))
        .await?;
    let jobs = format!("{}={}", labels::BUILD_OF, app.app_id);
    Api::<Job>::namespaced(ctx.client.clone(), app.namespace.as_str())
        .delete_collection(&params, &list.labels(&jobs))
        .await?;
    Ok(())
}

/// Forgets an App's failed builds (their BuildRequests and Jobs), so that its next pass asks
/// for them again: called when the App's Secrets change, since new repository credentials are
/// the usual fix of a failed checkout. Builds that succeeded or still run are kept.
pub async fn retry_failed(ctx: &Context, app_id: &str) -> Result<usize, kube::Error> {
    let requests = Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace);
    let selector = format!("{}={app_id}", labels::APP_ID);
    let list = kube::api::ListParams::default().labels(&selector);
    let mut retried = 0;
    for held in requests.list(&list).await? {
        let failed = held.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
        if !failed {
            continue;
        }
        let request = &held.spec.request;
        let params = kube::api::DeleteParams::background();
        let jobs = Api::<Job>::namespaced(ctx.client.clone(), request.app.namespace.as_str());
        gone(jobs.delete(&held.name_any(), &params).await)?;
        gone(requests.delete(&held.name_any(), &params).await)?;
        tracing::info!(build = %request.build_id, "a failed build is tried again: its App's Secrets changed");
        retried += 1;
    }
    Ok(retried)
}

/// A deletion's outcome, where "not found" is as good as deleted.
fn gone<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// The build id of a Git workload at a revision.
pub fn build_id(app: &wire::AppRef, component: &str, revision: &str) -> String {
    let short = &revision[..revision.len().min(12)];
    object_name(&[app.name.as_str(), component, short])
}

/// The BuildRequest of a Git workload at its App's revision, if it was asked for.
pub async fn requested(
    ctx: &Context,
    deploy: &wire::AppDeploy,
    workload: &wire::Workload,
) -> Result<Option<BuildRequest>, kube::Error> {
    let id = build_id(&deploy.app, workload.name.as_str(), &deploy.revision);
    Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get_opt(&build_request_name(&id))
        .await
}

/// The build a Git workload asks for at its App's revision, pushing under `push_prefix` (pure).
pub fn request_for(
    push_prefix: &str,
    deploy: &wire::AppDeploy,
    workload: &wire::Workload,
    git: &wire::GitSource,
) -> wire::BuildRequest {
    let id = build_id(&deploy.app, workload.name.as_str(), &deploy.revision);
    let image = format!(
        "{}/{}/{}:{}",
        push_prefix,
        deploy.app.namespace.as_str(),
        crate::render::component_object(&deploy.app, workload.name.as_str()),
        &deploy.revision[..deploy.revision.len().min(12)]
    );
    wire::BuildRequest {
        build_id: wire::Id::new(&id),
        app: deploy.app.clone(),
        component: workload.name.clone(),
        source: git.clone(),
        image,
    }
}

/// A Git workload's image from its BuildRequest (pure); `None`: the build is yet to be asked for.
pub fn image(found: Option<&BuildRequest>) -> Image {
    let Some(found) = found else {
        return Image::Building("the image build is queued".into());
    };
    let status = found.status.clone().unwrap_or_default();
    match status.phase.as_deref() {
        Some("Succeeded") => Image::Ready(
            status
                .image
                .unwrap_or_else(|| found.spec.request.image.clone()),
        ),
        Some("Failed") => Image::Failed(format!("the image build failed: {}", status.message)),
        _ => Image::Building(format!(
            "building the image ({})",
            status.phase.as_deref().unwrap_or("Pending")
        )),
    }
}

/// What `Ready` says of a build in `phase`: done once it succeeded.
fn readiness<'a>(phase: &str, message: &'a str) -> Readiness<'a> {
    match phase {
        "Succeeded" => Readiness::done("Succeeded", message),
        "Failed" => Readiness::failed("Failed", message),
        _ => Readiness::progressing(message),
    }
}

/// The Ready message: the build's own, else its phase.
fn ready_message(phase: &str, message: &str) -> String {
    if message.is_empty() {
        format!("build {}", phase.to_lowercase())
    } else {
        message.to_owned()
    }
}

fn phase(name: &str) -> wire::BuildPhase {
    match name {
        "Running" => wire::BuildPhase::Running,
        "Succeeded" => wire::BuildPhase::Succeeded,
        "Failed" => wire::BuildPhase::Failed,
        _ => wire::BuildPhase::Pending,
    }
}

async fn reconcile(
    held: Arc<BuildRequest>,
    ctx: Arc<Context>,
) -> Result<Action, crate::apply::ApplyError> {
    let request = &held.spec.request;
    let old = held.status.clone().unwrap_or_default();
    if matches!(old.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return Ok(Action::await_change());
    }
    let namespace = request.app.namespace.as_str();
    let name = crate::crd::build_request_name(request.build_id.as_str());
    // What the Job is made with (the CA, the pull Secret) is read once, when it is made: a
    // running build's later passes only read its progress.
    let live = match ctx.applier.get("batch/v1", "Job", namespace, &name).await? {
        Some(live) => live,
        None => {
            if let Some(ca) = &ctx.builders.ca {
                ctx.applier
                    .apply(&ca_config_map(namespace, ca), false)
                    .await?;
            }
            let registry = crate::pull_secret::name(&ctx.client, namespace).await;
            ctx.applier
                .apply(&job(request, &ctx.builders, registry.as_deref()), false)
                .await?
        }
    };
    let (phase_name, mut message) = progress(&live);
    if phase_name == "Failed" {
        message = failure_lines(&ctx, request).await.unwrap_or(message);
    }
    let image = (phase_name == "Succeeded").then(|| request.image.clone());
    let generation = held.metadata.generation;
    let said = ready_message(phase_name, &message);
    let ready = readiness(phase_name, &said);
    let conditions = with_ready(&old.conditions, ready, generation, chrono::Utc::now());
    if old.phase.as_deref() != Some(phase_name)
        || old.message != message
        || old.observed_generation != generation
        || old.conditions != conditions
    {
        let api = Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace);
        let status = StatusPatch {
            status: BuildRequestProgress {
                observed_generation: generation,
                phase: phase_name,
                image: image.as_deref(),
                message: &message,
                conditions: &conditions,
            },
        };
        api.patch_status(
            &held.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .map_err(|source| crate::apply::ApplyError::Kube {
            kind: "BuildRequest".into(),
            name: held.name_any(),
            source,
        })?;
        ctx.reporter.report(wire::BuildStatus {
            build_id: request.build_id.clone(),
            phase: phase(phase_name),
            image,
            message: message.chars().take(4096).collect(),
            observed_at: chrono::Utc::now(),
        });
    }
    Ok(Action::requeue(Duration::from_secs(10)))
}

/// The last lines of a failed build's pod (its termination message), read from the App's
/// namespace; `None` when there is none to read (the pod is gone, or left no message).
async fn failure_lines(ctx: &Context, request: &wire::BuildRequest) -> Option<String> {
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
        ctx.client.clone(),
        request.app.namespace.as_str(),
    );
    let selector = format!("{}={}", labels::BUILD_ID, request.build_id);
    let list = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .inspect_err(|error| tracing::debug!(%error, "reading the failed build's pod"))
        .ok()?;
    let tail = list.items.iter().find_map(|pod| {
        let lines = failure(&serde_json::to_value(pod).ok()?)?;
        let tail: Vec<&str> = lines.lines().rev().take(FAILURE_LINES).collect();
        Some(tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    })?;
    // The message reaches every viewer of the App: the build's credentials are taken out.
    let redactor = crate::redact::for_builds(
        &ctx.client,
        request.app.namespace.as_str(),
        request.app.name.as_str(),
        request.component.as_str(),
    )
    .await;
    Some(redactor.apply(&tail))
}

/// How many of a failed build's last log lines its status carries.
const FAILURE_LINES: usize = 20;

fn error_policy(
    _held: Arc<BuildRequest>,
    error: &crate::apply::ApplyError,
    _ctx: Arc<Context>,
) -> Action {
    tracing::warn!(%error, "build reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the BuildRequest controller until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let held = Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace);
    let namespace = ctx.namespace.clone();
    // The build Jobs as the applier's caches see them change: it watches them wherever its
    // powers reach (the whole cluster, or each project namespace).
    let Some((resource, jobs)) = ctx.applier.changes("batch/v1", "Job") else {
        tracing::error!("the applier caches no Jobs; not reconciling builds");
        return;
    };
    Controller::new(held, watcher::Config::default())
        .watches_stream_with(
            jobs.map(Ok),
            move |job: DynamicObject| {
                let id = job.labels().get(labels::BUILD_ID)?;
                Some(
                    kube::runtime::reflector::ObjectRef::new(&build_request_name(id))
                        .within(&namespace),
                )
            },
            resource,
        )
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("build", reconcile),
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "build reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::job::tests::request;
    use super::*;

    #[test]
    fn a_build_is_ready_once_it_succeeded() {
        assert_eq!(readiness("Succeeded", "pushed").status, "True");
        assert_eq!(readiness("Running", "building").status, "Unknown");
        assert_eq!(readiness("Failed", "exit 1").status, "False");
        assert_eq!(ready_message("Running", ""), "build running");
    }

    #[test]
    fn a_workload_runs_its_image_once_the_build_succeeded() {
        assert_eq!(
            image(None),
            Image::Building("the image build is queued".into())
        );
        let request = request_for(
            "builds",
            &serde_json::from_value(json!({
                "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
                "revision": "0123456789abcdef", "progress_deadline_seconds": 60, "components": [],
            }))
            .unwrap(),
            &serde_json::from_value(json!({
                "name": "web", "source": {"type": "image", "image": "x"}, "replicas": 1,
            }))
            .unwrap(),
            &request(wire::BuildMode::Dockerfile).source,
        );
        assert_eq!(request.image, "builds/shop/shop-web:0123456789ab");
        let mut held = BuildRequest::new(
            &build_request_name(request.build_id.as_str()),
            crate::crd::BuildRequestSpec { request },
        );
        assert!(matches!(image(Some(&held)), Image::Building(_)));
        held.status = Some(crate::crd::BuildRequestStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert_eq!(
            image(Some(&held)),
            Image::Ready("builds/shop/shop-web:0123456789ab".into())
        );
    }
}
