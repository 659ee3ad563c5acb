//! Installing Kubernetes and kubenest on machines reached over SSH (issue 39), stage by stage:
//! `preflight` → `bundle` → `pki` → `etcd` → `control-plane` → `nodes` → `network` → `dns` →
//! `storage` → `platform` → `register` ([`Stage`]). Each stage is idempotent, has a deadline,
//! and fails with a [`StageFailure`]: the stage, a code ([`FailureCode`]), whether a retry can
//! help, the machine, and the last lines of the failing program's own output.
//!
//! What is here so far: the machines file ([`machines`]), the SSH sessions to them ([`ssh`]),
//! the stage vocabulary ([`stage`]) and the first three stages, [`preflight`], [`bundle`] and [`pki`]. The CLI's
//! `kubenest install` and the controllers' installs will run these stages; the later stages
//! build on the local machines the test kit's probe proved (tests/testkit/src/machines).

pub mod bundle;
pub mod files;
pub mod machines;
pub mod pki;
pub mod preflight;
pub mod ssh;
pub mod stage;

pub use machines::{Machine, MachinesFile, Role};
pub use stage::{FailureCode, Stage, StageFailure};
