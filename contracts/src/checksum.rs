//! Canonical JSON and checksums: the controllers and the agent must agree, byte for byte, on what
//! a desired state hashes to, so both compute it here.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::command::AppDeploy;

/// JSON with object keys sorted at every level, so equal values serialize equally whatever
/// order their maps were written in.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    if let Some(v) = map.get(key) {
                        write(v, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// SHA-256 (lower-case hex) of the canonical JSON of `value`.
pub fn checksum_of(value: &Value) -> String {
    Sha256::digest(canonical_json(value).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl AppDeploy {
    /// The checksum of this desired state, as a `snapshot` entry reports it.
    pub fn checksum(&self) -> String {
        checksum_of(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_ignore_key_order_and_are_hex_sha256() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [true, {"y": 2, "x": 1}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": [true, {"x": 1, "y": 2}], "b": 1}"#).unwrap();
        assert_eq!(checksum_of(&a), checksum_of(&b));
        assert_eq!(checksum_of(&a).len(), 64);
        assert_ne!(checksum_of(&a), checksum_of(&serde_json::json!({"b": 2})));
    }
}
