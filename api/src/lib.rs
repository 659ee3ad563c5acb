//! The REST API's request and response bodies, with their serde and JSON Schema derives: the
//! one definition the API server serves (and documents, through aide) and the `kubenest`
//! command reads and writes. Pure data: no HTTP, no Kubernetes client, no database. What the
//! API checks at its door (and how a body becomes a resource) stays in the API server.
//!
//! The modules follow the API's areas.

pub mod addons;
pub mod alerts;
pub mod apps;
pub mod audit;
pub mod clusters;
pub mod common;
pub mod events;
pub mod fences;
pub mod ingress_ca;
pub mod members;
pub mod orgs;
pub mod problem;
pub mod projects;
pub mod registry;
pub mod removal;
pub mod templates;
pub mod users;
pub mod verification;

pub use problem::{Problem, WayOut, WayOutAction};

/// What the OpenAPI document says of a name that is a DNS label (RFC 1123): the pattern and
/// length the API checks, so a client knows them before it asks.
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The pattern of a user name (which the database enforces too).
pub const USERNAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9._@]*[a-z0-9])?$";
