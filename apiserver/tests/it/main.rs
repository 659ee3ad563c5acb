//! The API server as it serves: REST, doors, identities, logins, charts, outages and ways out.
//!
//! One binary per crate (its modules were separate binaries before): one link instead of
//! many, and one shared environment per crate instead of one per file.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod api;
mod chart;
mod common;
mod doors;
mod identity;
mod logins;
mod openapi;
mod outages;
mod ways_out;
