//! A tenant of the shared plane: an organization with a registered cluster whose scripted
//! agent is connected, and what its tests do with Apps and Projects.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubenest_crds::app::{App, AppSpec, AppStatus};
use kubenest_crds::project::{Project, ProjectPhase, ProjectSpec};
use kubenest_store::{DatabaseUrl, History};

use super::agent::Agent;
use super::{eventually_within, shared_plane};

/// An organization with a registered cluster whose scripted agent is connected.
pub struct Tenant {
    pub client: Client,
    pub org: String,
    pub namespace: String,
    pub cluster_id: String,
    pub agent: Agent,
    pub history: History,
}

pub async fn tenant(prefix: &str) -> Tenant {
    let plane = shared_plane().await;
    let client = plane.mgmt.client().await.unwrap();
    let (org, namespace, clusters) = super::org_with_cluster(&client, prefix, "east").await;
    let token = super::credentials(&client, &namespace, "east").await;
    let agent = Agent::connect_eventually(&plane.hub_url, &token).await;
    let cluster_id = clusters.get("east").await.unwrap().uid().unwrap();
    let history = History::connect(&DatabaseUrl::new(plane.database_url.clone()), 2)
        .await
        .unwrap();
    Tenant {
        client,
        org,
        namespace,
        cluster_id,
        agent,
        history,
    }
}

impl Tenant {
    pub fn apps(&self) -> Api<App> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn projects(&self) -> Api<Project> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub async fn project(&self, name: &str, namespace: &str) -> Project {
        let spec = ProjectSpec {
            cluster: "east".into(),
            namespace: namespace.into(),
            registry_secret: None,
            ingress_ca: false,
            members: vec![],
            progress_deadline_seconds: 600,
            pod_security: None,
            quota: None,
            defaults: None,
            network: None,
        };
        self.projects()
            .create(&PostParams::default(), &Project::new(name, spec))
            .await
            .unwrap();
        self.until_project(name, |s| s.phase == ProjectPhase::Ready)
            .await
    }

    pub async fn until_project(
        &self,
        name: &str,
        check: impl Fn(&kubenest_crds::project::ProjectStatus) -> bool,
    ) -> Project {
        let mut last = None;
        eventually_within(
            &format!("project {name}"),
            Duration::from_secs(30),
            async || {
                last = self.projects().get_opt(name).await.unwrap();
                last.as_ref()
                    .and_then(|p| p.status.as_ref())
                    .is_some_and(&check)
            },
        )
        .await;
        last.unwrap()
    }

    pub async fn app(&self, name: &str, project: &str, image: &str) -> App {
        let app = App::new(name, spec(project, image));
        self.apps()
            .create(&PostParams::default(), &app)
            .await
            .unwrap()
    }

    /// Waits until the App's status satisfies `check` (for at most `within`).
    pub async fn until(
        &self,
        name: &str,
        within: Duration,
        check: impl Fn(&AppStatus) -> bool,
    ) -> App {
        let mut last = None;
        eventually_within(&format!("app {name}"), within, async || {
            last = self.apps().get_opt(name).await.unwrap();
            last.as_ref()
                .and_then(|a| a.status.as_ref())
                .is_some_and(&check)
        })
        .await;
        last.unwrap()
    }

    pub async fn running(&self, name: &str) -> App {
        self.until(name, Duration::from_secs(30), |s| {
            s.phase.as_deref() == Some("Running") && s.observed_revision == s.revision
        })
        .await
    }

    /// Merge-patches App `name`.
    pub async fn merge(&self, name: &str, patch: serde_json::Value) {
        self.apps()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    pub async fn annotate(&self, name: &str, key: &str, value: &str) {
        self.merge(
            name,
            serde_json::json!({"metadata": {"annotations": {key: value}}}),
        )
        .await;
    }
}

pub fn spec(project: &str, image: &str) -> AppSpec {
    serde_json::from_value(serde_json::json!({
        "project": project,
        "components": [{"name": "web", "workload": {"image": image, "replicas": 2, "port": 8080}}],
    }))
    .unwrap()
}

pub fn reason(app: &App, type_: &str) -> String {
    let status = app.status.as_ref().unwrap();
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
    format!("{}: {}", c.reason, c.message)
}
