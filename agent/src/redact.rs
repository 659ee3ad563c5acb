//! What a build could print of its credentials, taken out before a line leaves the cluster: the
//! values of the component's Git Secret (a password, an ssh key's lines) and of the project's
//! registry Secret (each password and `auth` of its `.dockerconfigjson`, and the password inside
//! that `auth`) are replaced by `[redacted]` in build logs and in a failed build's message.
//! Viewers read both; the credentials were set by someone who may write, and must stay theirs.

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kubenest_contracts as wire;

/// What replaces a credential.
pub const MARK: &str = "[redacted]";

/// Shorter values are not looked for: they would blank ordinary words, and a credential that
/// short protects nothing.
const MIN_SECRET_CHARS: usize = 6;

/// The credential values to take out of text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Takes out `values` (and, longest first, nothing shorter than it should).
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = values
            .into_iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| v.chars().count() >= MIN_SECRET_CHARS)
            .collect();
        // Longest first, so a value containing another is taken out whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Whether there is nothing to take out.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` without any of the credentials.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MARK);
            }
        }
        out
    }
}

/// The values of a Git Secret a build could print: the password and each line of an ssh key.
pub fn git_values(secret: &Secret) -> Vec<String> {
    let mut values = Vec::new();
    for (key, value) in secret.data.iter().flatten() {
        let text = String::from_utf8_lossy(&value.0);
        match key.as_str() {
            "password" => values.push(text.into_owned()),
            "ssh-privatekey" => values.extend(
                text.lines()
                    .filter(|l| !l.starts_with("-----"))
                    .map(str::to_owned),
            ),
            _ => {}
        }
    }
    values
}

/// The values of a `.dockerconfigjson` a build could print: each password and `auth`, and the
/// password inside each `auth` (`user:password` in base64).
pub fn registry_values(secret: &Secret) -> Vec<String> {
    let Some(raw) = secret
        .data
        .as_ref()
        .and_then(|d| d.get(wire::DOCKER_CONFIG_JSON_KEY))
    else {
        return Vec::new();
    };
    let Ok(config) = serde_json::from_slice::<serde_json::Value>(&raw.0) else {
        return Vec::new();
    };
    let mut values = Vec::new();
    for entry in config["auths"]
        .as_object()
        .into_iter()
        .flat_map(|a| a.values())
    {
        if let Some(password) = entry["password"].as_str() {
            values.push(password.to_owned());
        }
        if let Some(auth) = entry["auth"].as_str() {
            values.push(auth.to_owned());
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth)
                .ok()
                .and_then(|d| String::from_utf8(d).ok());
            if let Some((_, password)) = decoded.as_deref().and_then(|d| d.split_once(':')) {
                values.push(password.to_owned());
            }
        }
    }
    values
}

/// The redactor of a component's builds in `namespace`: its Git Secret's values and the
/// project's registry Secret's. A Secret that cannot be read adds nothing (it is not there, or
/// the build could not have used it either).
pub async fn for_builds(
    client: &kube::Client,
    namespace: &str,
    app: &str,
    component: &str,
) -> Redactor {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut values = Vec::new();
    let git = wire::git_secret(app, component);
    if let Ok(Some(secret)) = secrets.get_opt(git.as_str()).await {
        values.extend(git_values(&secret));
    }
    if let Ok(Some(secret)) = secrets.get_opt(wire::REGISTRY_SECRET).await {
        values.extend(registry_values(&secret));
    }
    Redactor::new(values)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn a_git_password_and_key_lines_are_taken_out_of_a_line_but_the_user_name_stays() {
        let git = secret(&[
            ("username", "builder"),
            ("password", "hunter2-long-secret"),
            (
                "ssh-privatekey",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
            ),
        ]);
        let redactor = Redactor::new(git_values(&git));
        assert_eq!(
            redactor.apply("user builder pw hunter2-long-secret key b3BlbnNzaC1rZXktdjEAAAAA"),
            "user builder pw [redacted] key [redacted]"
        );
    }

    #[test]
    fn registry_passwords_auths_and_the_password_inside_an_auth_are_taken_out() {
        let auth = base64::engine::general_purpose::STANDARD.encode("pusher:reg1stry-pass");
        let config = serde_json::json!({"auths": {"registry.example.test": {
            "username": "pusher", "password": "reg1stry-pass", "auth": auth}}});
        let registry = secret(&[(wire::DOCKER_CONFIG_JSON_KEY, &config.to_string())]);
        let redactor = Redactor::new(registry_values(&registry));
        assert_eq!(
            redactor.apply(&format!("login {auth} as pusher with reg1stry-pass")),
            "login [redacted] as pusher with [redacted]"
        );
    }

    #[test]
    fn short_values_are_not_looked_for_and_nothing_changes_without_secrets() {
        let redactor = Redactor::new(["abc".to_owned()]);
        assert!(redactor.is_empty());
        assert_eq!(redactor.apply("abc def"), "abc def");
    }
}
