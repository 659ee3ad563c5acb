//! The hub envelope and every command, status and control payload that crosses the hub, with
//! their JSON Schemas. No IO: the hub, the agent and the controllers build and read frames only
//! through these types and [`Validator`].
//!
//! # Frames
//!
//! A frame is one WebSocket text message holding one [`Envelope`]:
//! `{id, type, direction, cluster_id, org_id, correlation_id, sent_at, schema_version,
//! traceparent, payload}`.
//! `type` names the payload ([`MessageType`]); its direction is fixed by the catalog:
//! commands flow controllers → agent, status events agent → controllers, control frames between a
//! session and the hub. Every type's payload has a JSON Schema, committed under
//! `contracts/schemas/` (regenerate with `cargo run -p kubenest-contracts --bin gen-schemas`; a test
//! fails when the committed files differ from the code).
//!
//! # Validation
//!
//! [`Validator::decode`] turns raw bytes into a typed [`Envelope`] or a [`FrameError`] that names
//! the JSON pointer of the offending part and the reason, in that order of checks: size
//! ([`Limits::max_frame_bytes`]), JSON syntax, nesting depth ([`Limits::max_depth`]), the envelope
//! schema, `schema_version`, the payload schema of its `type`, the direction, and the routing
//! header. Schemas are compiled once, when the validator is built. Validation never panics, and
//! its reasons never quote the offending value (it might be a secret). [`Validator::encode`] runs
//! the same checks on outgoing frames, so a sender cannot emit a frame its peer will refuse.
//!
//! # Versioning
//!
//! `schema_version` is the protocol's major version ([`SCHEMA_VERSION`]).
//!
//! - **Compatible changes** keep the major version: adding an *optional* payload field, adding a
//!   message type, adding a variant to an enum that only the newer side sends, relaxing a limit.
//!   Payload objects therefore accept fields they do not know (a receiver ignores them), so an
//!   older agent keeps working with newer controllers and vice versa.
//! - **Breaking changes** raise the major version: removing or renaming a field, making a field
//!   required, changing a field's type or meaning, tightening a limit, changing the envelope.
//!   The envelope itself is closed (unknown envelope fields are refused), because routing depends
//!   on it.
//! - A receiver refuses a frame with a higher major version than its own with
//!   `unsupported_version`, and a `type` it does not know with `unknown_type`; the sender then
//!   knows which capability the peer lacks (agents also list optional features in `hello`).
//!   Controllers support the current and the previous major version during an upgrade, so agents
//!   can be upgraded after the control plane.

mod checksum;
mod command;
mod common;
mod control;
mod envelope;
mod fences;
mod messages;
pub mod names;
mod objects;
pub mod patterns;
pub mod schemas;
mod status;
mod token;
mod validate;
mod verification;

pub use checksum::{canonical_json, checksum_of};
pub use command::*;
pub use common::*;
pub use control::*;
pub use envelope::{Envelope, SCHEMA_VERSION};
pub use fences::*;
pub use messages::{Direction, Message, MessageType};
pub use objects::*;
pub use status::*;
pub use token::{
    Claims, ClientType, HUB_AUDIENCE, Identity, TokenError, TokenSigner, TokenVerifier,
};
pub use validate::{Checked, FrameError, Limits, Validator};
pub use verification::*;
