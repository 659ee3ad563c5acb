//! The API's JSON shapes (snake_case, unknown fields refused) and their mapping to and from the
//! custom resources (camelCase). Components are written as in the spec:
//! `{"name", "type": "workload", "workload_spec": {...}}` or `{"type": "addon", "addon_spec"}`.
//!
//! The mapping goes through JSON on purpose: the CRD types stay the single definition of what a
//! valid App is, and free-form Helm `values` pass through untouched.

pub mod verdict;
pub mod verification;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use kubenest_contracts::patterns;

use crate::error::ApiError;

/// What the OpenAPI document says of a name that is a DNS label (RFC 1123): the pattern and
/// length the API checks (`routes::check_dns_label`), so a client knows them before it asks.
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The pattern of a user name (`routes::session::is_username`, which the database enforces too).
pub const USERNAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9._@]*[a-z0-9])?$";

/// One component of an App.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentBody {
    /// DNS label, unique in the App.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ComponentKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_spec: Option<WorkloadBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon_spec: Option<AddonBody>,
}

/// What a component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComponentKind {
    Workload,
    Addon,
}

/// A container workload: exactly one of `image`, `git` or `helm`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env: Vec<EnvBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheckBody>,
}

/// Build the image on the cluster from Git.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitBody {
    /// `https://host/path` (no user or password: set them with the git-credentials route),
    /// `ssh://[user@]host/path` or `user@host:path`.
    #[schemars(length(min = 1, max = 2048), regex(pattern = patterns::GIT_REPOSITORY))]
    pub repository: String,
    /// A branch, tag or commit.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 255), regex(pattern = patterns::GIT_REF))]
    pub git_ref: String,
    /// The build's folder inside the repository (its root when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = patterns::CONTEXT_DIR))]
    pub context_dir: Option<String>,
    /// `dockerfile` or `buildpack`.
    pub mode: String,
}

/// A pinned chart.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChartBody {
    /// An `https://` chart repository or `oci://` registry path (no user or password), or a
    /// catalog path like `charts/addons`.
    #[schemars(length(min = 1, max = 1024), regex(pattern = patterns::CHART_REPOSITORY))]
    pub repository: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = patterns::CHART_NAME))]
    pub name: String,
    /// An exact version.
    #[schemars(length(min = 1, max = 128), regex(pattern = patterns::CHART_VERSION))]
    pub version: String,
}

/// Render a Helm chart as the workload.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelmBody {
    pub chart: ChartBody,
    #[serde(default)]
    pub values: Map<String, Value>,
}

/// An environment variable: exactly one of `value` or `export_ref`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvBody {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ExportRefBody>,
}

/// An export of an addon component of the same App, resolved on the cluster.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRefBody {
    pub component: String,
    pub export: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngressBody {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Serve HTTPS, with the certificate `tls_secret` names or else one kubenest issues for
    /// `host` from the project's ingress CA (`PUT /api/v1/projects/{id}/ingress-ca`).
    #[serde(default)]
    pub tls: bool,
    /// A `kubernetes.io/tls` Secret the user made in the project's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret: Option<String>,
}

/// Kubernetes quantities.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourcesBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckBody {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    // The hub's own bounds (`wire::HealthCheck`), documented here too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 3600))]
    pub initial_delay_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub period_seconds: Option<u32>,
}

/// An addon from the catalog as a component.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonBody {
    /// The AddonDefinition, e.g. `postgres`.
    pub definition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub values: Map<String, Value>,
}

/// snake_case API keys and their camelCase CRD names (both directions use this table).
const RENAMES: &[(&str, &str)] = &[
    ("health_check", "healthCheck"),
    ("export_ref", "exportRef"),
    ("cpu_request", "cpuRequest"),
    ("cpu_limit", "cpuLimit"),
    ("memory_request", "memoryRequest"),
    ("memory_limit", "memoryLimit"),
    ("initial_delay_seconds", "initialDelaySeconds"),
    ("period_seconds", "periodSeconds"),
    ("context_dir", "contextDir"),
    ("tls_secret", "tlsSecret"),
];

