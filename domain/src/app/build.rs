//! App spec (+ what it references) → the complete `app.deploy` for one revision.

use std::collections::BTreeMap;

use kubenest_contracts as wire;
use kubenest_crds::app::{AppSpec, Component, Workload};
use serde_json::{Map, Value};

use super::addons::{ResolvedAddon, values_refusal};
use super::revision::revision_of;
use super::validate::{FieldError, validate_deploy};

/// Who the App is and where it goes, as the reconciler looked it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppIdentity {
    /// The App object's uid.
    pub app_id: String,
    /// The App's name.
    pub name: String,
    /// The project's id.
    pub project_id: String,
    /// The project's namespace on the cluster.
    pub namespace: String,
    /// The organization's verification, for an App that sets none of its own.
    pub default_verification: Option<kubenest_crds::verification::VerificationSpec>,
}

impl AppIdentity {
    /// How `spec`'s revisions are judged: its own verification, else its organization's.
    pub fn verification<'a>(
        &'a self,
        spec: &'a AppSpec,
    ) -> Option<&'a kubenest_crds::verification::VerificationSpec> {
        spec.verification
            .as_ref()
            .or(self.default_verification.as_ref())
    }
}

/// A spec that cannot be built, naming the field (a path into the App) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct BuildError {
    /// The field, as a path into the App (`spec.components[0].addon.definition`).
    pub field: String,
    /// Why it cannot be built.
    pub reason: String,
}

impl From<FieldError> for BuildError {
    fn from(error: FieldError) -> Self {
        BuildError {
            field: error.field,
            reason: error.reason,
        }
    }
}

fn invalid(field: String, reason: impl Into<String>) -> BuildError {
    BuildError {
        field,
        reason: reason.into(),
    }
}

/// Builds the desired state of `spec` at its revision and validates it ([`validate_deploy`]).
/// `addons` holds the AddonDefinitions the spec names, by name; a missing one, or an export
/// reference that no addon component of this App publishes, is refused with the offending field.
pub fn build_deploy(
    identity: &AppIdentity,
    spec: &AppSpec,
    addons: &BTreeMap<String, ResolvedAddon>,
) -> Result<wire::AppDeploy, BuildError> {
    let spec_json =
        serde_json::to_value(spec).map_err(|e| invalid("spec".into(), e.to_string()))?;
    // Every named definition must exist before anything is built.
    for (i, component) in spec.components.iter().enumerate() {
        if let Some(addon) = &component.addon
            && !addons.contains_key(&addon.definition)
        {
            return Err(invalid(
                format!("spec.components[{i}].addon.definition"),
                format!("no addon definition named {:?}", addon.definition),
            ));
        }
    }
    let components = spec
        .components
        .iter()
        .enumerate()
        .map(|(i, component)| build_component(i, &identity.name, component, addons))
        .collect::<Result<Vec<_>, _>>()?;
    let deploy = wire::AppDeploy {
        app: wire::AppRef {
            app_id: wire::Id::new(&identity.app_id),
            name: wire::Name::new(&identity.name),
            project_id: wire::Id::new(&identity.project_id),
            namespace: wire::Name::new(&identity.namespace),
        },
        revision: revision_of(&spec_json),
        progress_deadline_seconds: spec.progress_deadline_seconds,
        paused: spec.paused,
        components,
        verification: identity.verification(spec).map(|v| wire::Verification {
            window_seconds: v.window_seconds,
            metrics: v.metrics.as_ref().map(wire::MetricsEndpoint::from),
        }),
    };
    validate_deploy(&deploy)?;
    Ok(deploy)
}

