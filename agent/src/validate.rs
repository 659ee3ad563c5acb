//! What the schema cannot check of an `app.deploy` (pure): the agent refuses such an App before
//! it stores it. The rules are the domain's, the same the REST facade and the App controller
//! apply, so an App one path refuses is refused by all with the same field and reason.

use kubenest_contracts as wire;

/// Checks what the schema cannot: the component names (count, DNS labels, unique), and export
/// references that name an addon component of the same App publishing that export. Returns
/// (JSON pointer into the command, reason).
pub fn validate(deploy: &wire::AppDeploy) -> Result<(), (String, String)> {
    kubenest_domain::app::validate_deploy(deploy).map_err(|e| (e.pointer, e.reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(components: serde_json::Value) -> wire::AppDeploy {
        serde_json::from_value(json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": components,
        }))
        .unwrap()
    }

    #[test]
    fn export_references_must_name_a_published_export_of_the_app() {
        let ok = deploy(json!([
            {"kind": "addon", "name": "db", "definition": "postgres",
             "chart": {"repository": "charts/addons", "name": "postgres", "version": "1.0.0"},
             "exports": {"dsn": "x"}},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1,
             "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}]}
        ]));
        assert_eq!(validate(&ok), Ok(()));
        let mut bad = ok.clone();
        if let wire::Component::Workload(w) = &mut bad.components[1] {
            w.env[0].from = wire::EnvFrom::ExportRef(wire::ExportRef {
                component: "db".into(),
                export: "uri".into(),
            });
        }
        assert_eq!(
            validate(&bad).unwrap_err().0,
            "/components/1/env/0/export_ref/export"
        );
        let twice = deploy(json!([
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1}
        ]));
        assert_eq!(validate(&twice).unwrap_err().0, "/components/1/name");
    }
}
