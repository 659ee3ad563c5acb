//! kubenest installed as its users install it, on the machine's real node (a real kubelet and
//! containerd): the control plane's chart, the agent's printed `helm install` with the demo App
//! and the catalog's addons, and a release published to a registry and installed from it.
//!
//! A binary apart from `it` (the shared system on kwok nodes) because a machine runs one real
//! node at a time (the test kit's lock): `make test` (tools/test.py) runs the binaries that take
//! it one after another and the rest beside them. Within this binary each test starts a real
//! node of its own, and a second waits for the first to stop (`kubenest_testkit::node`).
//! `common` is `it`'s (the runtime, `kubectl exec`); its shared system is not started here.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

#[path = "../it/common/mod.rs"]
mod common;

mod addons_real;
mod control_plane;
mod install;
mod release;
mod release_plane;
mod verified;
