//! An App's revision: a hash of its spec, stable under map key order.

pub use kubenest_contracts::canonical_json;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The revision of a spec: the first 16 hex digits of the SHA-256 of its canonical JSON.
pub fn revision_of(spec: &Value) -> String {
    let digest = Sha256::digest(canonical_json(spec).as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_does_not_change_the_revision() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": null}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"x": null, "y": [1, {"p": 2, "q": 1}]}, "b": 1}"#)
                .unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1}"#
        );
        assert_eq!(revision_of(&a), revision_of(&b));
        assert_eq!(revision_of(&a).len(), 16);
    }

    #[test]
    fn any_change_changes_the_revision() {
        let base = json!({"components": [{"name": "web", "workload": {"image": "web:1"}}]});
        let changed = json!({"components": [{"name": "web", "workload": {"image": "web:2"}}]});
        let reordered = json!({"components": [{"workload": {"image": "web:1"}, "name": "web"}]});
        assert_ne!(revision_of(&base), revision_of(&changed));
        assert_eq!(revision_of(&base), revision_of(&reordered));
    }
}
