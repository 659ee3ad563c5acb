//! A standalone addon's drift, end to end on the whole system (see `common`): a field of its
//! objects changed behind kubenest's back is reported at once with who changed it, on the
//! event stream, in its status and as Kubernetes Events (on the AddonInstance and on the
//! changed object), and put back on the cluster.

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use kubenest_devenv::tour::EventStream;
use serde_json::json;

use crate::common::{CONVERGE, events_until, eventually, fixture, run};

#[test]
fn a_standalone_addons_drift_is_streamed_told_and_healed() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "adrift").await;
        let mut admin = f.admin().await;
        let body = json!({"project_id": project, "name": "adrift-cache", "definition": "redis",
                          "values": {"persistence": {"enabled": false}}});
        let created = admin.post("/api/v1/addon-instances", &body).await.unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        let path = format!("/api/v1/addon-instances/{id}");
        eventually("the addon Ready", CONVERGE, async || {
            admin.get(&path).await.unwrap()["phase"] == "Ready"
        })
        .await;
        f.check_running();
        let mut stream =
            EventStream::open_filtered(&f.system.api_url(), &admin, "project_id", &project)
                .await
                .unwrap();

        let services: Api<Service> = Api::namespaced(f.workload("east").await, &namespace);
        services
            .patch(
                "adrift-cache",
                &PatchParams {
                    field_manager: Some("kubectl-edit".into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&json!({"spec": {"ports": [
                    {"name": "redis", "port": 6380, "targetPort": 6379, "protocol": "TCP"}]}})),
            )
            .await
            .unwrap();
        let found = stream
            .until(|e| e.kind == "addon.drift" && e.data["drift_detected"] == true)
            .await
            .unwrap();
        assert_eq!(found.data["addon_id"], id.as_str(), "{:?}", found.data);
        let detail = &found.data["drift_details"][0];
        assert_eq!(detail["resource"], "Service/adrift-cache", "{detail}");
        assert_eq!(detail["field"], "spec.ports", "{detail}");
        assert_eq!(detail["manager"], "kubectl-edit", "{detail}");
        assert!(
            detail["observed"].as_str().unwrap().contains("6380"),
            "{detail}"
        );
        stream
            .until(|e| e.kind == "addon.drift" && e.data["drift_detected"] == false)
            .await
            .unwrap();
        eventually("the Service put back", CONVERGE, async || {
            let live = services.get("adrift-cache").await.unwrap();
            live.spec.unwrap().ports.unwrap()[0].port == 6379
        })
        .await;

        // As `kubectl describe` shows it: on the AddonInstance (management cluster), and on the
        // Service itself (workload cluster), found and applied back.
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let on_addon = format!("involvedObject.uid={id}");
        let told = events_until(&mgmt, &on_addon, "DriftDetected").await;
        let drifted = told
            .iter()
            .find(|e| e.reason.as_deref() == Some("DriftDetected"))
            .unwrap();
        let note = drifted.message.as_deref().unwrap_or_default();
        assert!(
            note.contains("Service/adrift-cache spec.ports changed on the cluster by kubectl-edit"),
            "{note}"
        );
        assert_eq!(drifted.type_.as_deref(), Some("Warning"));
        let on_service = format!(
            "involvedObject.kind=Service,involvedObject.name=adrift-cache,\
             involvedObject.namespace={namespace}"
        );
        events_until(&f.workload("east").await, &on_service, "DriftHealed").await;
        let now = admin.get(&path).await.unwrap();
        assert_eq!(now["sync"]["drift_detected"], false, "{now}");
        assert_eq!(now["phase"], "Ready", "{now}");
    });
}
