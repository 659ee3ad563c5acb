//! The one validation of an App's desired state, run by every path that handles it: the REST
//! facade before it writes the App, the App controller when it builds the deploy, and the agent
//! before it stores what it was sent. What the CRD schema and the wire schema already check
//! (shapes, lengths, patterns) is checked here too, so a path without a schema refuses the same.

use std::collections::{BTreeMap, BTreeSet};

use kubenest_contracts as wire;

use crate::names::{DNS_LABEL_RULE, is_dns_label};

/// The most components an App may have.
pub const MAX_COMPONENTS: usize = 64;

/// A refused App, naming the field twice: as a path into the App (`spec.components[1].name`) and
/// as a JSON pointer into the deploy command (`/components/1/name`), and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    /// The field in the App, as the CRD spells it.
    pub field: String,
    /// The same place in the wire's `app.deploy`.
    pub pointer: String,
    /// Why it is refused.
    pub reason: String,
}

fn refuse(field: String, pointer: String, reason: impl Into<String>) -> FieldError {
    FieldError {
        field,
        pointer,
        reason: reason.into(),
    }
}

/// Checks the component list by its names: 1 to 64 components, each name a DNS label, no name
/// twice. The REST facade runs it first, before it reads the rest of the body.
pub fn check_component_names(names: &[&str]) -> Result<(), FieldError> {
    if names.is_empty() || names.len() > MAX_COMPONENTS {
        return Err(refuse(
            "spec.components".into(),
            "/components".into(),
            format!("1 to {MAX_COMPONENTS} components"),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        let field = || format!("spec.components[{i}].name");
        let pointer = || format!("/components/{i}/name");
        if !is_dns_label(name) {
            return Err(refuse(field(), pointer(), DNS_LABEL_RULE));
        }
        if !seen.insert(*name) {
            return Err(refuse(
                field(),
                pointer(),
                format!("component names are unique; {name:?} is repeated"),
            ));
        }
    }
    Ok(())
}

/// Checks a built deploy: the component names ([`check_component_names`]), that every export
/// reference names an addon component of the same App that publishes that export, and then the
/// hub's own schema of `app.deploy` ([`check_contract`]).
pub fn validate_deploy(deploy: &wire::AppDeploy) -> Result<(), FieldError> {
    check_references(deploy)?;
    check_contract(deploy)?;
    check_requests(deploy)?;
    super::ingresses::check_ingresses(deploy)
        .map_err(|(pointer, why)| refuse(field_at(deploy, &pointer), pointer, why))
}

/// A container's request may not exceed its limit (Kubernetes refuses such a pod template):
/// refused with the request's field. Runs after [`check_contract`], so every quantity has the
/// schema's form (digits, an optional fraction, `m` for CPU, a suffix for memory).
fn check_requests(deploy: &wire::AppDeploy) -> Result<(), FieldError> {
    for (i, component) in deploy.components.iter().enumerate() {
        let wire::Component::Workload(workload) = component else {
            continue;
        };
        let Some(r) = &workload.resources else {
            continue;
        };
        let pairs = [
            ("cpu", &r.cpu_request, &r.cpu_limit),
            ("memory", &r.memory_request, &r.memory_limit),
        ];
        for (what, request, limit) in pairs {
            let (Some(request), Some(limit)) = (request, limit) else {
                continue;
            };
            if let (Some(req), Some(lim)) = (quantity(request), quantity(limit))
                && req > lim
            {
                let pointer = format!("/components/{i}/resources/{what}_request");
                return Err(refuse(
                    field_at(deploy, &pointer),
                    pointer,
                    format!("{what} request {request} is more than its limit {limit}"),
                ));
            }
        }
    }
    Ok(())
}

/// The value of a Kubernetes quantity of the schema's forms, in base units (pure). Written
/// here because k8s-openapi's `Quantity` is only a string; `None` for any other form.
pub fn quantity(text: &str) -> Option<f64> {
    let suffixes: [(&str, f64); 9] = [
        ("Ki", 1024.0),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("m", 1e-3),
    ];
    let (number, scale) = suffixes
        .iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((text, 1.0));
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// The deploy against the `app.deploy` schema the hub validates every frame with (and the
/// agent trusts): a quantity, a host, a period or a chart version the hub would refuse is
/// refused here, on every path that builds a deploy, with the App's field rather than a
/// pointer into a command the user never sees.
pub fn check_contract(deploy: &wire::AppDeploy) -> Result<(), FieldError> {
    let validator =
        wire::Validator::shared().map_err(|e| refuse("spec".into(), String::new(), e.reason))?;
    let payload = serde_json::to_value(deploy)
        .map_err(|e| refuse("spec".into(), String::new(), e.to_string()))?;
    validator
        .check_payload(wire::MessageType::AppDeploy, &payload)
        .map_err(|e| refuse(field_at(deploy, &e.path), e.path, e.reason))
}

/// The App's field (as the CRD spells it) that the deploy's JSON pointer `pointer` came from
/// (pure): `/components/2/resources/cpu_request` is `spec.components[2].workload.resources.cpuRequest`.
pub fn field_at(deploy: &wire::AppDeploy, pointer: &str) -> String {
    let segments: Vec<&str> = pointer.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["components", i, rest @ ..] => {
            let Ok(index) = i.parse::<usize>() else {
                return "spec.components".into();
            };
            let base = format!("spec.components[{index}]");
            match (deploy.components.get(index), rest) {
                (_, []) => base,
                (_, ["name", ..]) => format!("{base}.name"),
                (Some(wire::Component::Workload(_)), rest) => workload_field(&base, rest),
                (Some(wire::Component::Addon(_)), rest) => addon_field(&base, rest),
                (None, _) => base,
            }
        }
        ["progress_deadline_seconds", ..] => "spec.progressDeadlineSeconds".into(),
        _ => "spec".into(),
    }
}

fn workload_field(base: &str, rest: &[&str]) -> String {
    let workload = format!("{base}.workload");
    match rest {
        ["source", "image", ..] => format!("{workload}.image"),
        ["source", "chart", more @ ..] => path(&format!("{workload}.helm.chart"), more),
        ["source", "values", more @ ..] => values(&format!("{workload}.helm.values"), more),
        ["source", "type" | "mode", ..] | ["source"] => workload,
        ["source", more @ ..] => path(&format!("{workload}.git"), more),
        // The component's Secret is named after the App and the component.
        ["secret", ..] => format!("{base}.name"),
        more => path(&workload, more),
    }
}

fn addon_field(base: &str, rest: &[&str]) -> String {
    let addon = format!("{base}.addon");
    match rest {
        ["chart", "version", ..] => format!("{addon}.version"),
        // The chart and the exports come from the definition.
        ["chart" | "definition" | "exports", ..] => format!("{addon}.definition"),
        ["values", more @ ..] => values(&format!("{addon}.values"), more),
        _ => addon,
    }
}

/// `base` and the wire's snake_case segments in the CRD's camelCase (`[n]` for an index).
fn path(base: &str, segments: &[&str]) -> String {
    let mut out = base.to_owned();
    for segment in segments {
        if segment.parse::<usize>().is_ok() {
            out.push_str(&format!("[{segment}]"));
            continue;
        }
        out.push('.');
        match *segment {
            "git_ref" => out.push_str("ref"),
            other => {
                let mut upper = false;
                for c in other.chars() {
                    if c == '_' {
                        upper = true;
                    } else if upper {
                        out.push(c.to_ascii_uppercase());
                        upper = false;
                    } else {
                        out.push(c);
                    }
                }
            }
        }
    }
    out
}

/// `base` and chart values' keys as the user wrote them (JSON pointer escapes undone).
fn values(base: &str, segments: &[&str]) -> String {
    let mut out = base.to_owned();
    for segment in segments {
        if segment.parse::<usize>().is_ok() {
            out.push_str(&format!("[{segment}]"));
        } else {
            out.push('.');
            out.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

/// The references between components: names, and export references that resolve.
fn check_references(deploy: &wire::AppDeploy) -> Result<(), FieldError> {
    let names: Vec<&str> = deploy
        .components
        .iter()
        .map(|c| c.name().as_str())
        .collect();
    check_component_names(&names)?;
    let published: BTreeMap<&str, &wire::ExportMapping> = deploy
        .components
        .iter()
        .filter_map(|c| match c {
            wire::Component::Addon(a) => Some((a.name.as_str(), &a.exports)),
            wire::Component::Workload(_) => None,
        })
        .collect();
    for (i, component) in deploy.components.iter().enumerate() {
        let wire::Component::Workload(w) = component else {
            continue;
        };
        for (j, var) in w.env.iter().enumerate() {
            let wire::EnvFrom::ExportRef(export) = &var.from else {
                continue;
            };
            let field = format!("spec.components[{i}].workload.env[{j}].exportRef");
            let pointer = format!("/components/{i}/env/{j}/export_ref");
            let Some(exports) = published.get(export.component.as_str()) else {
                return Err(refuse(
                    field,
                    format!("{pointer}/component"),
                    format!(
                        "no addon component named {:?} in this app",
                        export.component.as_str()
                    ),
                ));
            };
            if !exports.contains_key(&export.export) {
                let known: Vec<&str> = exports.keys().map(String::as_str).collect();
                return Err(refuse(
                    format!("{field}.export"),
                    format!("{pointer}/export"),
                    format!(
                        "{:?} does not publish {:?} (it publishes {})",
                        export.component.as_str(),
                        export.export,
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deploy(components: serde_json::Value) -> wire::AppDeploy {
        serde_json::from_value(json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": components,
        }))
        .unwrap()
    }

    fn shop() -> wire::AppDeploy {
        deploy(json!([
            {"kind": "addon", "name": "db", "definition": "postgres",
             "chart": {"repository": "charts/addons", "name": "postgres", "version": "1.0.0"},
             "exports": {"dsn": "x"}},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1,
             "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}]}
        ]))
    }

    fn refer(deploy: &mut wire::AppDeploy, component: &str, export: &str) {
        if let wire::Component::Workload(w) = &mut deploy.components[1] {
            w.env[0].from = wire::EnvFrom::ExportRef(wire::ExportRef {
                component: component.into(),
                export: export.into(),
            });
        }
    }

    #[test]
    fn export_references_must_name_a_published_export_of_the_app() {
        assert_eq!(validate_deploy(&shop()), Ok(()));

        let mut unpublished = shop();
        refer(&mut unpublished, "db", "uri");
        let error = validate_deploy(&unpublished).unwrap_err();
        assert_eq!(error.pointer, "/components/1/env/0/export_ref/export");
        assert_eq!(
            error.field,
            "spec.components[1].workload.env[0].exportRef.export"
        );
        assert!(error.reason.contains("dsn"), "{}", error.reason);

        let mut to_workload = shop();
        refer(&mut to_workload, "web", "dsn");
        let error = validate_deploy(&to_workload).unwrap_err();
        assert_eq!(error.pointer, "/components/1/env/0/export_ref/component");
        assert_eq!(error.field, "spec.components[1].workload.env[0].exportRef");
    }

    #[test]
    fn what_the_hubs_schema_refuses_is_refused_with_the_apps_field() {
        let cases: [(&str, serde_json::Value, &str); 9] = [
            (
                "/components/1/resources/cpu_request",
                json!({"resources": {"cpu_request": "lots"}}),
                "spec.components[1].workload.resources.cpuRequest",
            ),
            (
                "/components/1/resources/memory_limit",
                json!({"resources": {"memory_limit": "1 banana"}}),
                "spec.components[1].workload.resources.memoryLimit",
            ),
            (
                "/components/1/ingress/host",
                json!({"ingress": {"host": "Bad Host!", "path": "/"}}),
                "spec.components[1].workload.ingress.host",
            ),
            (
                "/components/1/ingress/host",
                json!({"ingress": {"host": "a..example.test", "path": "/"}}),
                "spec.components[1].workload.ingress.host",
            ),
            (
                "/components/1/resources/memory_request",
                json!({"resources": {"memory_request": "1Gi", "memory_limit": "64Mi"}}),
                "spec.components[1].workload.resources.memoryRequest",
            ),
            (
                "/components/1/resources/cpu_request",
                json!({"resources": {"cpu_request": "1", "cpu_limit": "100m"}}),
                "spec.components[1].workload.resources.cpuRequest",
            ),
            (
                "/components/1/health_check/period_seconds",
                json!({"health_check": {"path": "/", "period_seconds": 0}}),
                "spec.components[1].workload.healthCheck.periodSeconds",
            ),
            (
                "/components/1/source/image",
                json!({"source": {"type": "image", "image": "a b"}}),
                "spec.components[1].workload.image",
            ),
            (
                "/components/1/source/git_ref",
                json!({"source": {"type": "git", "repository": "https://g/r.git", "git_ref": "", "mode": "dockerfile"}}),
                "spec.components[1].workload.git.ref",
            ),
        ];
        for (pointer, change, field) in cases {
            let mut value = serde_json::to_value(shop()).unwrap();
            for (key, v) in change.as_object().unwrap() {
                value["components"][1][key] = v.clone();
            }
            let bad: wire::AppDeploy = serde_json::from_value(value).unwrap();
            let error = validate_deploy(&bad).unwrap_err();
            assert_eq!(
                (error.pointer.as_str(), error.field.as_str()),
                (pointer, field)
            );
            assert!(!error.reason.is_empty());
        }
        // An addon's chart version is the App's `version`; a chart value keeps its own key.
        let mut latest = shop();
        if let wire::Component::Addon(a) = &mut latest.components[0] {
            a.chart.version = "latest".into();
        }
        let error = validate_deploy(&latest).unwrap_err();
        assert_eq!(error.field, "spec.components[0].addon.version");
        assert_eq!(
            field_at(&shop(), "/components/0/values/primary/max_connections"),
            "spec.components[0].addon.values.primary.max_connections"
        );
        assert_eq!(
            field_at(&shop(), "/progress_deadline_seconds"),
            "spec.progressDeadlineSeconds"
        );
    }

    #[test]
    fn an_ingress_refusal_names_the_apps_field() {
        let portless = deploy(json!([
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx:1.27"},
             "replicas": 1, "ingress": {"host": "shop.example.test", "path": "/"}}
        ]));
        let error = validate_deploy(&portless).unwrap_err();
        assert_eq!(error.field, "spec.components[0].workload.ingress");
        let own = deploy(json!([
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx:1.27"},
             "replicas": 1, "port": 8080,
             "ingress": {"host": "a.test", "path": "/", "tls_secret": "kubenest-registry"}}
        ]));
        let error = validate_deploy(&own).unwrap_err();
        assert_eq!(error.field, "spec.components[0].workload.ingress.tlsSecret");
    }

    #[test]
    fn component_names_are_labels_used_once() {
        let twice = deploy(json!([
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1}
        ]));
        let error = validate_deploy(&twice).unwrap_err();
        assert_eq!(error.pointer, "/components/1/name");
        assert_eq!(error.field, "spec.components[1].name");
        assert_eq!(
            error.reason,
            "component names are unique; \"web\" is repeated"
        );

        let error = check_component_names(&["web", "Web"]).unwrap_err();
        assert_eq!(error.field, "spec.components[1].name");
        assert_eq!(error.reason, DNS_LABEL_RULE);

        assert_eq!(
            check_component_names(&[]).unwrap_err().field,
            "spec.components"
        );
        let many: Vec<String> = (0..=MAX_COMPONENTS).map(|i| format!("c{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            check_component_names(&many).unwrap_err().reason,
            "1 to 64 components"
        );
    }
}
