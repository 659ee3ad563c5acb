//! The whole product as `make dev` runs it, and its installs, console, logs and metrics.
//!
//! One binary for the tests that share the system (`common::fixture`) or bring clusters of their
//! own (installs on the real node, which take turns). The tests that start a System of their own
//! (`console`, `exits`, `metrics`, `tls`) are binaries of their own: a System is a whole control
//! plane, one per management cluster as in production, and a binary has one shared cluster.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod addon_drift;
mod addons_real;
mod cli;
mod common;
mod control_plane;
mod deadlines;
mod faults;
mod fences;
mod generated_apps;
mod gitops;
mod install;
mod logs;
mod objects;
mod release;
mod release_plane;
mod system;
mod verified;
