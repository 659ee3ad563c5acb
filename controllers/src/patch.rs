//! Typed status writes: a reconciler builds the part of a status it owns as a struct and sends
//! it as a merge patch, so a field is never misspelt and never written by two writers.
//!
//! The structs a controller sends are partial on purpose: a merge patch replaces only the keys
//! it carries, so the fields the status router writes from what the agent observed are left
//! alone. A `None` a partial struct serializes as `null` clears its field, as it should.

use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The body of a status merge patch: `{"status": ...}`.
#[derive(Debug, Serialize)]
pub struct StatusPatch<'a, S> {
    /// The fields written.
    pub status: &'a S,
}

/// Merge-patches `status` (the fields this writer owns) into object `name`'s status.
pub async fn merge_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&StatusPatch { status }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Owned {
        observed_generation: Option<i64>,
    }

    #[test]
    fn a_status_patch_nests_the_fields_under_status_and_clears_with_null() {
        let patch = StatusPatch {
            status: &Owned {
                observed_generation: None,
            },
        };
        assert_eq!(
            serde_json::to_value(&patch).ok(),
            Some(serde_json::json!({"status": {"observedGeneration": null}}))
        );
    }
}
