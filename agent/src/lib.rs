//! `kubenest-agent`: the per-cluster operator. It runs with access to its own cluster's API server
//! only, never accepts inbound connections, and dials out to the hub ([`uplink`]).
//!
//! Commands become durable objects on the cluster before they are accepted ([`commands`]): a
//! StackDeploy per App, an AddonRelease per standalone addon, a BuildRequest per image build
//! ([`crd`]). Controllers then reconcile what is stored, with or without a hub:
//!
//! - [`stack`]: an App's addons and workloads, drift, phase and progress deadlines;
//! - [`addon`]: charts rendered with helm ([`helm`]), applied, committed to the cluster's GitOps
//!   repository ([`gitops`]), with exports published in a Secret ([`exports`]);
//! - [`build`]: the build Jobs of Git workloads (the builder image: Git and buildah);
//! - [`project`]: namespaces, for `project.ensure` and `project.delete`.
//!
//! Rendering ([`render`]), drift comparison ([`drift`]), workload readiness ([`readiness`]), export expansion, the checks of an App
//! ([`validate`]) and each StackDeploy pass's plan and decision are pure functions with unit
//! tests; IO lives in the controllers and [`apply`].
//!
//! # Layers
//!
//! No module imports from a layer above its own, and none takes part in a circle:
//!
//! 1. pure parts and the cluster's edges: [`render`], [`confine`] (what a chart may render),
//!    [`pod_security`] (the namespace labels, and their healing), [`drift`], [`readiness`],
//!    [`exports`], [`validate`], [`crd`], [`apply`], [`egress`] (helm's way out), [`helm`],
//!    [`gitops`], [`capacity`], [`report`] (the queue of status events to the hub, and the
//!    `app.status` of a StackDeploy), [`memory`] (what a controller remembers between its
//!    passes: its own state, shared with the command handlers where they need it), and
//!    [`boundary`] (the namespace check, through the applier's cache, and the
//!    [`boundary::Refusal`] every command answers with);
//! 2. [`context`]: what every controller and command handler shares;
//! 3. [`addon`], [`build`], [`objects`] (an App's live objects, for an `objects.request`);
//! 4. [`project`], [`stack`];
//! 5. [`commands`]: the hub's commands, stored and answered; the snapshot and resync;
//! 6. [`uplink`]: the session with the hub, which hands commands to [`commands`] and drains
//!    [`report`]'s queue.

pub mod addon;
pub mod apply;
pub mod args;
pub mod boundary;
pub mod build;
pub mod capacity;
pub mod certificates;
pub mod commands;
pub mod confine;
pub mod context;
pub mod crd;
pub mod drift;
pub mod drift_events;
pub mod egress;
pub mod exports;
pub mod fences;
pub mod gitops;
pub mod helm;
pub mod logs;
pub mod memory;
pub mod metrics;
pub mod objects;
pub mod pod_security;
pub mod project;
pub mod pull_secret;
pub mod readiness;
pub mod ready;
pub mod redact;
pub mod render;
pub mod report;
pub mod stack;
pub mod uplink;
pub mod validate;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use tokio_util::sync::CancellationToken;

use crate::context::{Builders, Context};
use crate::gitops::GitOps;
use crate::helm::Helm;
use crate::report::Reporter;
use crate::uplink::UplinkConfig;

/// What the agent needs to run.
#[derive(Clone)]
pub struct Config {
    pub client: kube::Client,
    pub uplink: UplinkConfig,
    /// Namespace of the agent's own objects.
    pub namespace: String,
    pub helm: Helm,
    /// The GitOps repository (URL or path) and branch, and where to keep the working clone.
    pub gitops: Option<(String, String, std::path::PathBuf)>,
    pub builders: Builders,
    /// Install the agent's CRDs at start (the chart does this in production).
    pub install_crds: bool,
    /// Namespaced powers: the role the agent binds in each project namespace (the chart's
    /// install); `None` when its credentials hold cluster-wide powers.
    pub project_grant: Option<apply::ProjectGrant>,
    /// Namespaces whose pods may connect to every isolated project's pods beside the agent's own
    /// (an ingress controller's).
    pub trusted_namespaces: Vec<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("uplink", &self.uplink)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("the agent's CRDs were not served in time")]
    CrdsNotServed,
    #[error(transparent)]
    Caches(#[from] apply::ApplyError),
}

/// Applies the agent's CRDs and waits until they are served.
pub async fn ensure_crds(client: &kube::Client) -> Result<(), StartError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(kubenest_crds::names::field_managers::AGENT).force();
    for crd in crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .map_err(|_| StartError::CrdsNotServed)?
            .map_err(|_| StartError::CrdsNotServed)?;
    }
    Ok(())
}

/// Runs the uplink and every controller until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), StartError> {
    let client = config.client.clone();
    if config.install_crds {
        ensure_crds(&client).await?;
    }
    let own = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": config.namespace},
    });
    Api::<Namespace>::all(client.clone())
        .patch(
            &config.namespace,
            &PatchParams::apply(kubenest_crds::names::field_managers::AGENT),
            &Patch::Apply(&own),
        )
        .await?;
    let kubernetes_version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|_| "unknown".into());
    let (reporter, events, connected) = Reporter::new();
    metrics::metrics().report_through(&reporter);
    let ctx = Arc::new(Context {
        client: client.clone(),
        namespace: config.namespace.clone(),
        cluster_id: config.uplink.cluster_id.to_string(),
        applier: apply::Applier::start(client.clone(), config.project_grant.clone(), &shutdown)
            .await?,
        reporter,
        helm: config.helm.clone(),
        gitops: config
            .gitops
            .clone()
            .map(|(remote, branch, work)| GitOps::new(remote, branch, work)),
        kubernetes_version,
        builders: config.builders.clone(),
        events: kubenest_runtime::events::EventSink::start(
            client.clone(),
            kubenest_crds::names::field_managers::AGENT,
            metrics::metrics().events.clone(),
            shutdown.child_token(),
        ),
        logs: Default::default(),
        trusted_namespaces: std::iter::once(config.namespace.clone())
            .chain(config.trusted_namespaces.iter().cloned())
            .collect(),
        kept: Default::default(),
    });
    // A reconcile that fails says so on its object, not only in this log.
    metrics::metrics()
        .reconciles
        .tell_errors_to(ctx.events.clone());
    // What the StackDeploy controller remembers of each App; the command handlers read it too.
    let apps = Arc::new(memory::AppMemory::default());
    let commands = commands::Commands::start(ctx.clone(), apps.clone());
    let stop = || {
        let shutdown = shutdown.clone();
        async move { shutdown.cancelled().await }
    };
    tokio::join!(
        uplink::run(
            config.uplink.clone(),
            commands,
            events,
            connected,
            shutdown.clone()
        ),
        stack::run(ctx.clone(), apps, stop()),
        addon::run(ctx.clone(), stop()),
        build::run(ctx.clone(), stop()),
        pod_security::run(client.clone(), stop()),
        verify::run(ctx.clone(), stop()),
        fences::watch(ctx.clone(), shutdown.clone()),
    );
    Ok(())
}

/// The cluster and organization a cluster token speaks for, read from its claims. The agent does
/// not verify its own token (it has no key); the hub does.
pub fn token_identity(token: &str) -> Option<(kubenest_contracts::Id, kubenest_contracts::Id)> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: kubenest_contracts::Claims = serde_json::from_slice(&bytes).ok()?;
    Some((claims.cluster_id?, claims.org_id?))
}