fn rename_keys(value: &mut Value, to_crd: bool) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let renamed = RENAMES.iter().find_map(|(api, crd)| {
                    let (from, to) = if to_crd { (api, crd) } else { (crd, api) };
                    (*from == key).then_some(*to)
                });
                let Some(mut item) = map.remove(&key) else {
                    continue;
                };
                // Helm values are the user's own keys.
                if key != "values" {
                    rename_keys(&mut item, to_crd);
                }
                map.insert(renamed.map_or(key, str::to_owned), item);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rename_keys(i, to_crd)),
        _ => {}
    }
}

/// An API component (typed or a template's, with `${slots}`) as the CRD's JSON.
pub fn component_to_crd(mut api: Value, at: &str) -> Result<Value, ApiError> {
    let Value::Object(map) = &mut api else {
        return Err(ApiError::invalid(at, "a component is an object"));
    };
    let kind = map.remove("type");
    let workload = map.remove("workload_spec");
    let addon = map.remove("addon_spec");
    match (kind.as_ref().and_then(Value::as_str), workload, addon) {
        (Some("workload"), Some(spec), None) => {
            map.insert("workload".into(), spec);
        }
        (Some("addon"), None, Some(spec)) => {
            map.insert("addon".into(), spec);
        }
        (Some("workload"), _, _) => {
            return Err(ApiError::invalid(
                format!("{at}.workload_spec"),
                "a workload component sets workload_spec and no addon_spec",
            ));
        }
        (Some("addon"), _, _) => {
            return Err(ApiError::invalid(
                format!("{at}.addon_spec"),
                "an addon component sets addon_spec and no workload_spec",
            ));
        }
        _ => {
            return Err(ApiError::invalid(
                format!("{at}.type"),
                "type is workload or addon",
            ));
        }
    }
    rename_keys(&mut api, true);
    Ok(api)
}

/// A CRD component's JSON in the API's shape.
pub fn component_from_crd(mut crd: Value) -> Value {
    if let Value::Object(map) = &mut crd {
        if let Some(spec) = map.remove("workload") {
            map.insert("type".into(), "workload".into());
            map.insert("workload_spec".into(), spec);
        } else if let Some(spec) = map.remove("addon") {
            map.insert("type".into(), "addon".into());
            map.insert("addon_spec".into(), spec);
        }
    }
    rename_keys(&mut crd, false);
    crd
}

/// Typed API components as CRD components, checked by the CRD types.
pub fn components_to_crd(
    components: &[ComponentBody],
) -> Result<Vec<kubenest_crds::app::Component>, ApiError> {
    components
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("components[{i}]");
            let value = serde_json::to_value(c).map_err(ApiError::internal)?;
            let crd = component_to_crd(value, &at)?;
            serde_json::from_value(crd).map_err(|e| ApiError::invalid(at, e.to_string()))
        })
        .collect()
}

/// CRD components in the API's shape.
pub fn components_from_crd(components: &[kubenest_crds::app::Component]) -> Vec<Value> {
    components
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .map(component_from_crd)
        .collect()
}

