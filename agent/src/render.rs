//! Kubernetes objects from a workload component (pure).
//!
//! A workload becomes a Deployment, a Service when it has a port, and an Ingress when it has
//! one. Every object carries the App's labels, so the agent finds (and prunes) what an App owns
//! by label. Literal environment values travel in the command; an `export` reference becomes a
//! `secretKeyRef` on the addon's export Secret and the component's Secret an `envFrom`, so no
//! secret value of the user's ever passes through the agent's hands. The one secret it renders
//! is its own: the certificate it issued for an ingress with `tls` ([`crate::certificates`]).

use kubenest_crds::names::{annotations, labels};
use std::collections::BTreeMap;

use kubenest_contracts as wire;
use serde_json::{Value, json};

pub use kubenest_contracts::object_name;

use crate::certificates;

/// The name of a component's objects (Deployment, Service, Ingress, Helm release).
pub fn component_object(app: &wire::AppRef, component: &str) -> String {
    object_name(&[app.name.as_str(), component])
}

/// The Secret an addon component publishes its exports into.
pub fn export_secret(app: &wire::AppRef, component: &str) -> String {
    object_name(&[app.name.as_str(), component, "exports"])
}

/// Labels of every object of an App's component.
pub fn labels(app: &wire::AppRef, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::APP_ID.to_owned(), app.app_id.to_string()),
        (labels::COMPONENT.to_owned(), component.to_owned()),
        (labels::NAME.to_owned(), component.to_owned()),
        (labels::INSTANCE.to_owned(), app.name.as_str().to_owned()),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_AGENT.to_owned(),
        ),
    ])
}

/// What a workload renders to, given facts only the cluster knows.
#[derive(Debug, Clone, Default)]
pub struct WorkloadInputs<'a> {
    /// The image, for a Git-built workload once its build succeeded.
    pub built_image: Option<&'a str>,
    /// Scale to zero (a paused App).
    pub paused: bool,
    /// The latest redeploy request.
    pub restart_id: Option<&'a str>,
    pub progress_deadline_seconds: u32,
    /// The certificate kubenest issued for the workload's ingress (`tls`, no `tls_secret`).
    pub certificate: Option<&'a crate::certificates::Issued>,
}

/// The Secret holding the certificate kubenest issues for a workload's ingress.
pub fn tls_secret(app: &wire::AppRef, component: &str) -> String {
    object_name(&[app.name.as_str(), component, "tls"])
}

/// Why a workload cannot be rendered yet or at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A Git workload whose image is not built yet.
    #[error("waiting for the image build")]
    AwaitingBuild,
    /// A Helm workload: rendered by helm, not here.
    #[error("rendered by helm")]
    Helm,
}

