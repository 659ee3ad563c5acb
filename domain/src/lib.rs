//! `kubenest-domain`: the pure rules every path shares. No IO, no Kubernetes client, no
//! database: the REST facade, the controllers and the agent fetch what these functions need and
//! act on what they return, so an App refused by one is refused by all with the same field and
//! reason.
//!
//! # What lives here
//!
//! - [`app`]: the build of an App's desired state ([`app::build_deploy`]: App spec + the
//!   AddonDefinitions it names → the wire's `app.deploy`), its one validation
//!   ([`app::validate_deploy`], run by the build and by the agent on what it receives, with
//!   errors naming the field both as a path into the App and as a JSON pointer into the
//!   command), the revision (a hash of the spec's canonical JSON), and the assessment of an
//!   App's state from what the agent reported ([`app::assess`]).
//! - [`alerts`]: what raises an alert and what ends it (a silent cluster, an App past its
//!   progress deadline), shared by the controllers' alert rows and the live stream.
//! - [`template`]: StackTemplate slots, instantiation into an App spec, export and import.
//! - [`actor`]: who made a change, from managed fields and the REST facade's annotation.
//! - [`names`]: naming rules (DNS labels, an organization's namespace, reserved namespaces).
//! - [`project`]: whether a project's namespace is its own.
//! - [`sources`]: where the platform may fetch what a user names (chart sources), and which
//!   addresses are its own network.
//!
//! # What does not
//!
//! Names of labels, annotations, finalizers and conditions are in `kubenest_crds::names`;
//! protocol names in `kubenest_contracts::names`. Reconcile loops, caches and history rows stay
//! in the controllers and the store.

pub mod actor;
pub mod alerts;
pub mod app;
pub mod chart_template;
pub mod deletion;
pub mod fences;
pub mod gitops;
pub mod machines;
pub mod names;
pub mod project;
pub mod sources;
pub mod template;
