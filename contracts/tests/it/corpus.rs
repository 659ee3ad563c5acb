//! Replays the fuzz corpus (`fuzz/corpus/frame/`, seeded from the fixtures and grown by
//! `make fuzz`) through the validator with the fuzz target's own checks, on stable Rust.

use std::path::PathBuf;

use kubenest_contracts::Validator;

#[test]
fn the_fuzz_corpus_decodes_without_panicking_and_accepted_frames_reencode() {
    let validator = Validator::shared().unwrap();
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("fuzz/corpus/frame");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        if let Ok(envelope) = validator.decode(&data) {
            let text = validator
                .encode(&envelope)
                .unwrap_or_else(|e| panic!("{} decodes but does not encode: {e}", path.display()));
            validator.decode(text.as_bytes()).unwrap();
        }
        replayed += 1;
    }
    assert!(replayed >= 100, "corpus has only {replayed} inputs");
}
