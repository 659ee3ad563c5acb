//! How big a benchmark runs. `cargo bench` (`make bench`) passes `--bench` and gets the full
//! size; `cargo test` runs the same benchmark binary (`test = true` on its `[[bench]]`) without
//! it, at a tiny size: every set-up, every round and the final JSON line, in seconds. A
//! benchmark that no longer works then fails `make test` instead of the next `make bench`.

/// Whether this run measures (`cargo bench`), rather than checks that the benchmark still runs.
pub fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// `full` when measuring, `tiny` when only checking.
pub fn size<T>(full: T, tiny: T) -> T {
    if measuring() { full } else { tiny }
}
