//! Builds from Git on the machine's real node: a workload built, pushed to a private registry
//! and run, and a failed build saying why.
//!
//! A binary of its own because it needs a real node of its own (the builder image, a registry
//! the node trusts), and `real_node`'s shared node is held until that binary exits: within one
//! binary this test would wait for it forever. `make test` (tools/test.py) runs the binaries
//! that take the real node one after another. `common` is `it`'s.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)] // a test fails by panicking

#[path = "../it/common/mod.rs"]
mod common;

mod builds;
