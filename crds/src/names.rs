//! Every name kubenest writes into Kubernetes objects, in one place: labels, annotations,
//! finalizers, field managers and condition types. The management plane (controllers, API server)
//! and the agent on each workload cluster agree on these, so a name is defined exactly once.
//!
//! Protocol names (WebSocket subprotocols, the hub's Lease annotations) are in
//! `kubenest_contracts::names`.

/// Labels.
pub mod labels {
    /// The organization an object (a namespace, a RoleBinding) belongs to.
    pub const ORGANIZATION: &str = "kubenest.io/organization";
    /// The project a management-cluster object belongs to.
    pub const PROJECT: &str = "kubenest.io/project";
    /// The cluster a Secret (its connection token) belongs to.
    pub const CLUSTER: &str = "kubenest.io/cluster";
    /// On the workload cluster: the App uid an object was rendered for.
    pub const APP_ID: &str = "kubenest.io/app-id";
    /// On the workload cluster: the component of the App.
    pub const COMPONENT: &str = "kubenest.io/component";
    /// On the workload cluster: the standalone addon an object was rendered for.
    pub const ADDON_ID: &str = "kubenest.io/addon-id";
    /// On the workload cluster: the project uid whose namespace this is.
    pub const PROJECT_ID: &str = "kubenest.io/project-id";
    /// On the workload cluster: the build a Job runs.
    pub const BUILD_ID: &str = "kubenest.io/build-id";
    /// On the workload cluster: the App component a build is for.
    pub const BUILD_OF: &str = "kubenest.io/build-of";
    /// The well-known label naming who manages an object.
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// On a Secret of credentials (`"true"`): no pod a chart renders may use it.
    pub const CREDENTIALS: &str = "kubenest.io/credentials";
    /// The well-known label naming an object's component.
    pub const NAME: &str = "app.kubernetes.io/name";
    /// The well-known label naming an object's instance.
    pub const INSTANCE: &str = "app.kubernetes.io/instance";
    /// The value of [`MANAGED_BY`] on everything the agent applies.
    pub const MANAGED_BY_AGENT: &str = "kubenest-agent";
}

/// Annotations.
pub mod annotations {
    /// On a Project: its ingress CA's certificate (PEM, never the key), set with the CA
    /// through the API, which answers `GET .../ingress-ca` from it.
    pub const INGRESS_CA_CERTIFICATE: &str = "kubenest.io/ingress-ca-certificate";
    /// Who asked for a change through the API (the controllers put it in the history).
    pub const ACTOR: &str = "kubenest.io/actor";
    /// The path the actor came by: `rest`, `kubectl` or `gitops` (stamped by the admission
    /// webhook for kubectl and GitOps writers, by the API for its own).
    pub const ACTOR_PATH: &str = "kubenest.io/actor-path";
    /// A redeploy request: a new value asks for a new rollout of the same spec.
    pub const REDEPLOY: &str = "kubenest.io/redeploy";
    /// A rollback request: the deployment (App) or revision (addon) to restore.
    pub const ROLLBACK_TO: &str = "kubenest.io/rollback-to";
    /// Why kubenest asked for a rollback itself (a failed verification); recorded on the
    /// rollback's history row.
    pub const ROLLBACK_REASON: &str = "kubenest.io/rollback-reason";
    /// The deployment a restored spec came from.
    pub const RESTORED_FROM: &str = "kubenest.io/restored-from";
    /// On the workload cluster: the hash of the desired object last applied.
    pub const DESIRED_HASH: &str = "kubenest.io/desired-hash";
    /// On the workload cluster: a pod-template annotation whose change restarts the pods.
    pub const RESTART_ID: &str = "kubenest.io/restart-id";
}

/// Finalizers.
pub mod finalizers {
    /// An App's cleanup on its cluster.
    pub const APP: &str = "kubenest.io/app-cleanup";
    /// A standalone addon's cleanup on its cluster.
    pub const ADDON: &str = "kubenest.io/addon-cleanup";
    /// A Project's namespace cleanup on its cluster.
    pub const PROJECT: &str = "kubenest.io/project-cleanup";
    /// A Cluster is kept while projects remain on it.
    pub const CLUSTER: &str = "kubenest.io/cluster-protection";
    /// On the workload cluster: a StackDeploy's rendered objects are removed first.
    pub const STACK_DEPLOY: &str = "kubenest.io/stack-deploy";
    /// On the workload cluster: an AddonRelease's rendered objects are removed first.
    pub const ADDON_RELEASE: &str = "kubenest.io/addon-release";
}

