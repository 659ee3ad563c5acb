//! Objects the App controller's unit tests share.

use chrono::Utc;
use kubenest_contracts as wire;
use kubenest_store::{Deployment, DeploymentStatus, Operation};
use serde_json::json;
use uuid::Uuid;

use super::facts::Built;
use crate::project::fixtures::{placement, project};

/// App `web` built at `revision`, recorded, with nothing in flight.
pub fn built(revision: &str) -> Built {
    let project = project("web", "shop", 0, true);
    Built {
        placement: placement(&project),
        deploy: wire::AppDeploy {
            app: wire::AppRef {
                app_id: wire::Id::new("uid-app"),
                name: wire::Name::new("web"),
                project_id: wire::Id::new("uid-web"),
                namespace: wire::Name::new("shop"),
            },
            revision: revision.to_owned(),
            progress_deadline_seconds: 600,
            paused: false,
            components: vec![],
            verification: None,
        },
        revision: revision.to_owned(),
        recorded: true,
        adopt: None,
        differs: false,
        redeploy: None,
    }
}

/// A pending rollback row of App `web`.
pub fn pending_row() -> Deployment {
    Deployment {
        id: Uuid::nil(),
        intent_key: "uid-app/rollback".into(),
        org_id: "acme".into(),
        project_id: "uid-web".into(),
        cluster_id: "uid-east".into(),
        app_id: "uid-app".into(),
        app_name: "web".into(),
        revision: "r1".into(),
        operation: Operation::Rollback,
        actor: "alice".into(),
        spec_before: None,
        spec_after: json!({}),
        rollback_of: None,
        status: DeploymentStatus::Pending,
        message: String::new(),
        created_at: Utc::now(),
        finished_at: None,
        verification: None,
        reason: String::new(),
    }
}
