//! The agent against real clusters (kwok, and one real node for what must run).
//!
//! One binary per crate (its modules were separate binaries before): one link instead of
//! many, and one shared environment per crate instead of one per file.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod agent;
mod api;
mod builds;
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
mod real_ingress;
mod real_node;
mod silence;
mod storm;
mod tls;
mod verified;
