//! The agent against real clusters with kwok nodes.
//!
//! One binary for the crate's tests on kwok nodes (its modules were separate binaries before):
//! one link instead of many, and one shared environment instead of one per file. What must run
//! on the machine's real node is the `real_node` binary (`tests/real_node/main.rs`), which
//! `make test` runs in the lane of the binaries that take it, beside this one.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod agent;
mod api;
mod chart;
mod chart_workloads;
mod common;
mod crds;
mod durability;
mod fences;
mod gitops;
mod ingress_tls;
mod least_privilege;
mod objects;
mod plane;
mod silence;
mod storm;
mod tls;
