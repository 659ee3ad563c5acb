//! Fetch: what one pass knows before it writes anything.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kubenest_contracts as wire;
use serde_json::Value;

use super::{Error, Stack};
use crate::apply::ObjectId;
use crate::boundary::check_namespace;
use crate::build::{self, Image};
use crate::certificates::{self, Issued};
use crate::crd::{BuildRequest, StackDeploy, StackDeployStatus};
use crate::render;

/// The facts one pass decides on.
#[derive(Debug)]
pub struct Facts<'a> {
    pub held: &'a StackDeploy,
    /// The status as this process last wrote it (or as the cache holds it).
    pub old: StackDeployStatus,
    /// When the pass started: rollout clocks and deadlines are measured from it.
    pub now: DateTime<Utc>,
    /// Why the StackDeploy is outside its project's namespace; nothing is applied then.
    pub rejection: Option<String>,
    /// Every object of the App is due a write regardless of its stamp.
    pub full_pass_due: bool,
    /// Where Git workloads' images are pushed.
    pub push_prefix: &'a str,
    /// The BuildRequest of each Git workload at this revision (`None`: not asked for yet), by
    /// component name.
    pub builds: BTreeMap<&'a str, Option<BuildRequest>>,
    /// The live objects (Deployment, Service, Ingress) of each workload that renders them, by
    /// id, for drift; read only when the revision is not a fresh one (a fresh revision changes
    /// them anyway).
    pub live: BTreeMap<ObjectId, Value>,
    /// The certificate of each workload whose ingress has `tls` and no `tls_secret`, by
    /// component name: kept or newly issued, or why there is none.
    pub certificates: BTreeMap<&'a str, Result<Issued, String>>,
}

/// The kinds a plain workload renders.
const WORKLOAD_KINDS: [(&str, &str); 3] = [
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
];

impl<'a> Facts<'a> {
    /// Reads the facts of `held` (component names are unique: the command is refused otherwise).
    pub async fn gather(stack: &'a Stack, held: &'a StackDeploy) -> Result<Self, Error> {
        let ctx = &stack.ctx;
        let deploy = &held.spec.deploy;
        let app = &deploy.app;
        let old = stack.apps.last_written(held);
        let now = Utc::now();
        let boundary = check_namespace(
            &ctx.applier,
            app.namespace.as_str(),
            app.project_id.as_str(),
            "/app/namespace",
        )
        .await;
        let mut facts = Self {
            held,
            old,
            now,
            rejection: boundary.err().map(|refusal| refusal.message),
            full_pass_due: false,
            push_prefix: &ctx.builders.push_prefix,
            builds: BTreeMap::new(),
            live: BTreeMap::new(),
            certificates: BTreeMap::new(),
        };
        if facts.rejection.is_some() {
            return Ok(facts);
        }
        // The full-pass clock starts with a fresh revision's own pass too, or the pass right
        // after it (woken by its own status write) would apply everything a second time.
        facts.full_pass_due = stack.passes.due(app.app_id.as_str());
        let fresh_revision = facts.fresh_revision();
        for component in &deploy.components {
            let wire::Component::Workload(w) = component else {
                continue;
            };
            if let Some(ingress) = &w.ingress
                && ingress.tls
                && ingress.tls_secret.is_none()
            {
                let secret = render::tls_secret(app, w.name.as_str());
                let namespace = app.namespace.as_str();
                let found =
                    certificates::certificate(&ctx.applier, namespace, &secret, &ingress.host, now)
                        .await?;
                facts.certificates.insert(w.name.as_str(), found);
            }
            let renders = match &w.source {
                wire::WorkloadSource::Git(_) => {
                    let found = build::requested(ctx, deploy, w).await?;
                    let ready = matches!(build::image(found.as_ref()), Image::Ready(_));
                    facts.builds.insert(w.name.as_str(), found);
                    ready
                }
                wire::WorkloadSource::Helm { .. } => false,
                wire::WorkloadSource::Image { .. } => true,
            };
            if renders && !fresh_revision {
                // A workload's objects all bear its name (`render::workload`).
                let name = render::component_object(app, w.name.as_str());
                for (api_version, kind) in WORKLOAD_KINDS {
                    // A workload without an ingress renders none: looking for it would be a
                    // GET per pass that finds nothing (the cache holds only what exists).
                    if kind == "Ingress" && w.ingress.is_none() {
                        continue;
                    }
                    let live = ctx
                        .applier
                        .get(api_version, kind, app.namespace.as_str(), &name)
                        .await?;
                    if let Some(live) = live {
                        let id = (api_version.to_owned(), kind.to_owned(), name.clone());
                        facts.live.insert(id, live);
                    }
                }
            }
        }
        Ok(facts)
    }

    /// Whether the stored revision is one this App's status has not observed yet.
    pub fn fresh_revision(&self) -> bool {
        self.old.observed_revision.as_deref() != Some(self.held.spec.deploy.revision.as_str())
    }
}
