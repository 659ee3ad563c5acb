//! An addon's exports: the connection facts it publishes into a Secret on its cluster (pure).
//!
//! An AddonDefinition maps each export to a template, e.g. `host` → `{release}.{namespace}.svc`
//! or `dsn` → `postgres://{user}:{password}@{host}:{port}/{database}`. Placeholders are the
//! release name, the namespace, the generated password and any other export of the same addon.
//! The password is generated on the cluster and kept in the export Secret; it never leaves it.

use std::collections::BTreeMap;

/// Why an export mapping cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    #[error("export {export:?} uses unknown placeholder {{{placeholder}}}")]
    Unknown { export: String, placeholder: String },
    #[error("export {export:?} refers to itself through other exports")]
    Cycle { export: String },
}

/// The values every template may use besides the other exports.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub release: &'a str,
    pub namespace: &'a str,
    pub password: &'a str,
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
            ("user", "app"),
            ("database", "app"),
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

    const FACTS: Facts<'static> = Facts {
        release: "shop-db",
        namespace: "shop-prod",
        password: "s3cret",
    };

    #[test]
    fn exports_expand_placeholders_and_each_other() {
        let values = expand(&postgres(), &FACTS).unwrap();
        assert_eq!(values["host"], "shop-db.shop-prod.svc");
        assert_eq!(values["password"], "s3cret");
        assert_eq!(
            values["dsn"],
            "postgres://app:s3cret@shop-db.shop-prod.svc:5432/app"
        );
    }

    #[test]
    fn unknown_placeholders_and_cycles_are_errors() {
        let mut bad = postgres();
        bad.insert("uri".into(), "{scheme}://{host}".into());
        assert_eq!(
            expand(&bad, &FACTS).unwrap_err(),
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
            expand(&cycle, &FACTS),
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
