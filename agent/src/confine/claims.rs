//! A chart's claims ask for a new volume and never pick one (pure): see the parent module.

use serde_json::Value;

/// Ok when no claim of `object` (of kind `kind`) picks the volume it binds; else the claim's
/// field (`spec.volumeClaimTemplates[0].spec.volumeName`) and how it picks.
pub(super) fn claims(object: &Value, kind: &str) -> Result<(), (String, &'static str)> {
    let mut specs = Vec::new();
    if kind == "PersistentVolumeClaim"
        && let Some(spec) = object.get("spec")
    {
        specs.push(("spec".to_owned(), spec));
    }
    if let Some(spec) = object.get("spec") {
        claim_templates(spec, "spec", &mut specs);
    }
    for (path, spec) in specs {
        if spec
            .get("volumeName")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
        {
            return Err((format!("{path}.volumeName"), "names an existing volume"));
        }
        if spec.get("selector").is_some_and(|v| !v.is_null()) {
            return Err((
                format!("{path}.selector"),
                "selects existing volumes by label",
            ));
        }
        if spec.get("storageClassName").and_then(Value::as_str) == Some("") {
            return Err((
                format!("{path}.storageClassName"),
                "asks for no storage class, which binds only volumes that already exist",
            ));
        }
    }
    Ok(())
}

/// Collects, with their paths, the `spec` of every claim template under `value`: a
/// StatefulSet's `volumeClaimTemplates[i]` and an ephemeral volume's `volumeClaimTemplate`,
/// wherever the pod template sits (a CronJob's is three levels down).
fn claim_templates<'a>(value: &'a Value, path: &str, specs: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                claim_templates(item, &format!("{path}[{i}]"), specs);
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                let here = format!("{path}.{key}");
                match (key.as_str(), field) {
                    ("volumeClaimTemplates", Value::Array(templates)) => {
                        for (i, template) in templates.iter().enumerate() {
                            if let Some(spec) = template.get("spec") {
                                specs.push((format!("{here}[{i}].spec"), spec));
                            }
                        }
                    }
                    ("volumeClaimTemplate", template) => {
                        if let Some(spec) = template.get("spec") {
                            specs.push((format!("{here}.spec"), spec));
                        }
                    }
                    _ => claim_templates(field, &here, specs),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Refused, Scope, admit};
    use serde_json::{Value, json};

    /// Discovery as a stock cluster answers it: every kind these tests use is namespaced.
    fn cluster(_: &str, _: &str) -> Scope {
        Scope::Namespaced
    }

    #[test]
    fn a_claim_that_picks_its_volume_refuses_the_render_naming_the_field() {
        let claim = |spec: Value| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "data"}, "spec": spec})
        };
        let picks = |objects: &[Value]| match admit(objects, "shop", cluster) {
            Err(Refused::PicksVolume { object, field, .. }) => Some((object, field)),
            other => {
                assert_eq!(other, Ok(()));
                None
            }
        };
        let asks = json!({"accessModes": ["ReadWriteOnce"],
                          "resources": {"requests": {"storage": "1Gi"}}});
        assert_eq!(picks(&[claim(asks.clone())]), None);
        let mut classed = asks.clone();
        classed["storageClassName"] = "fast".into();
        assert_eq!(picks(&[claim(classed)]), None);
        for (field, value) in [
            ("volumeName", json!("pv-of-another-tenant")),
            ("selector", json!({"matchLabels": {"tenant": "other"}})),
            ("storageClassName", json!("")),
        ] {
            let mut spec = asks.clone();
            spec[field] = value;
            assert_eq!(
                picks(&[claim(spec)]),
                Some(("PersistentVolumeClaim/data".into(), format!("spec.{field}"))),
            );
        }
        // A StatefulSet's claim template and a pod's ephemeral volume are claims too.
        let mut template = asks.clone();
        template["volumeName"] = "pv-1".into();
        let set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": template}]}});
        assert_eq!(
            picks(&[set]),
            Some((
                "StatefulSet/db".into(),
                "spec.volumeClaimTemplates[0].spec.volumeName".into()
            ))
        );
        let mut ephemeral = asks;
        ephemeral["selector"] = json!({"matchLabels": {"a": "b"}});
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "r"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"volumes": [
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": ephemeral}}}]}}}}}});
        assert_eq!(
            picks(&[cron]),
            Some((
                "CronJob/r".into(),
                "spec.jobTemplate.spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.spec.selector"
                    .into()
            ))
        );
    }
}
