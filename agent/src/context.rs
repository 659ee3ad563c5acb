//! What every part of the agent shares. What one controller remembers between its passes is
//! its own state ([`crate::memory`]), not the Context's.

use crate::apply::Applier;
use crate::gitops::GitOps;
use crate::helm::Helm;
use crate::report::Reporter;

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
    /// Where the agent's Kubernetes Events go (on StackDeploys and the objects it applies).
    pub events: kubenest_runtime::events::EventSink,
    /// The live log streams.
    pub logs: crate::logs::streams::Streams,
    /// Namespaces whose pods may connect to every isolated project's: the agent's own first.
    pub trusted_namespaces: Vec<String>,
    /// The project fences the agent keeps.
    pub kept: crate::fences::kept::Kept,
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
