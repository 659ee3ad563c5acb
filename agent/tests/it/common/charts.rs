//! Charts that try to leave their project, and how a test deploys one and reads its refusal.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::IngressClass;
use kube::api::Api;
use kubenest_contracts::{self as wire, AppPhase};
use serde_json::json;

use super::{Backend, app_ref, project};

/// How long a chart's revision may take to settle.
const SETTLED: Duration = Duration::from_secs(90);

/// A chart that reaches beyond its project: an IngressClass (cluster-scoped) among a
/// Deployment and a ConfigMap that alone would be allowed.
pub const ESCAPE: [(&str, &str); 2] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: escape\nversion: 0.1.0\n",
    ),
    (
        "templates/all.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\n\
         data:\n  a: b\n---\n\
         apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {{ .Release.Name }}-class\n\
         spec:\n  controller: example.test/ingress\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-webapp\n\
         spec:\n  selector:\n    matchLabels: {app: x}\n  template:\n    metadata:\n      labels: {app: x}\n\
         \x20   spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n",
    ),
];

/// `app.deploy` of App `site` with one chart workload `web` of `repository`'s chart `name`.
pub fn chart_app_of(app: wire::AppRef, repository: &str, name: &str) -> wire::AppDeploy {
    serde_json::from_value(json!({
        "app": app, "revision": "r1", "progress_deadline_seconds": 120,
        "components": [{"kind": "workload", "name": "web", "replicas": 1, "source": {
            "type": "helm",
            "chart": {"repository": repository, "name": name, "version": "0.1.0"},
            "values": {}}}]
    }))
    .unwrap()
}

/// Deploys `repository`'s chart `chart` as App `site` in a new project; returns the failed
/// revision's component message and the namespace.
pub async fn refused_chart(backend: &Backend, repository: &str, chart: &str) -> (String, String) {
    let (project, namespace) = project(backend, chart).await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "site", &project, &namespace);
    backend.accept(chart_app_of(app, repository, chart)).await;
    let failed = backend
        .app_status("the chart's revision settled", SETTLED, &id, |s| {
            matches!(s.phase, AppPhase::Failed | AppPhase::Running)
        })
        .await;
    assert_eq!(failed.phase, AppPhase::Failed, "{failed:#?}");
    (failed.components[0].message.clone(), namespace)
}

/// Asserts the [`ESCAPE`] chart's revision failed naming its IngressClass, and that nothing of
/// it exists: neither the cluster-scoped object nor its namespaced siblings.
pub async fn assert_escape_refused(client: &kube::Client, message: &str, namespace: &str) {
    assert!(
        message.contains("IngressClass/site-web-class") && message.contains("cluster-scoped"),
        "{message}"
    );
    let classes = Api::<IngressClass>::all(client.clone());
    assert!(classes.get_opt("site-web-class").await.unwrap().is_none());
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .get_opt("site-web-settings")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), namespace)
            .get_opt("site-web-webapp")
            .await
            .unwrap()
            .is_none()
    );
}
