//! Protocol names shared by the hub, the agent and the controllers' hub client.

/// The WebSocket subprotocol an agent speaks.
pub const AGENT_SUBPROTOCOL: &str = "kubenest.agent.v1";
/// The WebSocket subprotocol a backend (the controllers, the API server) speaks.
pub const BACKEND_SUBPROTOCOL: &str = "kubenest.backend.v1";

/// The hub's session Leases on the management cluster, one per connected cluster.
pub mod lease {
    /// The prefix of a session Lease's name; the cluster id follows.
    pub const NAME_PREFIX: &str = "hub-session-";
    /// The address of the hub replica holding the session.
    pub const ADDRESS_ANNOTATION: &str = "hub.kubenest.io/address";
    /// The session's epoch, which rises with every new session of the cluster.
    pub const EPOCH_ANNOTATION: &str = "hub.kubenest.io/epoch";
    /// The cluster id of the session.
    pub const CLUSTER_LABEL: &str = "kubenest.io/cluster-id";
    /// The field manager of the hub's Lease writes.
    pub const FIELD_MANAGER: &str = "kubenest-hub";

    /// The session Lease's name for a cluster.
    pub fn name(cluster_id: &str) -> String {
        format!("{NAME_PREFIX}{cluster_id}")
    }
}