/// The Deployment, Service, certificate Secret and Ingress of a workload, in apply order.
pub fn workload(
    app: &wire::AppRef,
    workload: &wire::Workload,
    inputs: &WorkloadInputs<'_>,
) -> Result<Vec<Value>, RenderError> {
    let image = match &workload.source {
        wire::WorkloadSource::Image { image } => image.as_str(),
        wire::WorkloadSource::Git(_) => inputs.built_image.ok_or(RenderError::AwaitingBuild)?,
        wire::WorkloadSource::Helm { .. } => return Err(RenderError::Helm),
    };
    let component = workload.name.as_str();
    let name = component_object(app, component);
    let namespace = app.namespace.as_str();
    let labels = labels(app, component);
    let selector = json!({
        labels::APP_ID: app.app_id.as_str(),
        labels::COMPONENT: component,
    });
    let mut container = json!({
        "name": component,
        "image": image,
        "env": env(app, &workload.env),
    });
    if let Some(port) = workload.port {
        container["ports"] = json!([{"name": "http", "containerPort": port, "protocol": "TCP"}]);
    }
    if let Some(secret) = &workload.secret {
        // Optional: the Secret exists once someone sets a value in it.
        container["envFrom"] = json!([{"secretRef": {"name": secret.as_str(), "optional": true}}]);
    }
    if let Some(resources) = &workload.resources {
        container["resources"] = self::resources(resources);
    }
    if let Some(check) = &workload.health_check {
        let port = check.port.or(workload.port).unwrap_or(80);
        container["readinessProbe"] = json!({
            "httpGet": {"path": check.path, "port": port},
            "initialDelaySeconds": check.initial_delay_seconds,
            "periodSeconds": check.period_seconds,
        });
    }
    let mut template_annotations = serde_json::Map::new();
    if let Some(restart) = inputs.restart_id {
        template_annotations.insert(annotations::RESTART_ID.into(), restart.into());
    }
    let replicas = if inputs.paused { 0 } else { workload.replicas };
    let mut objects = vec![json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "progressDeadlineSeconds": inputs.progress_deadline_seconds,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels, "annotations": template_annotations},
                "spec": {"containers": [container]},
            },
        },
    })];
    if let Some(port) = workload.port {
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": selector,
                "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
            },
        }));
        if let Some(ingress) = &workload.ingress {
            let mut spec = json!({
                "rules": [{
                    "host": ingress.host,
                    "http": {"paths": [{
                        "path": ingress.path,
                        "pathType": "Prefix",
                        "backend": {"service": {"name": name, "port": {"number": port}}},
                    }]},
                }],
            });
            if ingress.tls {
                let secret = match &ingress.tls_secret {
                    Some(own) => own.as_str().to_owned(),
                    None => tls_secret(app, component),
                };
                if ingress.tls_secret.is_none()
                    && let Some(issued) = inputs.certificate
                {
                    let labels = serde_json::to_value(&labels).unwrap_or_default();
                    objects.push(certificates::secret(&secret, namespace, &labels, issued));
                }
                spec["tls"] = json!([{"hosts": [ingress.host], "secretName": secret}]);
            }
            objects.push(json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "spec": spec,
            }));
        }
    }
    Ok(objects)
}

fn env(app: &wire::AppRef, vars: &[wire::EnvVar]) -> Vec<Value> {
    vars.iter()
        .map(|var| match &var.from {
            wire::EnvFrom::Value(value) => json!({"name": var.name, "value": value}),
            wire::EnvFrom::ExportRef(export) => json!({
                "name": var.name,
                "valueFrom": {"secretKeyRef": {
                    "name": export_secret(app, export.component.as_str()),
                    "key": export.export,
                }},
            }),
        })
        .collect()
}

