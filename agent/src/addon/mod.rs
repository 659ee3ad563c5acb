//! Addons: a pinned chart rendered with helm, applied by the agent, recorded in the GitOps
//! repository, with its connection facts published in an export Secret.
//!
//! The same steps serve an App's addon components (inside the StackDeploy controller) and
//! standalone addons (the AddonRelease controller, [`release`], with its own revision history).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use kube::api::Api;
use kubenest_contracts as wire;
use kubenest_crds::names::labels;
use serde_json::{Value, json};

mod release;

pub use release::{release_status, run};

use crate::apply::{ObjectId, id_of};
use crate::context::Context;
use crate::drift;
use crate::exports::{self, Facts};
use crate::gitops::{self, AddonRecord, GitOps};
use crate::readiness;

/// What went wrong with an addon.
#[derive(Debug, thiserror::Error)]
pub enum AddonError {
    #[error(transparent)]
    Helm(#[from] crate::helm::HelmError),
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    #[error(transparent)]
    Export(#[from] exports::ExportError),
    #[error("gitops: {0}")]
    Git(#[from] crate::gitops::GitError),
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Confined(#[from] crate::confine::Refused),
}

/// The error's category in the reconcile metrics.
impl kubenest_runtime::reconciles::Category for AddonError {
    fn category(&self) -> &'static str {
        match self {
            AddonError::Helm(_) => "helm",
            AddonError::Apply(e) => e.category(),
            AddonError::Export(_) => "export",
            AddonError::Git(_) => "gitops",
            AddonError::Kube(_) => "kubernetes",
            AddonError::Confined(_) => "invalid",
        }
    }
}

/// One addon to bring to its desired state.
#[derive(Debug, Clone)]
pub struct AddonTarget<'a> {
    /// The Helm release name (and prefix of its objects).
    pub release: String,
    pub namespace: &'a str,
    /// Labels every object of the addon carries (the owner's, for pruning).
    pub labels: BTreeMap<String, String>,
    pub export_secret: String,
    /// The component or addon name, for people and the GitOps folder.
    pub name: &'a str,
    pub definition: &'a str,
    pub chart: &'a wire::ChartRef,
    pub values: &'a wire::HelmValues,
    pub exports: &'a wire::ExportMapping,
    /// A chart that is not kubenest's (a Helm workload's): rendered with the App's values and
    /// nothing of kubenest's (no `fullnameOverride`, no `kubenest.*` values), and given no
    /// export Secret. The catalog's charts are kubenest's and take both.
    pub third_party: bool,
    /// Write every object even when its stamp says it is current.
    pub force: bool,
    /// The App is paused: the chart's workloads are stopped ([`readiness::pause`]).
    pub paused: bool,
}

/// Where an addon stands after it was applied.
#[derive(Debug, Clone)]
pub struct AddonOutcome {
    pub objects: BTreeSet<ObjectId>,
    pub ready: bool,
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    pub message: String,
    pub export: wire::PublishedExport,
    pub git_commit: Option<String>,
    /// Why the GitOps repository could not be written this pass (the addon runs regardless).
    pub git_error: Option<String>,
    /// Fields another manager had changed, applied back by this pass.
    pub drift: Vec<wire::DriftDetail>,
    /// Rollouts of the chart's Deployments that missed their progress deadline
    /// (`blocked_sync`).
    pub blocked: Vec<wire::DriftDetail>,
    /// The chart's workload objects not ready yet: `blocked_sync` once the App's progress
    /// deadline passes ([`drift::stalled`]).
    pub stalled: Vec<wire::DriftDetail>,
}

/// The export Secret's values: the password kept from before (or generated now) and every
/// export expanded.
async fn export_values(
    ctx: &Context,
    target: &AddonTarget<'_>,
) -> Result<BTreeMap<String, String>, AddonError> {
    // A Secret the cache has not seen is read from the API server: a cache that lags behind
    // never rotates a database's credentials.
    let password = ctx
        .applier
        .get("v1", "Secret", target.namespace, &target.export_secret)
        .await?
        .and_then(|live| password_of(&live))
        .unwrap_or_else(exports::generate_password);
    let facts = Facts {
        release: &target.release,
        namespace: target.namespace,
        password: &password,
        values: target.values,
    };
    let mut values = exports::expand(target.exports, &facts)?;
    values.entry("password".into()).or_insert(password);
    Ok(values)
}

/// The `password` key of a Secret as JSON (base64 `data`).
fn password_of(secret: &Value) -> Option<String> {
    let encoded = secret.pointer("/data/password")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok().filter(|p| !p.is_empty())
}

/// Renders, applies and records one addon.
pub async fn apply(ctx: &Context, target: &AddonTarget<'_>) -> Result<AddonOutcome, AddonError> {
    let mut objects = BTreeSet::new();
    let mut chart_values = Value::Object(target.values.clone());
    if !target.third_party {
        chart_values["fullnameOverride"] = target.release.clone().into();
        chart_values["kubenest"] = json!({"exportSecret": target.export_secret});
    }
    let rendered = ctx
        .helm
        .template(
            &target.release,
            target.namespace,
            target.chart,
            &chart_values,
            async {
                if target.chart.repository.starts_with("oci://") {
                    crate::pull_secret::docker_config(&ctx.client, target.namespace).await
                } else {
                    None
                }
            },
        )
        .await?;
    // Checked whole before anything is written, the export Secret included: a refused chart
    // leaves nothing behind.
    confine(ctx, target.namespace, &rendered).await?;
    let values = if target.third_party {
        BTreeMap::new()
    } else {
        publish_exports(ctx, target, &mut objects).await?
    };
    apply_rendered(ctx, target, rendered, values, objects).await
}

/// Ok when every object of `rendered` may be applied in `namespace` ([`crate::confine`]),
/// with each kind's scope from the cluster's discovery.
async fn confine(ctx: &Context, namespace: &str, rendered: &[Value]) -> Result<(), AddonError> {
    let mut scopes = BTreeMap::new();
    for (api_version, kind) in rendered.iter().filter_map(crate::confine::kind_of) {
        let key = (api_version.to_owned(), kind.to_owned());
        if let std::collections::btree_map::Entry::Vacant(entry) = scopes.entry(key) {
            entry.insert(ctx.applier.scope(api_version, kind).await?);
        }
    }
    crate::confine::admit(rendered, namespace, |api_version, kind| {
        scopes
            .get(&(api_version.to_owned(), kind.to_owned()))
            .copied()
            .unwrap_or(crate::confine::Scope::Unknown)
    })?;
    crate::confine::credentials(rendered, &credentials(ctx, namespace).await?)?;
    Ok(())
}

/// The names of `namespace`'s Secrets of credentials: those written labelled as such, the
/// registry Secret the namespace's pulls use, and [`wire::REGISTRY_SECRET`] even before it
/// exists (a chart must not create it either).
async fn credentials(ctx: &Context, namespace: &str) -> Result<BTreeSet<String>, kube::Error> {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let mut names = BTreeSet::from([wire::REGISTRY_SECRET.to_owned()]);
    let labelled =
        kube::api::ListParams::default().labels(&format!("{}=true", labels::CREDENTIALS));
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .list_metadata(&labelled)
        .await?;
    names.extend(secrets.items.into_iter().filter_map(|s| s.metadata.name));
    let account = Api::<ServiceAccount>::namespaced(ctx.client.clone(), namespace)
        .get_opt("default")
        .await?;
    let pulls = account
        .and_then(|a| a.image_pull_secrets)
        .unwrap_or_default();
    names.extend(pulls.into_iter().map(|reference| reference.name));
    Ok(names)
}

/// Writes the export Secret of a catalog addon; returns its values.
async fn publish_exports(
    ctx: &Context,
    target: &AddonTarget<'_>,
    objects: &mut BTreeSet<ObjectId>,
) -> Result<BTreeMap<String, String>, AddonError> {
    let values = export_values(ctx, target).await?;
    let engine = base64::engine::general_purpose::STANDARD;
    let data: serde_json::Map<String, Value> = values
        .iter()
        .map(|(k, v)| (k.clone(), engine.encode(v).into()))
        .collect();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": target.export_secret, "namespace": target.namespace, "labels": target.labels},
        "data": data,
    });
    ctx.applier.apply(&secret, target.force).await?;
    objects.extend(id_of(&secret));
    Ok(values)
}