fn build_component(
    i: usize,
    app: &str,
    component: &Component,
    addons: &BTreeMap<String, ResolvedAddon>,
) -> Result<wire::Component, BuildError> {
    let name = wire::Name::new(&component.name);
    match (&component.workload, &component.addon) {
        (Some(workload), None) => {
            build_workload(i, app, name, workload).map(wire::Component::Workload)
        }
        (None, Some(addon)) => {
            let field = format!("spec.components[{i}].addon.definition");
            let resolved = addons
                .get(&addon.definition)
                .ok_or_else(|| invalid(field, "unknown addon definition"))?;
            match values_refusal(resolved.values_schema.as_ref(), &addon.values) {
                Ok(None) => {}
                Ok(Some((field, reason))) => {
                    return Err(invalid(
                        format!("spec.components[{i}].addon.{field}"),
                        reason,
                    ));
                }
                Err(reason) => {
                    return Err(invalid(
                        format!("spec.components[{i}].addon.definition"),
                        reason,
                    ));
                }
            }
            let mut chart = resolved.chart.clone();
            if let Some(version) = &addon.version {
                // A catalog chart (a path on the agent, no scheme) exists at its pinned
                // version only: another one would fail on the cluster, so it fails here.
                let catalog = !chart.repository.contains("://");
                if catalog && *version != chart.version {
                    return Err(invalid(
                        format!("spec.components[{i}].addon.version"),
                        format!(
                            "the catalog holds {} at version {} only",
                            addon.definition, chart.version
                        ),
                    ));
                }
                chart.version = version.clone();
            }
            let mut values = resolved.default_values.clone();
            merge(&mut values, &addon.values);
            Ok(wire::Component::Addon(wire::Addon {
                name,
                definition: wire::Name::new(&addon.definition),
                chart,
                values,
                exports: resolved.exports.clone(),
            }))
        }
        _ => Err(invalid(
            format!("spec.components[{i}]"),
            "set exactly one of workload or addon",
        )),
    }
}

fn build_workload(
    i: usize,
    app: &str,
    name: wire::Name,
    workload: &Workload,
) -> Result<wire::Workload, BuildError> {
    let at = |rest: &str| format!("spec.components[{i}].workload{rest}");
    let source = match (&workload.image, &workload.git, &workload.helm) {
        (Some(image), None, None) => wire::WorkloadSource::Image {
            image: image.clone(),
        },
        (None, Some(git), None) if git.mode == kubenest_crds::app::BuildMode::Buildpack => {
            // The builder image builds Dockerfiles; no buildpacks builder exists yet.
            return Err(invalid(
                at(".git.mode"),
                "buildpack builds are not available (the builder builds Dockerfiles); use \
                 mode dockerfile with a Dockerfile in the repository",
            ));
        }
        (None, Some(git), None) => wire::WorkloadSource::Git(wire::GitSource {
            repository: git.repository.clone(),
            git_ref: git.git_ref.clone(),
            context_dir: git.context_dir.clone(),
            mode: match git.mode {
                kubenest_crds::app::BuildMode::Dockerfile => wire::BuildMode::Dockerfile,
                kubenest_crds::app::BuildMode::Buildpack => wire::BuildMode::Buildpack,
            },
        }),
        (None, None, Some(helm)) => wire::WorkloadSource::Helm {
            chart: wire::ChartRef {
                repository: helm.chart.repository.clone(),
                name: helm.chart.name.clone(),
                version: helm.chart.version.clone(),
            },
            values: helm.values.clone(),
        },
        _ => return Err(invalid(at(""), "set exactly one of image, git or helm")),
    };
    if matches!(source, wire::WorkloadSource::Helm { .. }) {
        // A chart renders its own objects: these fields would reach nothing, so they are
        // refused rather than ignored.
        let container_fields = [
            (workload.replicas != 1, ".replicas"),
            (workload.port.is_some(), ".port"),
            (!workload.env.is_empty(), ".env"),
            (workload.ingress.is_some(), ".ingress"),
            (workload.resources.is_some(), ".resources"),
            (workload.health_check.is_some(), ".healthCheck"),
        ];
        if let Some((_, field)) = container_fields.iter().find(|(set, _)| *set) {
            return Err(invalid(
                at(field),
                "a Helm chart workload renders its own objects; set this in the chart's values",
            ));
        }
    }
    let mut env = Vec::with_capacity(workload.env.len());
    for (j, var) in workload.env.iter().enumerate() {
        let from = match (&var.value, &var.export_ref) {
            (Some(value), None) => wire::EnvFrom::Value(value.clone()),
            // Whether the reference resolves is [`validate_deploy`]'s to say, for every path.
            (None, Some(export_ref)) => wire::EnvFrom::ExportRef(wire::ExportRef {
                component: wire::Name::new(&export_ref.component),
                export: export_ref.export.clone(),
            }),
            _ => {
                return Err(invalid(
                    at(&format!(".env[{j}]")),
                    "set exactly one of value or exportRef",
                ));
            }
        };
        env.push(wire::EnvVar {
            name: var.name.clone(),
            from,
        });
    }
    let secret = wire::component_secret(app, name.as_str());
    Ok(wire::Workload {
        name,
        source,
        replicas: workload.replicas,
        port: workload.port,
        env,
        secret: Some(secret),
        ingress: workload.ingress.as_ref().map(|ing| wire::Ingress {
            host: ing.host.clone(),
            path: ing.path.clone(),
            tls: ing.tls,
            tls_secret: ing.tls_secret.as_deref().map(wire::Name::new),
        }),
        resources: workload.resources.as_ref().map(|r| wire::Resources {
            cpu_request: r.cpu_request.clone(),
            cpu_limit: r.cpu_limit.clone(),
            memory_request: r.memory_request.clone(),
            memory_limit: r.memory_limit.clone(),
        }),
        health_check: workload.health_check.as_ref().map(|h| wire::HealthCheck {
            path: h.path.clone(),
            port: h.port,
            initial_delay_seconds: h.initial_delay_seconds,
            period_seconds: h.period_seconds.unwrap_or(10),
        }),
    })
}

