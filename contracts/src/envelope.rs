//! The envelope every frame travels in.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::common::Id;
use crate::messages::{Direction, Message, MessageType};

/// The protocol's major version. See the crate docs for what changes it.
pub const SCHEMA_VERSION: u32 = 1;

/// One frame: routing header plus a typed message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub id: Uuid,
    pub direction: Direction,
    /// Required on commands and status events; absent on most control frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Id>,
    /// Required on commands and status events; absent on most control frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_id: Option<Id>,
    /// Links a reply (ack, accepted, rejected, error) to the frame it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<Uuid>,
    pub sent_at: DateTime<Utc>,
    pub schema_version: u32,
    /// The W3C trace context of the span that sent the frame (`00-{trace}-{span}-{flags}`), so
    /// the hub's route and the agent's handling are spans of the same trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(flatten)]
    pub message: Message,
}

impl Envelope {
    /// A new frame for `message`, with a fresh id, the current time and the matching direction.
    pub fn new(message: impl Into<Message>) -> Self {
        let message = message.into();
        Self {
            id: Uuid::new_v4(),
            direction: message.message_type().direction(),
            cluster_id: None,
            org_id: None,
            correlation_id: None,
            sent_at: Utc::now(),
            schema_version: SCHEMA_VERSION,
            traceparent: None,
            message,
        }
    }

    /// Carries the trace context `traceparent` (see [`Envelope::traceparent`]).
    pub fn traced(mut self, traceparent: Option<String>) -> Self {
        self.traceparent = traceparent;
        self
    }

    /// Addresses the frame to (or from) a cluster of an organization.
    pub fn for_cluster(mut self, cluster_id: Id, org_id: Id) -> Self {
        self.cluster_id = Some(cluster_id);
        self.org_id = Some(org_id);
        self
    }

    /// Marks the frame as a reply to `id`.
    pub fn replying_to(mut self, id: Uuid) -> Self {
        self.correlation_id = Some(id);
        self
    }

    /// The message's type.
    pub fn message_type(&self) -> MessageType {
        self.message.message_type()
    }
}

/// The envelope's shape for its JSON Schema: the payload is checked by its type's own schema.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields, rename = "Envelope")]
#[allow(dead_code)] // exists only to derive the schema
pub(crate) struct EnvelopeShape {
    id: Uuid,
    #[serde(rename = "type")]
    type_: MessageType,
    direction: Direction,
    #[serde(default)]
    cluster_id: Option<Id>,
    #[serde(default)]
    org_id: Option<Id>,
    #[serde(default)]
    correlation_id: Option<Uuid>,
    sent_at: DateTime<Utc>,
    #[schemars(range(min = 1))]
    schema_version: u32,
    #[serde(default)]
    #[schemars(regex(pattern = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"))]
    traceparent: Option<String>,
    payload: serde_json::Map<String, serde_json::Value>,
}
