//! The committed CRD YAML of the agent's own kinds is what the code generates.

use std::path::PathBuf;

#[test]
fn committed_crds_match_the_code() {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap()
        .join("crds");
    for (name, generated) in kubenest_agent::crd::yaml_files().unwrap() {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert!(
            committed == generated,
            "agent/crds/{name} is out of date: run `cargo run -p kubenest-agent --bin agent-crdgen`"
        );
    }
}
