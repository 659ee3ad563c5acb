//! The whole product as `make dev` runs it, on kwok nodes: the system the tests share
//! (`common::fixture`, started once for this binary), and what the API, the CLI, the logs and
//! the objects make of it.
//!
//! The tests that install kubenest on the machine's real node are the `real_node` binary
//! (`tests/real_node/main.rs`): the machine runs one real node at a time, so `make test` runs
//! that binary in its lane of real-node binaries and this one beside it. The tests that start a
//! System of their own (`console`, `exits`, `metrics`, `tls`) are binaries of their own: a System
//! is a whole control plane, one per management cluster as in production, and a binary has one
//! shared cluster.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod addon_drift;
mod cli;
mod common;
mod deadlines;
mod faults;
mod fences;
mod generated_apps;
mod gitops;
mod logs;
mod objects;
mod system;
