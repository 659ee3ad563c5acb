//! Apps: the build of the complete desired state (`app.deploy`) for one revision, its one
//! validation, revision hashing, the assessment of what the cluster reports, and the ways out
//! of an App that does not converge ([`ways_out`]). No IO: the
//! reconciler and the REST facade fetch what these functions need and act on what they return.

mod addons;
mod assess;
mod build;
mod ingresses;
mod revision;
mod validate;
pub mod ways_out;

pub use addons::{ResolvedAddon, resolved_addon, values_refusal};
pub use assess::{Assessment, Facts, Outcome, assess};
pub use build::{AppIdentity, BuildError, build_deploy, merge};
pub use revision::{canonical_json, revision_of};
pub use validate::{FieldError, MAX_COMPONENTS, check_component_names, quantity, validate_deploy};

/// Every phase an App shows (the API's words: one definition, in the API types).
pub use kubenest_api::apps::PHASES;