/// Deep-merges `overlay` into `base` (objects merge key by key; anything else replaces).
pub fn merge(base: &mut Map<String, Value>, overlay: &Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(key), value) {
            (Some(Value::Object(into)), Value::Object(from)) => merge(into, from),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn identity() -> AppIdentity {
        AppIdentity {
            app_id: "0d9a4c1e-2b3f-4a5b-9c8d-7e6f5a4b3c2d".into(),
            name: "shop".into(),
            project_id: "storefront".into(),
            namespace: "storefront".into(),
            default_verification: None,
        }
    }

    fn catalog() -> BTreeMap<String, ResolvedAddon> {
        let exports = ["host", "port", "user", "database", "password", "dsn"]
            .into_iter()
            .map(|k| (k.to_owned(), format!("{{{k}}}")))
            .collect();
        let postgres = ResolvedAddon {
            chart: wire::ChartRef {
                repository: "charts/addons/postgres".into(),
                name: "postgres".into(),
                version: "1.4.0".into(),
            },
            exports,
            default_values:
                json!({"persistence": {"size": "1Gi", "storageClass": "standard"}, "replicas": 1})
                    .as_object()
                    .cloned()
                    .unwrap(),
            values_schema: json!({"type": "object", "additionalProperties": false, "properties": {
                "persistence": {"type": "object"}, "replicas": {"type": "integer"},
                "database": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"}}})
            .as_object()
            .cloned(),
        };
        BTreeMap::from([("postgres".to_owned(), postgres)])
    }

    fn spec(value: Value) -> AppSpec {
        serde_json::from_value(value).unwrap()
    }

    fn shop() -> Value {
        json!({
            "project": "storefront",
            "components": [
                { "name": "db", "addon": { "definition": "postgres", "values": { "persistence": { "size": "5Gi" } } } },
                { "name": "web", "workload": {
                    "image": "ghcr.example/shop/web:1.2.3", "replicas": 2, "port": 8080,
                    "env": [
                        { "name": "LOG_LEVEL", "value": "info" },
                        { "name": "DATABASE_URL", "exportRef": { "component": "db", "export": "dsn" } }
                    ],
                    "ingress": { "host": "shop.example.com" }
                } }
            ]
        })
    }

    #[test]
    fn buildpack_builds_are_refused_until_a_builder_checks_the_source_out() {
        let git = |mode: &str| {
            spec(
                json!({"project": "storefront", "components": [{"name": "web", "workload": {
                "git": {"repository": "https://git.test/shop.git", "ref": "main", "mode": mode}}}]}),
            )
        };
        assert!(build_deploy(&identity(), &git("dockerfile"), &catalog()).is_ok());
        let error = build_deploy(&identity(), &git("buildpack"), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[0].workload.git.mode");
        assert!(error.reason.contains("dockerfile"), "{}", error.reason);
    }

    #[test]
    fn a_chart_workload_refuses_the_fields_a_chart_would_ignore() {
        let chart =
            json!({"repository": "oci://registry.test/charts", "name": "web", "version": "1.0.0"});
        let with = |extra: Value| {
            let mut workload = json!({"helm": {"chart": chart, "values": {"replicaCount": 3}}});
            workload
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            spec(
                json!({"project": "storefront", "components": [{"name": "web", "workload": workload}]}),
            )
        };
        assert!(build_deploy(&identity(), &with(json!({})), &catalog()).is_ok());
        for (extra, field) in [
            (json!({"replicas": 3}), "replicas"),
            (json!({"port": 8080}), "port"),
            (json!({"env": [{"name": "A", "value": "b"}]}), "env"),
            (
                json!({"ingress": {"host": "a.test", "path": "/"}}),
                "ingress",
            ),
            (json!({"resources": {"cpuRequest": "1"}}), "resources"),
            (json!({"healthCheck": {"path": "/"}}), "healthCheck"),
        ] {
            let error = build_deploy(&identity(), &with(extra), &catalog()).unwrap_err();
            assert_eq!(error.field, format!("spec.components[0].workload.{field}"));
        }
    }

    #[test]
    fn a_catalog_addon_is_only_at_its_pinned_version() {
        let mut app = shop();
        app["components"][0]["addon"]["version"] = json!("9.9.9");
        let error = build_deploy(&identity(), &spec(app), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[0].addon.version");
        assert!(error.reason.contains("1.4.0"), "{}", error.reason);
        let mut app = shop();
        app["components"][0]["addon"]["version"] = json!("1.4.0");
        assert!(build_deploy(&identity(), &spec(app), &catalog()).is_ok());
    }

    #[test]
    fn addon_values_must_satisfy_the_definitions_schema() {
        let mut app = shop();
        app["components"][0]["addon"]["values"] = json!({"database": "Not A Name"});
        let error = build_deploy(&identity(), &spec(app), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[0].addon.values.database");
        let mut app = shop();
        app["components"][0]["addon"]["values"] = json!({"replicaz": 3});
        let error = build_deploy(&identity(), &spec(app), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[0].addon.values");
        assert!(error.reason.contains("replicaz"), "{}", error.reason);
    }

    #[test]
    fn the_reference_app_builds_a_valid_deploy_command() {
        let deploy = build_deploy(&identity(), &spec(shop()), &catalog()).unwrap();
        assert_eq!(deploy.revision.len(), 16);
        assert_eq!(deploy.progress_deadline_seconds, 600);
        let wire::Component::Addon(db) = &deploy.components[0] else {
            panic!("db is an addon")
        };
        assert_eq!(db.chart.version, "1.4.0");
        // User values win, defaults fill in, nested objects merge.
        assert_eq!(
            Value::Object(db.values.clone()),
            json!({"persistence": {"size": "5Gi", "storageClass": "standard"}, "replicas": 1})
        );
        let wire::Component::Workload(web) = &deploy.components[1] else {
            panic!("web is a workload")
        };
        assert_eq!(
            web.env[1].from,
            wire::EnvFrom::ExportRef(wire::ExportRef {
                component: "db".into(),
                export: "dsn".into()
            })
        );

        // What the controllers build passes the hub's validator.
        let frame = wire::Envelope::new(deploy).for_cluster("c1".into(), "acme".into());
        wire::Validator::shared().unwrap().encode(&frame).unwrap();
    }

    #[test]
    fn the_revision_follows_the_spec() {
        let a = build_deploy(&identity(), &spec(shop()), &catalog()).unwrap();
        let b = build_deploy(&identity(), &spec(shop()), &catalog()).unwrap();
        assert_eq!(a.revision, b.revision);
        let mut changed = shop();
        changed["components"][1]["workload"]["image"] = json!("ghcr.example/shop/web:1.2.4");
        let c = build_deploy(&identity(), &spec(changed), &catalog()).unwrap();
        assert_ne!(a.revision, c.revision);
    }

    #[test]
    fn unknown_definitions_and_dangling_export_refs_name_the_field() {
        let mut unknown = shop();
        unknown["components"][0]["addon"]["definition"] = json!("mysql");
        let error = build_deploy(&identity(), &spec(unknown), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[0].addon.definition");

        let mut dangling = shop();
        dangling["components"][1]["workload"]["env"][1]["exportRef"]["component"] = json!("cache");
        let error = build_deploy(&identity(), &spec(dangling), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[1].workload.env[1].exportRef");

        let mut unpublished = shop();
        unpublished["components"][1]["workload"]["env"][1]["exportRef"]["export"] = json!("uri");
        let error = build_deploy(&identity(), &spec(unpublished), &catalog()).unwrap_err();
        assert_eq!(
            error.field,
            "spec.components[1].workload.env[1].exportRef.export"
        );
        assert!(error.reason.contains("dsn"), "{}", error.reason);

        let mut to_workload = shop();
        to_workload["components"][1]["workload"]["env"][1]["exportRef"]["component"] = json!("web");
        let error = build_deploy(&identity(), &spec(to_workload), &catalog()).unwrap_err();
        assert_eq!(error.field, "spec.components[1].workload.env[1].exportRef");
    }
}
