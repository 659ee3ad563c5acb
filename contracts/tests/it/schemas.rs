//! The committed JSON Schemas under `contracts/schemas/` are exactly what the code generates.

use std::collections::BTreeSet;
use std::path::PathBuf;

#[test]
fn committed_schemas_match_the_code() {
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("schemas");
    let generated = kubenest_contracts::schemas::files();
    let regenerate = "regenerate with `cargo run -p kubenest-contracts --bin gen-schemas`";
    for (name, text) in &generated {
        let committed = std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|_| panic!("schemas/{name} is missing; {regenerate}"));
        assert!(
            committed == *text,
            "schemas/{name} differs from the code; {regenerate}"
        );
    }
    let expected: BTreeSet<String> = generated.into_iter().map(|(name, _)| name).collect();
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let stale: Vec<_> = present.difference(&expected).collect();
    assert!(
        stale.is_empty(),
        "schemas without a type: {stale:?}; {regenerate}"
    );
}
