//! An addon's exports: the connection facts it publishes into a Secret on its cluster (pure).
//!
//! An AddonDefinition maps each export to a template, e.g. `host` → `{release}.{namespace}.svc`
//! or `dsn` → `postgres://{user}:{password}@{host}:{port}/{database}`. Placeholders are the
//! release name, the namespace, the generated password, any other export of the same addon, and
//! `{values.<path>}`: a value the chart is rendered with (`{values.database}`), so an export
//! says what the addon really runs with rather than what it runs with by default.
//! The password is generated on the cluster and kept in the export Secret; it never leaves it.

use std::collections::BTreeMap;

/// Why an export mapping cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    #[error("export {export:?} uses unknown placeholder {{{placeholder}}}")]
    Unknown { export: String, placeholder: String },
    #[error("export {export:?} refers to itself through other exports")]
    Cycle { export: String },
    #[error(
        "export {export:?} uses {{values.{path}}}, which the addon's values do not set to a string, number or boolean"
    )]
    NoValue { export: String, path: String },
}

/// The values every template may use besides the other exports.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub release: &'a str,
    pub namespace: &'a str,
    pub password: &'a str,
    /// The values the chart is rendered with.
    pub values: &'a serde_json::Map<String, serde_json::Value>,
}

/// The scalar at dotted `path` of `values`, as text.
fn value_at(values: &serde_json::Map<String, serde_json::Value>, path: &str) -> Option<String> {
    let mut parts = path.split('.');
    let mut at = values.get(parts.next()?)?;
    for part in parts {
        at = at.get(part)?;
    }
    match at {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Expands every export of `mapping`.
pub fn expand(
    mapping: &BTreeMap<String, String>,
    facts: &Facts<'_>,
) -> Result<BTreeMap<String, String>, ExportError> {
    let mut done: BTreeMap<String, String> = BTreeMap::new();
    for export in mapping.keys() {
        resolve(export, mapping, facts, &mut done, &mut Vec::new())?;
    }
    Ok(done)
}

fn resolve(
    export: &str,
    mapping: &BTreeMap<String, String>,
    facts: &Facts<'_>,
    done: &mut BTreeMap<String, String>,
    visiting: &mut Vec<String>,
) -> Result<String, ExportError> {
    if let Some(value) = done.get(export) {
        return Ok(value.clone());
    }
    if visiting.iter().any(|v| v == export) {
        return Err(ExportError::Cycle {
            export: export.to_owned(),
        });
    }
    visiting.push(export.to_owned());
    let template = mapping.get(export).map(String::as_str).unwrap_or_default();
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let placeholder = &rest[start + 1..start + len];
        let value = match placeholder {
            "release" => facts.release.to_owned(),
            "namespace" => facts.namespace.to_owned(),
            "password" if !mapping.contains_key("password") => facts.password.to_owned(),
            other if mapping.contains_key(other) && other != export => {
                resolve(other, mapping, facts, done, visiting)?
            }
            "password" => facts.password.to_owned(),
            other if other.starts_with("values.") => {
                let path = &other["values.".len()..];
                value_at(facts.values, path).ok_or_else(|| ExportError::NoValue {
                    export: export.to_owned(),
                    path: path.to_owned(),
                })?
            }
            other => {
                return Err(ExportError::Unknown {
                    export: export.to_owned(),
                    placeholder: other.to_owned(),
                });
            }
        };
        out.push_str(&value);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    visiting.pop();
    done.insert(export.to_owned(), out.clone());
    Ok(out)
}

/// A fresh password: 32 characters of letters and digits.
pub fn generate_password() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut rng = rand::rng();
    (0..32)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postgres() -> BTreeMap<String, String> {
        [
            ("host", "{release}.{namespace}.svc"),
            ("port", "5432"),
            ("user", "{values.user}"),
            ("database", "{values.database}"),
            ("password", "{password}"),
            (
                "dsn",
                "postgres://{user}:{password}@{host}:{port}/{database}",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn chart_values() -> serde_json::Map<String, serde_json::Value> {
        serde_json::json!({"user": "app", "database": "app", "persistence": {"size": "1Gi"}})
            .as_object()
            .unwrap()
            .clone()
    }

    fn facts(values: &serde_json::Map<String, serde_json::Value>) -> Facts<'_> {
        Facts {
            release: "shop-db",
            namespace: "shop-prod",
            password: "s3cret",
            values,
        }
    }

    #[test]
    fn exports_expand_placeholders_and_each_other() {
        let chart = chart_values();
        let values = expand(&postgres(), &facts(&chart)).unwrap();
        assert_eq!(values["host"], "shop-db.shop-prod.svc");
        assert_eq!(values["password"], "s3cret");
        assert_eq!(
            values["dsn"],
            "postgres://app:s3cret@shop-db.shop-prod.svc:5432/app"
        );
    }

    #[test]
    fn exports_say_what_the_chart_runs_with() {
        let mut chart = chart_values();
        chart.insert("database".into(), "orders".into());
        chart.insert("user".into(), "shop".into());
        let values = expand(&postgres(), &facts(&chart)).unwrap();
        assert_eq!(
            values["dsn"],
            "postgres://shop:s3cret@shop-db.shop-prod.svc:5432/orders"
        );
        let mut size = postgres();
        size.insert("size".into(), "{values.persistence.size}".into());
        assert_eq!(expand(&size, &facts(&chart)).unwrap()["size"], "1Gi");
        // A value the chart is not given, or one that is no scalar, is an error, not "".
        chart.remove("user");
        assert_eq!(
            expand(&postgres(), &facts(&chart)).unwrap_err(),
            ExportError::NoValue {
                export: "user".into(),
                path: "user".into()
            }
        );
        let mut object = postgres();
        object.insert("p".into(), "{values.persistence}".into());
        assert!(matches!(
            expand(&object, &facts(&chart_values())),
            Err(ExportError::NoValue { .. })
        ));
    }

    #[test]
    fn unknown_placeholders_and_cycles_are_errors() {
        let chart = chart_values();
        let facts = facts(&chart);
        let mut bad = postgres();
        bad.insert("uri".into(), "{scheme}://{host}".into());
        assert_eq!(
            expand(&bad, &facts).unwrap_err(),
            ExportError::Unknown {
                export: "uri".into(),
                placeholder: "scheme".into()
            }
        );
        let cycle: BTreeMap<String, String> = [("a", "{b}"), ("b", "{a}")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert!(matches!(
            expand(&cycle, &facts),
            Err(ExportError::Cycle { .. })
        ));
    }

    #[test]
    fn generated_passwords_are_long_and_differ() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