fn resources(resources: &wire::Resources) -> Value {
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    let put = |map: &mut serde_json::Map<String, Value>, key: &str, value: &Option<String>| {
        if let Some(value) = value {
            map.insert(key.into(), value.clone().into());
        }
    };
    put(&mut requests, "cpu", &resources.cpu_request);
    put(&mut requests, "memory", &resources.memory_request);
    put(&mut limits, "cpu", &resources.cpu_limit);
    put(&mut limits, "memory", &resources.memory_limit);
    json!({"requests": requests, "limits": limits})
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn app() -> wire::AppRef {
        wire::AppRef {
            app_id: "0b7c".into(),
            name: "shop".into(),
            project_id: "p1".into(),
            namespace: "shop-prod".into(),
        }
    }

    fn web() -> wire::Workload {
        wire::Workload {
            name: "web".into(),
            source: wire::WorkloadSource::Image {
                image: "nginx:1.27".into(),
            },
            replicas: 3,
            port: Some(8080),
            env: vec![
                wire::EnvVar {
                    name: "MODE".into(),
                    from: wire::EnvFrom::Value("prod".into()),
                },
                wire::EnvVar {
                    name: "DATABASE_URL".into(),
                    from: wire::EnvFrom::ExportRef(wire::ExportRef {
                        component: "db".into(),
                        export: "dsn".into(),
                    }),
                },
            ],
            secret: Some("web-secrets".into()),
            ingress: Some(wire::Ingress {
                host: "shop.example.test".into(),
                path: "/".into(),
                tls: false,
                tls_secret: None,
            }),
            resources: None,
            health_check: None,
        }
    }

    fn inputs() -> WorkloadInputs<'static> {
        WorkloadInputs {
            progress_deadline_seconds: 120,
            ..WorkloadInputs::default()
        }
    }

    #[test]
    fn a_workload_renders_a_deployment_service_and_ingress_with_the_apps_labels() {
        let objects = workload(&app(), &web(), &inputs()).unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Deployment", "Service", "Ingress"]);
        for object in &objects {
            assert_eq!(object["metadata"]["name"], "shop-web");
            assert_eq!(object["metadata"]["namespace"], "shop-prod");
            assert_eq!(object["metadata"]["labels"][labels::APP_ID], "0b7c");
        }
        let deployment = &objects[0];
        assert_eq!(deployment["spec"]["replicas"], 3);
        assert_eq!(deployment["spec"]["progressDeadlineSeconds"], 120);
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:1.27");
        assert_eq!(container["ports"][0]["containerPort"], 8080);
        assert_eq!(objects[2]["spec"]["rules"][0]["host"], "shop.example.test");
    }

    #[test]
    fn an_ingress_with_tls_names_the_users_secret_or_the_issued_one_rendered_before_it() {
        let mut own = web();
        let ingress = own.ingress.as_mut().unwrap();
        ingress.tls = true;
        ingress.tls_secret = Some(wire::Name::new("shop-cert"));
        let objects = workload(&app(), &own, &inputs()).unwrap();
        assert_eq!(
            objects.len(),
            3,
            "no Secret of kubenest's for the user's own"
        );
        assert_eq!(objects[2]["spec"]["tls"][0]["secretName"], "shop-cert");

        let mut issued_for = web();
        issued_for.ingress.as_mut().unwrap().tls = true;
        let issued = certificates::Issued {
            host: "shop.example.test".into(),
            chain_pem: "chain".into(),
            key_pem: "key".into(),
            ca_digest: "ca".into(),
            not_after: chrono::Utc::now(),
        };
        let with = WorkloadInputs {
            certificate: Some(&issued),
            ..inputs()
        };
        let objects = workload(&app(), &issued_for, &with).unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Deployment", "Service", "Secret", "Ingress"]);
        assert_eq!(objects[2]["metadata"]["name"], "shop-web-tls");
        assert_eq!(objects[2]["metadata"]["labels"][labels::APP_ID], "0b7c");
        assert_eq!(objects[3]["spec"]["tls"][0]["secretName"], "shop-web-tls");
        assert_eq!(
            objects[3]["spec"]["tls"][0]["hosts"][0],
            "shop.example.test"
        );
    }

    #[test]
    fn an_export_reference_becomes_a_secret_key_ref_and_the_component_secret_env_from() {
        let objects = workload(&app(), &web(), &inputs()).unwrap();
        let container = &objects[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["env"][0],
            json!({"name": "MODE", "value": "prod"})
        );
        assert_eq!(
            container["env"][1],
            json!({"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {
                "name": "shop-db-exports", "key": "dsn"}}})
        );
        assert_eq!(
            container["envFrom"],
            json!([{"secretRef": {"name": "web-secrets", "optional": true}}])
        );
    }

    #[test]
    fn a_paused_workload_has_no_replicas_and_a_redeploy_changes_the_pod_template() {
        let paused = WorkloadInputs {
            paused: true,
            restart_id: Some("r-2"),
            ..inputs()
        };
        let objects = workload(&app(), &web(), &paused).unwrap();
        assert_eq!(objects[0]["spec"]["replicas"], 0);
        assert_eq!(
            objects[0]["spec"]["template"]["metadata"]["annotations"][annotations::RESTART_ID],
            "r-2"
        );
    }

    #[test]
    fn a_git_workload_waits_for_its_image_and_then_uses_it() {
        let mut git = web();
        git.source = wire::WorkloadSource::Git(wire::GitSource {
            repository: "https://git.example.test/shop.git".into(),
            git_ref: "main".into(),
            context_dir: None,
            mode: wire::BuildMode::Dockerfile,
        });
        assert_eq!(
            workload(&app(), &git, &inputs()).unwrap_err(),
            RenderError::AwaitingBuild
        );
        let built = WorkloadInputs {
            built_image: Some("registry.local/shop/web:abc"),
            ..inputs()
        };
        let objects = workload(&app(), &git, &built).unwrap();
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.local/shop/web:abc"
        );
    }

    #[test]
    fn long_names_are_shortened_to_a_dns_label_and_stay_distinct() {
        let long = "a".repeat(60);
        let one = object_name(&[&long, "web"]);
        let two = object_name(&[&long, "api"]);
        assert!(one.len() <= 63 && two.len() <= 63);
        assert_ne!(one, two);
        assert_eq!(object_name(&["shop", "web"]), "shop-web");
    }
}
