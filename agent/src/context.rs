//! What every part of the agent shares.

use crate::apply::Applier;
use crate::crd::{StackDeploy, StackDeployStatus};
use crate::gitops::GitOps;
use crate::helm::Helm;
use crate::report::{LastReports, Reporter};
use kube::ResourceExt;
use kubenest_contracts::{AppDeploy, AppStatus};
use std::sync::Arc;

/// The agent's shared context: the local API server, where its own objects live, and the
/// uplink's reporter.
pub struct Context {
    pub client: kube::Client,
    /// Namespace of the agent's StackDeploys, AddonReleases and BuildRequests.
    pub namespace: String,
    pub cluster_id: String,
    pub applier: Applier,
    pub reporter: Reporter,
    pub helm: Helm,
    /// The cluster's GitOps repository, where addons' charts and values are committed.
    pub gitops: Option<GitOps>,
    /// The local API server's version, for `hello`.
    pub kubernetes_version: String,
    /// Images of the build Jobs.
    pub builders: Builders,
    /// When each App's objects were last all written regardless of their stamps.
    pub full_passes: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    /// The `app.deploy` each App's StackDeploy was last written with by this process, so a
    /// re-send of the same command (the management side re-sends until it hears the answer)
    /// is answered without writing it again.
    pub stored: std::sync::Mutex<std::collections::HashMap<String, Arc<AppDeploy>>>,
    /// The `app.status` this process last reported for each App. A resync sends it again: the
    /// StackDeploy's status is written after the report, so it can be one step behind, and
    /// resending it would tell the management side an older state as the newest (and the next
    /// pass, finding nothing changed, would not correct it).
    pub reported: LastReports,
    /// The status this process last wrote to each App's StackDeploy: (StackDeploy uid, status).
    /// Only the agent writes that status, so this is never older than the controller's cached
    /// copy, which lags behind the write it just made (see [`Context::last_written`]).
    pub written: std::sync::Mutex<std::collections::HashMap<String, (String, StackDeployStatus)>>,
    /// Where the agent's Kubernetes Events go (on StackDeploys and the objects it applies).
    pub events: kubenest_runtime::events::EventSink,
    /// The live log streams.
    pub logs: crate::logs::streams::Streams,
}

/// How often every object of an App is written again even when its stamp says it is current,
/// so changes by others to fields drift detection does not compare are healed too.
pub const FULL_PASS_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

impl Context {
    /// Whether App `app_id` is due a full pass (and marks it done).
    pub fn full_pass_due(&self, app_id: &str) -> bool {
        let Ok(mut passes) = self.full_passes.lock() else {
            return true;
        };
        let now = std::time::Instant::now();
        let due = passes
            .get(app_id)
            .is_none_or(|last| now.duration_since(*last) >= FULL_PASS_EVERY);
        if due {
            passes.insert(app_id.to_owned(), now);
        }
        due
    }

    /// The StackDeploy's status as this process last wrote it, or as `held` (the controller's
    /// cached copy) has it when this process has not written it. A pass woken right after the
    /// previous one (by the Deployment that pass created) often runs before the cache has seen
    /// that pass's status write; judged on the cached copy, it would take the revision for a
    /// new one and apply everything again.
    pub fn last_written(&self, app_id: &str, held: &StackDeploy) -> StackDeployStatus {
        let uid = held.uid().unwrap_or_default();
        self.written
            .lock()
            .ok()
            .and_then(|w| {
                w.get(app_id)
                    .filter(|(u, _)| *u == uid)
                    .map(|(_, s)| s.clone())
            })
            .or_else(|| held.status.clone())
            .unwrap_or_default()
    }

    /// Notes the status just written to App `app_id`'s StackDeploy `held`.
    pub fn wrote(&self, app_id: &str, held: &StackDeploy, status: StackDeployStatus) {
        if let Ok(mut written) = self.written.lock() {
            written.insert(app_id.to_owned(), (held.uid().unwrap_or_default(), status));
        }
    }

    /// Forgets what the agent keeps about an App: its full-pass clock, its stored command and
    /// its written status (the App is gone).
    pub fn forget_app(&self, app_id: &str) {
        if let Ok(mut passes) = self.full_passes.lock() {
            passes.remove(app_id);
        }
        if let Ok(mut written) = self.written.lock() {
            written.remove(app_id);
        }
        self.forget_stored(app_id);
        self.reported.forget(app_id);
    }

    /// Sends `status` and remembers it as the App's last report.
    pub fn report_app(&self, status: AppStatus) {
        self.reported.record(&status);
        self.reporter.report(status);
    }

    /// Whether `deploy` is exactly what this process last stored for its App.
    pub fn already_stored(&self, deploy: &AppDeploy) -> bool {
        self.stored.lock().is_ok_and(|stored| {
            stored
                .get(deploy.app.app_id.as_str())
                .is_some_and(|held| **held == *deploy)
        })
    }

    /// Remembers that `deploy` is stored.
    pub fn remember_stored(&self, deploy: AppDeploy) {
        if let Ok(mut stored) = self.stored.lock() {
            stored.insert(deploy.app.app_id.to_string(), Arc::new(deploy));
        }
    }

    /// Forgets what was stored for `app_id` (its App is being deleted).
    pub fn forget_stored(&self, app_id: &str) {
        if let Ok(mut stored) = self.stored.lock() {
            stored.remove(app_id);
        }
    }

    /// Keeps the stored command of `deploy`'s App only if the StackDeploy holds exactly it:
    /// someone else changed it (or this is an older copy), so a re-send is written again.
    pub fn check_stored(&self, deploy: &AppDeploy) {
        if let Ok(mut stored) = self.stored.lock() {
            let app_id = deploy.app.app_id.as_str();
            if stored.get(app_id).is_some_and(|held| **held != *deploy) {
                stored.remove(app_id);
            }
        }
    }
}

/// The images that build from source.
#[derive(Debug, Clone)]
pub struct Builders {
    /// The builder image (images/builder: Git and buildah) every build Job runs.
    pub image: String,
    /// Where Git workloads' images are pushed.
    pub push_prefix: String,
    /// PEM of a CA the builds trust beside the public roots (a private Git server or registry).
    pub ca: Option<String>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("namespace", &self.namespace)
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}
