//! The catalog: every message type, its direction and its payload.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::command::*;
use crate::control::*;
use crate::objects::*;
use crate::status::*;
use crate::verification::*;

// The catalog below fixes it for every message type, so it lives here.
/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Controllers → agent, through the hub.
    Command,
    /// Agent → controllers, through the hub.
    Status,
    /// Between a session and the hub itself.
    Control,
}

macro_rules! catalog {
    ($( $name:literal => $variant:ident($payload:ty), $direction:ident; )*) => {
        /// A typed payload; serialized as the envelope's `type` and `payload`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type", content = "payload")]
        pub enum Message {
            $( #[doc = $name] #[serde(rename = $name)] $variant($payload), )*
        }

        /// The `type` of a frame.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        pub enum MessageType {
            $( #[doc = $name] #[serde(rename = $name)] $variant, )*
        }

        impl MessageType {
            /// Every message type, in catalog order.
            pub const ALL: &'static [MessageType] = &[$(MessageType::$variant),*];

            /// The wire name, e.g. `app.deploy`.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }

            /// The type with this wire name.
            pub fn parse(name: &str) -> Option<Self> {
                match name { $($name => Some(Self::$variant),)* _ => None }
            }

            /// Which way frames of this type travel.
            pub fn direction(self) -> Direction {
                match self { $(Self::$variant => Direction::$direction),* }
            }

            /// The JSON Schema of this type's payload.
            pub fn payload_schema(self) -> schemars::Schema {
                match self { $(Self::$variant => schemars::schema_for!($payload)),* }
            }
        }

        impl Message {
            /// The message's type.
            pub fn message_type(&self) -> MessageType {
                match self { $(Self::$variant(_) => MessageType::$variant),* }
            }
        }

        $(
            impl From<$payload> for Message {
                fn from(payload: $payload) -> Self {
                    Self::$variant(payload)
                }
            }
        )*
    };
}

catalog! {
    "project.ensure" => ProjectEnsure(ProjectEnsure), Command;
    "project.delete" => ProjectDelete(ProjectDelete), Command;
    "app.deploy" => AppDeploy(AppDeploy), Command;
    "app.delete" => AppDelete(AppDelete), Command;
    "app.redeploy" => AppRedeploy(AppRedeploy), Command;
    "app.pause" => AppPause(AppPause), Command;
    "app.resume" => AppResume(AppResume), Command;
    "addon.apply" => AddonApply(AddonApply), Command;
    "addon.rollback" => AddonRollback(AddonRollback), Command;
    "addon.delete" => AddonDelete(AddonDelete), Command;
    "secret.set" => SecretSet(SecretSet), Command;
    "secret.delete" => SecretDelete(SecretDelete), Command;
    "build.request" => BuildRequest(BuildRequest), Command;
    "logs.subscribe" => LogsSubscribe(LogsSubscribe), Command;
    "logs.unsubscribe" => LogsUnsubscribe(LogsUnsubscribe), Command;
    "resync.request" => ResyncRequest(ResyncRequest), Command;
    "objects.request" => ObjectsRequest(ObjectsRequest), Command;
    "hello" => Hello(Hello), Status;
    "heartbeat" => Heartbeat(Heartbeat), Status;
    "command.accepted" => CommandAccepted(CommandAccepted), Status;
    "command.rejected" => CommandRejected(CommandRejected), Status;
    "project.status" => ProjectStatus(ProjectStatus), Status;
    "app.status" => AppStatus(AppStatus), Status;
    "drift.report" => DriftReport(DriftReport), Status;
    "verification.result" => VerificationResult(VerificationResult), Status;
    "addon.status" => AddonStatus(AddonStatus), Status;
    "build.status" => BuildStatus(BuildStatus), Status;
    "log.lines" => LogLines(LogLines), Status;
    "log.end" => LogEnd(LogEnd), Status;
    "snapshot" => Snapshot(Snapshot), Status;
    "objects.snapshot" => ObjectsSnapshot(ObjectsSnapshot), Status;
    "route.ack" => RouteAck(RouteAck), Control;
    "route.nack" => RouteNack(RouteNack), Control;
    "floors.snapshot" => FloorsSnapshot(FloorsSnapshot), Control;
    "floors.update" => FloorsUpdate(FloorsUpdate), Control;
    "floors.applied" => FloorsApplied(FloorsApplied), Control;
    "error" => Error(ErrorFrame), Control;
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