/// Server-side apply field managers.
pub mod field_managers {
    /// Everything the controllers write.
    pub const CONTROLLERS: &str = "kubenest-controllers";
    /// Every write of the REST facade.
    pub const API: &str = "kubenest-apiserver";
    /// The agent's applier on the workload cluster.
    pub const AGENT: &str = "kubenest-agent";
    /// The agent's store of commands (StackDeploy, AddonRelease, BuildRequest objects).
    pub const AGENT_COMMANDS: &str = "kubenest-agent-uplink";
    /// The agent's redeploy restarts.
    pub const AGENT_REDEPLOY: &str = "kubenest-agent-redeploy";
}

/// Reasons of the Kubernetes Events the controllers and the agent write beside the condition
/// reasons (an Event on a turned condition carries the condition's reason).
pub mod reasons {
    /// An App's new revision has its deployment row.
    pub const REVISION_RECORDED: &str = "RevisionRecorded";
    /// An App's (or StackDeploy's) revision runs: every component is ready.
    pub const ROLLOUT_SUCCEEDED: &str = "RolloutSucceeded";
    /// An App's (or StackDeploy's) revision failed; the note says why.
    pub const ROLLOUT_FAILED: &str = "RolloutFailed";
    /// The agent took a new revision into its StackDeploy.
    pub const REVISION_ACCEPTED: &str = "RevisionAccepted";
    /// A field of an applied object was changed behind the agent's back (the note names the
    /// field and the manager that changed it).
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    /// The agent applied the desired value back.
    pub const DRIFT_HEALED: &str = "DriftHealed";
    /// The cluster cannot converge (e.g. a missed progress deadline); changes wait.
    pub const BLOCKED_SYNC: &str = "BlockedSync";
    /// A Cluster's agent connected to the hub and reports.
    pub const CLUSTER_CONNECTED: &str = "ClusterConnected";
    /// A Cluster's agent lost its hub session or fell silent.
    pub const CLUSTER_DISCONNECTED: &str = "ClusterDisconnected";

    /// The Event reason of a verdict on a verified revision (`VerificationPassed`,
    /// `VerificationFailed`, `VerificationInconclusive`; the agent tells it on the StackDeploy,
    /// the controllers on the App), and whether it is a warning: all but a pass.
    pub fn verdict(verdict: kubenest_contracts::Verdict) -> (&'static str, bool) {
        match verdict {
            kubenest_contracts::Verdict::Passed => ("VerificationPassed", false),
            kubenest_contracts::Verdict::Failed => ("VerificationFailed", true),
            kubenest_contracts::Verdict::Inconclusive => ("VerificationInconclusive", true),
        }
    }
}

/// Condition types and reasons.
pub mod conditions {
    /// The object is what its spec asks for (`True`), or why not (`False`, with a reason).
    pub const READY: &str = "Ready";
    /// A change is on its way; the reason names what it waits for.
    pub const PROGRESSING: &str = "Progressing";
    /// Deletion waits for something (dependents, or the agent's confirmation).
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
    /// Reason of `Ready=False` when the deletion did not finish within the object's progress
    /// deadline: the object is `Failed`, an alert is open, and the message says what is still
    /// on the cluster and how to remove the object by force.
    pub const DELETION_DEADLINE_EXCEEDED: &str = "DeletionDeadlineExceeded";
    /// An agent's report says whether it could write the GitOps repository (`False`, with why,
    /// when a commit or push failed); nothing of the App or addon fails for it.
    pub const GITOPS_RECORDED: &str = "GitOpsRecorded";
    /// An App's cluster matches its spec (or the drift, why not).
    pub const SYNCED: &str = "Synced";
    /// A rollback request could not be carried out.
    pub const ROLLBACK_FAILED: &str = "RollbackFailed";
    /// A cluster missed its heartbeat window.
    pub const HEARTBEAT_MISSED: &str = "HeartbeatMissed";
    /// Reason of `Ready=Unknown`: the cluster has not reported within its heartbeat window, so
    /// what the status shows is only its last observation.
    pub const CLUSTER_UNREACHABLE: &str = "ClusterUnreachable";
    /// Reason of a Cluster's `Ready=True`: its agent reports within the heartbeat window.
    pub const AGENT_REPORTING: &str = "AgentReporting";
}
