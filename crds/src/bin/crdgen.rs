//! Writes the committed CRD YAML: `cargo run -p kubenest-crds --bin crdgen`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("yaml");
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::remove_file(path)?;
        }
    }
    let files = kubenest_crds::yaml_files()?;
    for (name, text) in &files {
        std::fs::write(dir.join(name), text)?;
    }
    println!("wrote {} CRDs to {}", files.len(), dir.display());
    Ok(())
}