/// Applies what the chart rendered (in the project's namespace, with the owner's labels) and
/// records it in the GitOps repository.
async fn apply_rendered(
    ctx: &Context,
    target: &AddonTarget<'_>,
    rendered: Vec<Value>,
    values: BTreeMap<String, String>,
    mut objects: BTreeSet<ObjectId>,
) -> Result<AddonOutcome, AddonError> {
    let mut ready = true;
    let (mut ready_replicas, mut desired_replicas) = (0, 0);
    let mut waiting = String::new();
    // A Service waits on the pods behind it: what keeps them from running says more, so it is
    // named only when nothing else is waited for.
    let mut waiting_on_service = String::new();
    let idle: Vec<bool> = rendered
        .iter()
        .map(|object| target.paused || readiness::idle(object, &rendered))
        .collect();
    let mut applied = Vec::new();
    let mut drifted = Vec::new();
    let mut blocked = Vec::new();
    let mut stalled = Vec::new();
    for (mut object, idle) in rendered.into_iter().zip(idle) {
        let Some(id) = id_of(&object) else { continue };
        object["metadata"]["namespace"] = target.namespace.into();
        let labels = object["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut labels: BTreeMap<String, Value> = labels.into_iter().collect();
        for (k, v) in &target.labels {
            labels.insert(k.clone(), v.clone().into());
        }
        object["metadata"]["labels"] = json!(labels);
        if target.paused {
            readiness::pause(&mut object);
        }
        // A field another manager changed is reported and put back.
        let before = ctx
            .applier
            .get(&id.0, &id.1, target.namespace, &id.2)
            .await?;
        let found: Vec<wire::DriftDetail> = before
            .map(|before| drift::drift(&object, &before))
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.manager.is_some())
            .collect();
        let live = if found.is_empty() {
            ctx.applier.apply(&object, target.force).await?
        } else {
            drifted.extend(found);
            ctx.applier.restore(&object).await?
        };
        let stuck = (id.1 == "Deployment")
            .then(|| drift::blocked(&live))
            .flatten();
        let judged = if id.1 == "Service" {
            let slices = ctx.applier.endpoint_slices(target.namespace, &id.2).await?;
            Some(readiness::service(&live, &slices, idle))
        } else {
            readiness::object(&id.1, &live, target.paused).map(|mut judged| {
                if stuck.is_some() {
                    "the rollout exceeded its progress deadline".clone_into(&mut judged.message);
                }
                judged
            })
        };
        blocked.extend(stuck);
        if let Some(judged) = judged {
            ready &= judged.ready;
            ready_replicas += judged.ready_replicas;
            desired_replicas += judged.desired_replicas;
            let first = if id.1 == "Service" {
                &mut waiting_on_service
            } else {
                &mut waiting
            };
            if !judged.ready {
                stalled.extend(drift::stalled(&id.1, &id.2, &judged.message));
            }
            if !judged.ready && first.is_empty() {
                *first = format!("{} {}: {}", id.1, id.2, judged.message);
            }
        }
        objects.insert(id);
        applied.push(object);
    }
    if waiting.is_empty() {
        waiting = waiting_on_service;
    }

    let (git_commit, git_error) = match record(ctx, target, &applied).await {
        Ok(commit) => (commit, None),
        // The repository is a record for people, not a part of running the addon: a failed
        // commit or push is reported beside a revision that runs, and tried again next pass.
        Err(error) => {
            tracing::warn!(addon = target.name, %error, "the GitOps repository was not written");
            (None, Some(error.to_string()))
        }
    };
    Ok(AddonOutcome {
        objects,
        ready,
        ready_replicas,
        desired_replicas,
        message: if ready {
            String::new()
        } else if desired_replicas == 0 {
            waiting
        } else {
            format!("{ready_replicas}/{desired_replicas} replicas ready; {waiting}")
        },
        export: wire::PublishedExport {
            component: wire::Name::new(target.name),
            secret: wire::Name::new(&target.export_secret),
            keys: values.keys().cloned().collect(),
        },
        git_commit,
        git_error,
        drift: drifted,
        blocked,
        stalled,
    })
}

