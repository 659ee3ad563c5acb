//! Any bytes through the frame validator: it must return, never panic, and whatever it accepts
//! must encode again. Run with `make fuzz` (or `cargo +nightly fuzz run frame` in contracts/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(validator) = kubenest_contracts::Validator::shared() else { return };
    if let Ok(envelope) = validator.decode(data) {
        let text = validator.encode(&envelope).expect("an accepted frame must encode");
        validator.decode(text.as_bytes()).expect("an encoded frame must decode");
    }
});
