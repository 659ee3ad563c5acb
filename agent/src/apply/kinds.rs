//! What the applier works with: the kinds it renders and watches, its error, and the marks it
//! puts on and reads from each object (pure).

use kubenest_crds::names::annotations;
use serde_json::Value;

/// The kinds the agent renders and so may prune: (apiVersion, kind).
pub const PRUNABLE: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("v1", "PersistentVolumeClaim"),
];

/// The kinds of a project namespace's fences ([`crate::fences`]): watched like the rendered
/// kinds, never rendered for a tenant, so never pruned (no App's labels select them).
pub const FENCES: &[(&str, &str)] = &[
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
];

/// The kinds of an App's (or a standalone addon's) objects whose changes wake its StackDeploy
/// (its AddonRelease): a rollout's progress, a field changed by hand, an Ingress given its
/// address.
pub const WAKING: [(&str, &str); 5] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("networking.k8s.io/v1", "Ingress"),
];

/// What went wrong applying or pruning.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("object without apiVersion, kind or name")]
    Malformed,
    #[error("{kind}/{name}: {source}")]
    Kube {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("unknown kind {0}")]
    UnknownKind(String),
    #[error("the caches of managed objects did not fill in time")]
    CachesNotReady,
}

/// The error's category in the reconcile metrics.
impl kubenest_runtime::reconciles::Category for ApplyError {
    fn category(&self) -> &'static str {
        match self {
            ApplyError::Malformed | ApplyError::UnknownKind(_) => "invalid",
            ApplyError::Kube { .. } => "kubernetes",
            ApplyError::CachesNotReady => "caches",
        }
    }
}

/// (apiVersion, kind, name) of an object.
pub type ObjectId = (String, String, String);

/// The id of an object, if it has one.
pub fn id_of(object: &Value) -> Option<ObjectId> {
    Some((
        object.get("apiVersion")?.as_str()?.to_owned(),
        object.get("kind")?.as_str()?.to_owned(),
        object.pointer("/metadata/name")?.as_str()?.to_owned(),
    ))
}

/// `object` with [`annotations::DESIRED_HASH`] set to the hash of everything else in it (pure).
pub fn stamped(object: &Value) -> Value {
    let hash = kubenest_contracts::checksum_of(object);
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(annotations::DESIRED_HASH.into(), hash[..16].into());
        }
    }
    object
}

/// Whether `live` was last applied with `desired` (as [`stamped`] marks it).
pub(super) fn carries(live: &Value, desired: &Value) -> bool {
    let want = desired.pointer(&format!(
        "/metadata/annotations/{}",
        annotations::DESIRED_HASH.replace('/', "~1")
    ));
    let have = live.pointer(&format!(
        "/metadata/annotations/{}",
        annotations::DESIRED_HASH.replace('/', "~1")
    ));
    want.is_some() && want == have
}

/// Labels as `key=value` pairs of a selector of equalities.
pub(super) fn selector_pairs(selector: &str) -> Vec<(&str, &str)> {
    selector
        .split(',')
        .filter_map(|term| term.split_once('='))
        .collect()
}