/// Maps a field path of the App CRD (`spec.components[0].workload.healthCheck`) to the API's
/// (`components[0].workload_spec.health_check`).
pub fn api_field(crd_path: &str) -> String {
    let path = crd_path.strip_prefix("spec.").unwrap_or(crd_path);
    let mut out = Vec::new();
    for part in path.split('.') {
        let (head, index) = part
            .find('[')
            .map_or((part, ""), |at| (&part[..at], &part[at..]));
        let head = match head {
            "workload" => "workload_spec".to_owned(),
            "addon" => "addon_spec".to_owned(),
            "progressDeadlineSeconds" => "progress_deadline_seconds".to_owned(),
            other => {
                let mut snake = String::new();
                for c in other.chars() {
                    if c.is_ascii_uppercase() {
                        snake.push('_');
                        snake.push(c.to_ascii_lowercase());
                    } else {
                        snake.push(c);
                    }
                }
                snake
            }
        };
        out.push(format!("{head}{index}"));
    }
    out.join(".")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn crd_field_paths_read_as_api_paths() {
        assert_eq!(
            api_field("spec.components[1].workload.healthCheck.periodSeconds"),
            "components[1].workload_spec.health_check.period_seconds"
        );
        assert_eq!(
            api_field("spec.components[0].addon.definition"),
            "components[0].addon_spec.definition"
        );
    }

    use serde_json::json;

    /// Every field path of a schema (`health_check.port`), following `$ref`s and nullable
    /// unions; free-form `values` are a leaf.
    fn field_paths(schema: &Value, defs: &Value, at: &str, out: &mut BTreeSet<String>) {
        if let Some(name) = schema["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            return field_paths(&defs[name], defs, at, out);
        }
        for union in ["anyOf", "oneOf", "allOf"] {
            for variant in schema[union].as_array().into_iter().flatten() {
                field_paths(variant, defs, at, out);
            }
        }
        if let Some(items) = schema.get("items") {
            field_paths(items, defs, at, out);
        }
        for (key, property) in schema["properties"].as_object().into_iter().flatten() {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            out.insert(path.clone());
            if key != "values" {
                field_paths(property, defs, &path, out);
            }
        }
    }

    fn paths_of(schema: schemars::Schema, rename: bool) -> BTreeSet<String> {
        let schema = schema.to_value();
        let mut paths = BTreeSet::new();
        field_paths(&schema, &schema["$defs"], "", &mut paths);
        if !rename {
            return paths;
        }
        let camel = |segment: &str| {
            RENAMES
                .iter()
                .find(|(api, _)| *api == segment)
                .map_or(segment.to_owned(), |(_, crd)| (*crd).to_owned())
        };
        paths
            .into_iter()
            .map(|p| p.split('.').map(camel).collect::<Vec<_>>().join("."))
            .collect()
    }

    /// The API's bodies and the CRD types are two spellings of one shape (the REST contract is
    /// snake_case, strict and versioned with the API; the CRD is camelCase with defaults and
    /// CEL rules, versioned with the CRD): a field added to one and not the other fails here,
    /// and so does a camelCase name missing from `RENAMES`.
    #[test]
    fn the_api_bodies_and_the_crd_types_have_the_same_fields() {
        use kubenest_crds::app::{AddonComponent, Workload};
        let workload = paths_of(schemars::schema_for!(Workload), false);
        assert!(
            workload.contains("healthCheck.periodSeconds"),
            "{workload:?}"
        );
        assert!(workload.contains("git.ref") && workload.contains("helm.values"));
        assert_eq!(
            paths_of(schemars::schema_for!(WorkloadBody), true),
            workload
        );
        assert_eq!(
            paths_of(schemars::schema_for!(AddonBody), true),
            paths_of(schemars::schema_for!(AddonComponent), false),
        );
        let verification: BTreeSet<String> = paths_of(
            schemars::schema_for!(kubenest_crds::verification::VerificationSpec),
            false,
        )
        .iter()
        .map(|p| api_field(p))
        .collect();
        assert!(verification.contains("metrics.path"), "{verification:?}");
        assert_eq!(
            paths_of(schemars::schema_for!(verification::VerificationBody), false),
            verification
        );
    }

    #[test]
    fn components_map_to_the_crd_shape_and_back_leaving_helm_values_alone() {
        let api = json!({
            "name": "web", "type": "workload",
            "workload_spec": {
                "image": "shop:1", "health_check": {"path": "/", "period_seconds": 5},
                "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}],
                "helm": {"chart": {"repository": "r", "name": "n", "version": "1.0.0"},
                         "values": {"keep_me": {"health_check": 1}}}
            }
        });
        let crd = component_to_crd(api.clone(), "components[0]").unwrap();
        assert_eq!(crd["workload"]["healthCheck"]["periodSeconds"], 5);
        assert_eq!(crd["workload"]["env"][0]["exportRef"]["component"], "db");
        assert_eq!(
            crd["workload"]["helm"]["values"]["keep_me"]["health_check"],
            1
        );
        assert_eq!(component_from_crd(crd), api);
    }

    #[test]
    fn a_component_with_the_wrong_spec_names_the_field() {
        let error = component_to_crd(
            json!({"name": "db", "type": "addon", "workload_spec": {}}),
            "components[1]",
        )
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("components[1].addon_spec"));
        let error = component_to_crd(json!({"name": "db"}), "components[0]").unwrap_err();
        assert_eq!(error.field.as_deref(), Some("components[0].type"));
    }
}
