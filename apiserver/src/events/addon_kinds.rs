//! The events one change of a standalone addon makes (pure): its facts compared between
//! versions.

use kube::ResourceExt;
use kubenest_crds::addon::AddonInstance;
use serde_json::{Value, json};

use super::kinds::drift_json;
use super::{NewEvent, event_id};
use crate::k8s::org_name_of;

/// What the stream reports of a standalone addon, to compare versions by.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct AddonFacts {
    generation: Option<i64>,
    phase: Option<String>,
    revision: Option<u32>,
    observed_revision: Option<u32>,
    drift: Value,
}

pub(super) fn addon_facts(addon: &AddonInstance) -> AddonFacts {
    let status = addon.status.clone().unwrap_or_default();
    AddonFacts {
        generation: addon.metadata.generation,
        phase: status.phase,
        revision: status.revision,
        observed_revision: status.observed_revision,
        drift: drift_json(status.sync),
    }
}

/// The events between two versions of a standalone addon (pure): `addon.changed` when its spec
/// (a change, or a rollback writing an earlier revision back), phase or revisions changed, and
/// `addon.drift` when the drift the agent reported changed (found and applied back, or
/// cleared).
pub(super) fn addon_event(
    old: Option<&AddonFacts>,
    addon: &AddonInstance,
    place: (Option<String>, Option<String>),
) -> Vec<NewEvent> {
    let namespace = addon.namespace().unwrap_or_default();
    let (Some(org), Some(version), Some(uid)) = (
        org_name_of(&namespace),
        addon.resource_version(),
        addon.uid(),
    ) else {
        return Vec::new();
    };
    let new = addon_facts(addon);
    let old = old.cloned().unwrap_or_default();
    if new.phase.is_none() {
        return Vec::new();
    }
    let event = |kind: &'static str, slot: i64, payload: Value| NewEvent {
        id: event_id(&version, slot).unwrap_or_default(),
        org_id: org.to_owned(),
        cluster_id: place.1.clone(),
        project_id: place.0.clone(),
        app_id: None,
        kind,
        payload,
    };
    let name = addon.name_any();
    let mut events = Vec::new();
    let moved = |f: &AddonFacts| {
        (
            f.generation,
            f.phase.clone(),
            f.revision,
            f.observed_revision,
        )
    };
    if moved(&new) != moved(&old) {
        let status = addon.status.clone().unwrap_or_default();
        events.push(event(
            "addon.changed",
            0,
            json!({
                "addon": name, "addon_id": uid, "phase": new.phase,
                "previous": old.phase, "revision": new.revision,
                "observed_revision": new.observed_revision, "message": status.message,
                "generation": new.generation,
            }),
        ));
    }
    if new.drift != old.drift && !new.drift.is_null() {
        let mut payload = new.drift.clone();
        payload["addon"] = name.into();
        payload["addon_id"] = uid.into();
        events.push(event("addon.drift", 2, payload));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_addon_makes_an_event_when_its_phase_or_revisions_change_and_not_otherwise() {
        use kubenest_crds::addon::{AddonInstanceSpec, AddonInstanceStatus};
        let addon = |phase: &str, revision: u32, version: &str| {
            let mut addon = AddonInstance::new(
                "db",
                serde_json::from_value::<AddonInstanceSpec>(
                    json!({"project": "web", "definition": "postgres"}),
                )
                .unwrap(),
            );
            addon.metadata.namespace = Some("org-acme".into());
            addon.metadata.uid = Some("a1".into());
            addon.metadata.resource_version = Some(version.into());
            addon.status = Some(AddonInstanceStatus {
                phase: Some(phase.into()),
                revision: Some(revision),
                ..Default::default()
            });
            addon
        };
        let installing = addon("Installing", 1, "7");
        let first = addon_event(None, &installing, (Some("p".into()), Some("c".into())));
        let [first] = first.as_slice() else {
            panic!("one event: {first:?}")
        };
        assert_eq!((first.kind, first.id), ("addon.changed", 7 * 8));
        assert_eq!(first.payload["addon_id"], "a1");
        assert_eq!(first.project_id.as_deref(), Some("p"));
        let seen = addon_facts(&installing);
        assert_eq!(
            addon_event(Some(&seen), &addon("Installing", 1, "8"), (None, None)),
            vec![]
        );
        let mut respecified = addon("Installing", 1, "8");
        respecified.metadata.generation = Some(2);
        assert_eq!(
            addon_event(Some(&seen), &respecified, (None, None)).len(),
            1
        );
        let upgraded = addon_event(Some(&seen), &addon("Installing", 2, "9"), (None, None));
        assert_eq!(upgraded[0].payload["revision"], 2);
        let ready = addon_event(Some(&seen), &addon("Ready", 1, "10"), (None, None));
        assert_eq!(ready[0].payload["previous"], "Installing");

        // Drift found and applied back is its own event; so is its clearing.
        let mut drifted = addon("Installing", 1, "11");
        drifted.status.as_mut().unwrap().sync = Some(kubenest_crds::app::Sync {
            drift_detected: true,
            drift_class: Some("recoverable".into()),
            drift_details: vec![kubenest_crds::app::DriftDetail {
                resource: "Service/db".into(),
                field: "spec.ports[0].port".into(),
                desired: "5432".into(),
                observed: "5433".into(),
                manager: Some("kubectl-edit".into()),
            }],
        });
        let found = addon_event(Some(&seen), &drifted, (None, None));
        let [found] = found.as_slice() else {
            panic!("one event: {found:?}")
        };
        assert_eq!((found.kind, found.id), ("addon.drift", 11 * 8 + 2));
        assert_eq!(found.payload["addon_id"], "a1");
        assert_eq!(found.payload["drift_details"][0]["manager"], "kubectl-edit");
        let mut healed = addon("Installing", 1, "12");
        healed.status.as_mut().unwrap().sync = Some(Default::default());
        let cleared = addon_event(Some(&addon_facts(&drifted)), &healed, (None, None));
        assert_eq!(cleared[0].kind, "addon.drift");
        assert_eq!(cleared[0].payload["drift_detected"], false);
    }
}
