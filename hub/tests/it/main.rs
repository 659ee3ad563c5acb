//! The hub as a process over real sockets: routing, logs, replicas and TLS.
//!
//! One binary per crate (its modules were separate binaries before): one link instead of
//! many, and one shared environment per crate instead of one per file.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

mod common;
mod hub;
mod logs;
mod replicas;
mod tls;
