//! The GitOps repository is a record for people, not a part of running anything: when the
//! cluster's agent cannot push to it, a standalone addon still becomes `Ready`, says why the
//! record was not written (`gitops_error`) and raises an alert, and both clear once the remote
//! takes the push again. On the whole system (see `common`).

use std::time::Duration;

use crate::common::{CONVERGE, eventually, fixture, run};
use kube::api::{Api, PostParams};
use kubenest_crds::addon::AddonInstance;
use serde_json::{Value, json};

#[test]
fn a_refused_push_is_said_and_alerted_beside_a_ready_addon_and_cleared_once_written() {
    run(async {
        let mut f = fixture().await;
        let (_, project) = f.project("east", "record").await;
        let org = f.system.options().org.clone();
        // The remote refuses every push, as a protected branch or a full disk would.
        let hook = f.system.agents["east"].gitops.join("hooks/pre-receive");
        std::fs::write(&hook, "#!/bin/sh\necho 'pushes are closed' >&2\nexit 1\n").unwrap();
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&hook, executable).unwrap();
        let reopen = Reopen(hook.clone());

        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let addons: Api<AddonInstance> = Api::namespaced(mgmt, &format!("org-{org}"));
        let addon: AddonInstance = serde_json::from_value(json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
            "metadata": {"name": format!("{project}-cache")},
            "spec": {"project": project, "definition": "redis",
                     "values": {"persistence": {"enabled": false}}}
        }))
        .unwrap();
        let created = addons.create(&PostParams::default(), &addon).await.unwrap();
        let id = created.metadata.uid.unwrap();
        let path = format!("/api/v1/addon-instances/{id}");
        let mut admin = f.admin().await;
        let deadline = std::time::Instant::now() + CONVERGE;
        let mut last = loop {
            f.check_running();
            let last = admin.get(&path).await.unwrap();
            if last["phase"] == "Ready" && last["gitops_error"].is_string() {
                break last;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "not Ready with its record refused: {last}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let error = last["gitops_error"].as_str().unwrap();
        assert!(error.contains("pushes are closed"), "{last}");
        let alerts = format!("/api/v1/orgs/{org}/alerts");
        let mut alert = Value::Null;
        eventually("the alert opens", Duration::from_secs(30), async || {
            let listed = admin.get(&alerts).await.unwrap();
            alert = listed
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["kind"] == "gitops_write_failed" && a["subject_id"] == id.as_str())
                .cloned()
                .unwrap_or(Value::Null);
            alert["state"] == "open"
        })
        .await;
        assert_eq!(alert["subject_kind"], "addon", "{alert}");
        assert!(
            alert["message"]
                .as_str()
                .unwrap()
                .contains("pushes are closed")
        );

        drop(reopen);
        eventually(
            "the record written and the alert resolved",
            CONVERGE,
            async || {
                last = admin.get(&path).await.unwrap();
                let listed = admin.get(&alerts).await.unwrap();
                let resolved = listed.as_array().unwrap().iter().any(|a| {
                    a["kind"] == "gitops_write_failed"
                        && a["subject_id"] == id.as_str()
                        && a["state"] == "resolved"
                });
                last["gitops_error"].is_null() && last["git_commit"].is_string() && resolved
            },
        )
        .await;
        assert_eq!(last["phase"], "Ready", "{last}");
    });
}

/// Removes the refusing hook when dropped, so a failed test leaves the remote open.
struct Reopen(std::path::PathBuf);

impl Drop for Reopen {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
