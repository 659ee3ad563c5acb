//! The history store against a real PostgreSQL: accounts, alerts and deployment history.
//!
//! One binary per crate (its modules were separate binaries before): one link instead of
//! many, and one shared environment per crate instead of one per file.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod accounts;
mod alerts;
mod history;
