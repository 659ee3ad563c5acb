//! The controllers against a real management cluster, PostgreSQL and hub.
//!
//! One binary per crate (its modules were separate binaries before): one link instead of
//! many, and one shared environment per crate instead of one per file.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod chart;
mod chart_values;
mod cluster;
mod common;
mod deadlines;
mod leader;
mod organization;
mod plane;
mod verification;
