//! Read-your-writes for the controllers. The reflector caches lag behind the writes this
//! process makes, by the watch's delay, which grows to seconds when the management cluster is
//! busy. A reconcile judged on the older copy derives again what it already wrote: a condition
//! turns once more, with a new transition time, and is written again, and that write wakes
//! another reconcile. In the 1,000-App fleet of `make bench BENCH=e2e` that was 24 status
//! versions per App, 21 of them such re-derivations, and the management kube-apiserver spent
//! most of its CPU on them.
//!
//! Every status write of an App records the object the API server answered with; a reconcile
//! starts from the newer of that and the cache's copy (by resourceVersion), as the agent judges
//! a StackDeploy on the status it last wrote. A record is dropped once the cache has caught up,
//! or when the App is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::ResourceExt;

/// The newest copy this process wrote of each object, by uid.
#[derive(Debug)]
pub struct Newest<K> {
    written: Mutex<HashMap<String, Arc<K>>>,
}

impl<K> Default for Newest<K> {
    fn default() -> Self {
        Self {
            written: Mutex::default(),
        }
    }
}

/// A resourceVersion as the number the API server keeps; `None` for any other form, which is
/// then never taken as newer.
fn version<K: ResourceExt>(object: &K) -> Option<u64> {
    object.resource_version()?.parse().ok()
}

impl<K: ResourceExt> Newest<K> {
    fn written(&self) -> MutexGuard<'_, HashMap<String, Arc<K>>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `object` as the API server answered a write of it (kept if newer than what is
    /// recorded).
    pub fn wrote(&self, object: K) {
        let Some(uid) = object.uid() else { return };
        let mut written = self.written();
        let newer = written
            .get(&uid)
            .is_none_or(|known| version(&object) > version(&**known));
        if newer && version(&object).is_some() {
            written.insert(uid, Arc::new(object));
        }
    }

    /// The newer of `cached` and what this process last wrote of the same object. A record the
    /// cache has caught up with is forgotten.
    pub fn of(&self, cached: Arc<K>) -> Arc<K> {
        let Some(uid) = cached.uid() else {
            return cached;
        };
        let mut written = self.written();
        let Some(known) = written.get(&uid) else {
            return cached;
        };
        if version(&*cached) >= version(&**known) {
            written.remove(&uid);
            return cached;
        }
        known.clone()
    }

    /// Forgets the object `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        self.written().remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_crds::app::App;

    fn app(version: &str, phase: &str) -> App {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
            "metadata": {"name": "shop", "namespace": "org-acme", "uid": "u1",
                "resourceVersion": version},
            "spec": {"project": "web", "components": []},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn phase(app: &App) -> Option<&str> {
        app.status.as_ref()?.phase.as_deref()
    }

    #[test]
    fn a_reconcile_starts_from_this_process_s_own_write_until_the_cache_catches_up() {
        let newest = Newest::default();
        let cached = Arc::new(app("10", "Pending"));
        assert_eq!(
            phase(&newest.of(cached.clone())),
            Some("Pending"),
            "nothing written"
        );
        newest.wrote(app("12", "Deploying"));
        newest.wrote(app("11", "Pending"));
        assert_eq!(
            phase(&newest.of(cached)),
            Some("Deploying"),
            "the cache lags: the newest write wins, an older answer never replaces it"
        );
        // The watch brings the write, then something newer (the status router's write).
        assert_eq!(
            phase(&newest.of(Arc::new(app("13", "Running")))),
            Some("Running")
        );
        assert!(newest.written().is_empty(), "caught up: forgotten");
        newest.wrote(app("14", "Running"));
        newest.forget("u1");
        assert!(newest.written().is_empty());
    }
}
