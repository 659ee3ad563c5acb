//! Objects the Project controller's unit tests share.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubenest_crds::project::{Project, ProjectSpec, ProjectStatus};

use crate::intents::ObjectKey;
use crate::placement::Placement;

/// Project `name` on cluster `east` claiming `namespace`, created at second `created`.
pub fn project(name: &str, namespace: &str, created: i64, claimed: bool) -> Project {
    let mut p = Project::new(
        name,
        ProjectSpec {
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
        },
    );
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
    ));
    if claimed {
        p.status = Some(ProjectStatus {
            cluster_phase: Some("Ready".into()),
            ..Default::default()
        });
    }
    p
}

/// The key of project `web`.
pub fn key() -> ObjectKey {
    ObjectKey {
        namespace: "org-acme".into(),
        name: "web".into(),
        uid: "uid-web".into(),
    }
}

/// `project` placed on cluster `east` of organization `acme`.
pub fn placement(project: &Project) -> Placement {
    Placement {
        org_id: "acme".into(),
        project: project.clone(),
        project_id: "uid-web".into(),
        cluster_name: "east".into(),
        cluster_id: "uid-east".into(),
        namespace: "shop".into(),
    }
}
