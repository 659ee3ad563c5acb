//! The agent on the machine's real node (a real kubelet and containerd): what only a real node
//! proves (`real_node`, whose node `real_ingress` and `verified` share until the binary exits;
//! builds from Git, which need a node of their own, are the `builds` binary).
//!
//! A binary apart from `it` (kwok nodes) because a machine runs one real node at a time (the test
//! kit's lock): `make test` (tools/test.py) runs the binaries that take it one after another and
//! the rest beside them. Within this binary a second real node waits for the first to stop
//! (`kubenest_testkit::node`). `common` is `it`'s.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

#[path = "../it/common/mod.rs"]
mod common;

mod real_ingress;
mod real_node;
mod verified;
