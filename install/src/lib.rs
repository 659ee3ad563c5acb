//! Installing Kubernetes and kubenest on machines reached over SSH (issue 39), stage by stage:
//! `preflight` → `bundle` → `pki` → `etcd` → `control-plane` → `nodes` → `network` → `dns` →
//! `storage` → `platform` → `register` ([`Stage`]). Each stage is idempotent, has a deadline,
//! and fails with a [`StageFailure`]: the stage, a code ([`FailureCode`]), whether a retry can
//! help, the machine, and the last lines of the failing program's own output.
//!
//! What is here so far: the machines file ([`machines`]), the SSH sessions to them ([`ssh`]),
//! the stage vocabulary ([`stage`]) and the first five stages, [`preflight`], [`bundle`], [`pki`], [`etcd`] and [`control_plane`], with the service command the stages start programs through ([`services`]). The CLI's
//! `kubenest install` and the controllers' installs will run these stages; the later stages
//! build on the local machines the test kit's probe proved (tests/testkit/src/machines).

//! Decided for the stages still to come (from the probe, tests/testkit/src/machines):
//!
//! - **Programs run from the bundle's folder** (`/var/lib/kubenest/bundle/bin`), not copied to
//!   `/usr/local/bin`: a local machine's `/usr` and `/opt` are the host's, its `/var`, `/etc` and
//!   `/run` its own. The runtime's Debian packages are installed only where `dpkg -s` does not
//!   already report their version (a local machine's host has them).
//! - **Services through one command on the machine** that the `bundle` stage puts there:
//!   a systemd unit where systemd is PID 1 (every Debian 12 host), and on a local machine (its
//!   PID 1 is the machine's own init, no systemd) a supervised process in the machine's cgroup.
//!   The stages say "start etcd", not how.
//! - **Kubelets join with bootstrap tokens** and their CSRs are approved by the install, as the
//!   issue asks; the probe used pre-made node certificates.

pub mod bundle;
pub mod control_plane;
pub mod etcd;
pub mod files;
pub mod pki;
pub mod preflight;
pub mod services;
pub mod ssh;
pub mod stage;

/// The machines file is the domain's (`kubenest-dev machines up` writes it too).
pub use kubenest_domain::machines;
pub use machines::{Machine, MachinesFile, Role};
pub use stage::{FailureCode, Stage, StageFailure};