/// Commits the addon's folder to the GitOps repository, when the agent has one and the chart
/// is an addon's (a Helm workload is the App's, never committed); returns the commit holding
/// it.
async fn record(
    ctx: &Context,
    target: &AddonTarget<'_>,
    applied: &[Value],
) -> Result<Option<String>, AddonError> {
    let Some(gitops) = ctx.gitops.as_ref().filter(|_| !target.third_party) else {
        return Ok(None);
    };
    let vendored = match ctx.helm.source(target.chart)? {
        crate::helm::Source::Local(dir) => {
            Some(gitops::chart_files(&dir).map_err(gitops::GitError::Io)?)
        }
        crate::helm::Source::Remote { .. } => None,
    };
    let values = Value::Object(target.values.clone());
    let files = gitops::addon_files(&AddonRecord {
        name: &target.release,
        namespace: target.namespace,
        chart: target.chart,
        vendored: vendored.as_ref(),
        values: &values,
        applied,
        export_secret: &target.export_secret,
    });
    let dir = GitOps::addon_dir(&ctx.cluster_id, target.namespace, &target.release);
    let message = format!(
        "{} {} {} for {} in namespace {}",
        target.definition, target.chart.name, target.chart.version, target.name, target.namespace
    );
    Ok(Some(gitops.commit_addon(&dir, &files, &message).await?))
}

/// Removes an addon's folder from the GitOps repository.
pub async fn forget(
    ctx: &Context,
    namespace: &str,
    release: &str,
    name: &str,
) -> Result<(), AddonError> {
    if let Some(gitops) = &ctx.gitops {
        let dir = GitOps::addon_dir(&ctx.cluster_id, namespace, release);
        gitops
            .remove_addon(
                &dir,
                &format!("Remove addon {name} from namespace {namespace}"),
            )
            .await?;
    }
    Ok(())
}
