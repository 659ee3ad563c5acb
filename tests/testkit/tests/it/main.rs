//! The test kit's own tests: clusters, images, PostgreSQL, the real node and the import-circle check.
//!
//! One binary per crate (its modules were separate binaries before): one link instead of
//! many, and one shared environment per crate instead of one per file.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod clusters;
mod images;
mod layering;
mod postgres;
mod real_node;
