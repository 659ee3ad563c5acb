//! Image builds from Git: a BuildRequest becomes a Job in the App's namespace (Kaniko with the
//! repository's Dockerfile, or the Cloud Native Buildpacks lifecycle), whose outcome the agent
//! reports as `build.status`. A Git workload asks for the build of its revision and runs the
//! image once the build succeeded.

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
use serde_json::{Value, json};

use crate::context::Context;
use crate::crd::{BuildRequest, BuildRequestProgress, StatusPatch, build_request_name};
use crate::render::object_name;

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

/// The ConfigMap in an App's namespace that holds the CA its builds trust (beside the public
/// roots) for the Git server and the registry, when the agent was given one.
pub const CA_CONFIG_MAP: &str = "kubenest-build-ca";

/// The CA ConfigMap of an App's namespace (pure).
pub fn ca_config_map(namespace: &str, ca: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CA_CONFIG_MAP, "namespace": namespace,
                     "labels": {labels::MANAGED_BY: labels::MANAGED_BY_AGENT}},
        "data": {"ca.crt": ca},
    })
}

/// The build Job of a request (pure): one pod of the builder image (images/builder) checks out
/// the revision, builds its Dockerfile with buildah and pushes the image. It mounts, each only
/// if it exists, the component's Git credentials ([`wire::git_secret`]), the project's registry
/// credentials (`registry_secret`, the pull Secret of its namespace, to push) and the CA of
/// [`CA_CONFIG_MAP`]. When the
/// build fails, its log's last lines become the container's termination message
/// (`FallbackToLogsOnError`), which [`failure`] reads back.
pub fn job(
    request: &wire::BuildRequest,
    builders: &crate::context::Builders,
    registry_secret: Option<&str>,
) -> Value {
    let name = build_request_name(request.build_id.as_str());
    let source = &request.source;
    let mode = match source.mode {
        wire::BuildMode::Dockerfile => "dockerfile",
        wire::BuildMode::Buildpack => "buildpack",
    };
    let git_secret = wire::git_secret(request.app.name.as_str(), request.component.as_str());
    let mut volumes = vec![
        json!({"name": "workspace", "emptyDir": {}}),
        json!({"name": "storage", "emptyDir": {}}),
        json!({"name": "git", "secret": {"secretName": git_secret.as_str(), "optional": true,
                                         "defaultMode": 0o400}}),
    ];
    let mut mounts = vec![
        json!({"name": "workspace", "mountPath": "/workspace"}),
        json!({"name": "storage", "mountPath": "/var/lib/containers"}),
        json!({"name": "git", "mountPath": "/kubenest/git", "readOnly": true}),
    ];
    if let Some(secret) = registry_secret {
        volumes.push(json!({"name": "registry", "secret": {"secretName": secret,
            "optional": true, "defaultMode": 0o400}}));
        mounts
            .push(json!({"name": "registry", "mountPath": "/kubenest/registry", "readOnly": true}));
    }
    if builders.ca.is_some() {
        volumes.push(json!({"name": "ca", "configMap": {"name": CA_CONFIG_MAP}}));
        mounts.push(json!({"name": "ca", "mountPath": "/kubenest/ca", "readOnly": true}));
    }
    let container = json!({
        "name": "build",
        "image": builders.image,
        "env": [
            {"name": "GIT_REPOSITORY", "value": source.repository},
            {"name": "GIT_REF", "value": source.git_ref},
            {"name": "CONTEXT_DIR", "value": source.context_dir.clone().unwrap_or_default()},
            {"name": "BUILD_MODE", "value": mode},
            {"name": "IMAGE", "value": request.image},
        ],
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    });
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": request.app.namespace.as_str(),
            "labels": {
                labels::BUILD_OF: request.app.app_id.as_str(),
                labels::BUILD_ID: request.build_id.as_str(),
                labels::MANAGED_BY: labels::MANAGED_BY_AGENT,
            },
        },
        "spec": {
            // A build that failed fails again from the same revision: no retry.
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                // The build's pods are the component's too: its logs stream with the
                // component's (`logs.subscribe`), tagged with the build pod's name.
                "metadata": {"labels": {
                    labels::BUILD_ID: request.build_id.as_str(),
                    labels::BUILD_OF: request.app.app_id.as_str(),
                    labels::COMPONENT: request.component.as_str(),
                }},
                "spec": {
                    "restartPolicy": "Never",
                    // The builder talks to Git and the registry only, never to the cluster.
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// The last lines a failed build pod left as its termination message, if any (pure).
pub fn failure(pod: &Value) -> Option<String> {
    let statuses = pod.pointer("/status/containerStatuses")?.as_array()?;
    statuses.iter().find_map(|s| {
        let message = s.pointer("/state/terminated/message")?.as_str()?.trim();
        (!message.is_empty()).then(|| message.to_owned())
    })
}

/// (phase, message) of a build from its Job (pure).
pub fn progress(job: &Value) -> (&'static str, String) {
    let count = |field: &str| {
        job.pointer(&format!("/status/{field}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let failed_condition = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter().find(|c| {
                c.get("type").and_then(Value::as_str) == Some("Failed")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
        .map(|c| {
            c.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the build job failed")
                .to_owned()
        });
    if count("succeeded") > 0 {
        ("Succeeded", String::new())
    } else if let Some(message) = failed_condition {
        ("Failed", message)
    } else if count("active") > 0 {
        ("Running", "the build is running".into())
    } else {
        ("Pending", "waiting for the build pod".into())
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
    if let Some(ca) = &ctx.builders.ca {
        ctx.applier
            .apply(&ca_config_map(request.app.namespace.as_str(), ca), false)
            .await?;
    }
    let registry = pull_secret(&ctx, request.app.namespace.as_str()).await;
    let live = ctx
        .applier
        .apply(&job(request, &ctx.builders, registry.as_deref()), false)
        .await?;
    let (phase_name, mut message) = progress(&live);
    if phase_name == "Failed" {
        message = failure_lines(&ctx, request).await.unwrap_or(message);
    }
    let image = (phase_name == "Succeeded").then(|| request.image.clone());
    if old.phase.as_deref() != Some(phase_name) || old.message != message {
        let api = Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace);
        let status = StatusPatch {
            status: BuildRequestProgress {
                phase: phase_name,
                image: image.as_deref(),
                message: &message,
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

/// The project's registry Secret: the pull Secret `project.ensure` put on the namespace's
/// `default` ServiceAccount, which the workloads pull with (so the build pushes where they pull).
async fn pull_secret(ctx: &Context, namespace: &str) -> Option<String> {
    let accounts = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(
        ctx.client.clone(),
        namespace,
    );
    let account = accounts
        .get_opt("default")
        .await
        .inspect_err(|error| tracing::debug!(%error, "reading the namespace's pull secret"))
        .ok()??;
    account
        .image_pull_secrets?
        .into_iter()
        .next()
        .map(|r| r.name)
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
    list.items.iter().find_map(|pod| {
        let lines = failure(&serde_json::to_value(pod).ok()?)?;
        let tail: Vec<&str> = lines.lines().rev().take(FAILURE_LINES).collect();
        Some(tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    })
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
    use super::*;

    fn request(mode: wire::BuildMode) -> wire::BuildRequest {
        wire::BuildRequest {
            build_id: "shop-web-abc".into(),
            app: wire::AppRef {
                app_id: "a1".into(),
                name: "shop".into(),
                project_id: "p1".into(),
                namespace: "shop".into(),
            },
            component: "web".into(),
            source: wire::GitSource {
                repository: "https://git.example.test/shop.git".into(),
                git_ref: "main".into(),
                context_dir: Some("web".into()),
                mode,
            },
            image: "builds/shop/web:abc".into(),
        }
    }

    fn builders() -> crate::context::Builders {
        crate::context::Builders {
            image: "builder:v1".into(),
            push_prefix: "builds".into(),
            ca: Some("PEM".into()),
        }
    }

    #[test]
    fn a_build_is_one_pod_of_the_builder_with_the_source_and_the_credentials_it_may_use() {
        let job = job(
            &request(wire::BuildMode::Dockerfile),
            &builders(),
            Some("kubenest-registry"),
        );
        assert_eq!(job["metadata"]["namespace"], "shop");
        assert_eq!(job["spec"]["backoffLimit"], 0);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false);
        let container = &pod["containers"][0];
        assert_eq!(container["image"], "builder:v1");
        assert_eq!(
            container["terminationMessagePolicy"],
            "FallbackToLogsOnError"
        );
        let env: BTreeMap<&str, &str> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(env["GIT_REPOSITORY"], "https://git.example.test/shop.git");
        assert_eq!(env["GIT_REF"], "main");
        assert_eq!(env["CONTEXT_DIR"], "web");
        assert_eq!(env["BUILD_MODE"], "dockerfile");
        assert_eq!(env["IMAGE"], "builds/shop/web:abc");
        let volumes: BTreeMap<&str, &Value> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v))
            .collect();
        assert_eq!(volumes["git"]["secret"]["secretName"], "shop-web-git");
        assert_eq!(volumes["git"]["secret"]["optional"], true);
        assert_eq!(
            volumes["registry"]["secret"]["secretName"],
            "kubenest-registry"
        );
        assert_eq!(volumes["ca"]["configMap"]["name"], CA_CONFIG_MAP);
        let no_ca = crate::context::Builders {
            ca: None,
            ..builders()
        };
        let job = super::job(&request(wire::BuildMode::Dockerfile), &no_ca, None);
        let names: Vec<&str> = job["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert!(!names.contains(&"ca") && !names.contains(&"registry"));
    }

    #[test]
    fn a_failed_build_pod_gives_back_its_termination_message() {
        let pod = json!({"status": {"containerStatuses": [{"state": {"terminated": {
            "exitCode": 1, "message": "STEP 2/2: RUN false\nError: exit status 1\n"}}}]}});
        assert_eq!(
            failure(&pod).as_deref(),
            Some("STEP 2/2: RUN false\nError: exit status 1")
        );
        assert_eq!(failure(&json!({"status": {}})), None);
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

    #[test]
    fn job_status_maps_to_build_phases() {
        assert_eq!(progress(&json!({})).0, "Pending");
        assert_eq!(progress(&json!({"status": {"active": 1}})).0, "Running");
        assert_eq!(
            progress(&json!({"status": {"succeeded": 1}})).0,
            "Succeeded"
        );
        let failed = json!({"status": {"failed": 2, "conditions": [
            {"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}});
        assert_eq!(
            progress(&failed),
            ("Failed", "BackoffLimitExceeded".to_owned())
        );
    }
}
