//! The App controller's pure core: validating an App against its references and building the
//! complete desired state (`app.deploy`) for one revision. No IO: the reconciler fetches what
//! these functions need and applies what they return.

mod build;
pub mod controller;
mod revision;

pub use build::{AppIdentity, BuildError, ResolvedAddon, build_deploy, merge};
pub use revision::{canonical_json, revision_of};
