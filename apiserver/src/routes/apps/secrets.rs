//! Component secrets: fail-closed through the hub, values never stored on the control plane.

pub use kubenest_api::apps::{
    ComponentPath, GitCredentialsBody, GitCredentialsResponse, SecretBody, SecretDeleteQuery,
    SecretResponse,
};

use std::collections::BTreeMap;

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kubenest_contracts::{self as wire, SecretTarget};
use kubenest_crds::App;

use super::super::Scoped;
use super::super::secret_place::SecretPlace;
use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;

fn secret_place(scoped: &Scoped<App>, component: &str) -> ApiResult<SecretPlace> {
    place_of(scoped, component, false)
}

/// Where a workload component's Secret is: its own values, or (`git`) the credentials of its
/// Git repository, which only a Git workload has.
fn place_of(scoped: &Scoped<App>, component: &str, git: bool) -> ApiResult<SecretPlace> {
    let app = &scoped.object;
    let found = app.spec.components.iter().find(|c| c.name == component);
    let is_workload = found.is_some_and(|c| c.workload.is_some());
    if !is_workload {
        return Err(ApiError::not_found("workload component"));
    }
    let is_git = found
        .and_then(|c| c.workload.as_ref())
        .is_some_and(|w| w.git.is_some());
    if git && !is_git {
        return Err(ApiError::conflict(
            "not_a_git_workload",
            format!(
                "component {component} is not built from Git: it has no repository credentials"
            ),
        ));
    }
    let project = scoped
        .project
        .as_ref()
        .ok_or_else(|| ApiError::conflict("no_project", "the app's project is gone"))?;
    SecretPlace::of(
        scoped,
        "app",
        SecretTarget {
            namespace: wire::Name::new(&project.spec.namespace),
            secret: if git {
                wire::git_secret(&app.name_any(), component)
            } else {
                wire::component_secret(&app.name_any(), component)
            },
            app_id: Some(wire::Id::new(k8s::uid(app))),
            credentials: git,
        },
    )
}

/// The App whose component's Secret a member changes, once the App's state admits it.
async fn secret_change(
    state: &AppState,
    caller: &Caller,
    path: &ComponentPath,
) -> ApiResult<Scoped<App>> {
    let scoped = load(state, caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    admit(
        &scoped.object,
        Change::Secret {
            component: &path.component,
        },
    )?;
    Ok(scoped)
}

/// Sets `values` in the Secret at `place` on the cluster; fails closed (an error unless the
/// agent confirms it stored them).
async fn send_set(
    state: &AppState,
    place: SecretPlace,
    values: BTreeMap<String, String>,
) -> ApiResult<()> {
    let command = place.set(wire::SecretKind::Opaque, values);
    state.secrets().send(command).await
}

fn check_keys<'a>(keys: impl Iterator<Item = &'a String>, field: &str) -> ApiResult<Vec<String>> {
    let mut out = Vec::new();
    for key in keys {
        let ok = !key.is_empty()
            && key.len() <= 253
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            return Err(ApiError::invalid(
                format!("{field}.{key}"),
                "a key holds only letters, digits, '-', '_' and '.'",
            ));
        }
        out.push(key.clone());
    }
    Ok(out)
}

/// Sets values of a workload component's Secret on the cluster (members). Fails closed: a
/// non-2xx unless the agent confirms it stored them.
pub async fn put_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<ComponentPath>,
    Body(body): Body<SecretBody>,
) -> ApiResult<Json<SecretResponse>> {
    let scoped = secret_change(&state, &caller, &path).await?;
    if body.values.is_empty() || body.values.len() > 128 {
        return Err(ApiError::invalid("values", "1 to 128 keys"));
    }
    let keys = check_keys(body.values.keys(), "values")?;
    if let Some((key, _)) = body.values.iter().find(|(_, v)| v.len() > 262_144) {
        return Err(ApiError::invalid(
            format!("values.{key}"),
            "at most 256 KiB",
        ));
    }
    let place = secret_place(&scoped, &path.component)?;
    send_set(&state, place, body.values).await?;
    Ok(Json(SecretResponse {
        component: path.component,
        keys,
    }))
}

/// Removes keys of a component's Secret, or the whole Secret (members). Fails closed.
pub async fn delete_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<ComponentPath>,
    Query(query): Query<SecretDeleteQuery>,
) -> ApiResult<Json<SecretResponse>> {
    let scoped = secret_change(&state, &caller, &path).await?;
    let keys: Vec<String> = query
        .keys
        .as_deref()
        .map(|k| k.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let keys = check_keys(keys.iter(), "keys")?;
    let place = secret_place(&scoped, &path.component)?;
    let command = place.delete(keys.clone());
    state.secrets().send(command).await?;
    Ok(Json(SecretResponse {
        component: path.component,
        keys,
    }))
}

/// The Git Secret's keys for `body`, every key set (the unused ones empty) so one `secret.set`
/// replaces earlier credentials of the other kind (pure).
pub fn git_values(body: GitCredentialsBody) -> ApiResult<(String, BTreeMap<String, String>)> {
    let https = body.username.is_some() || body.password.is_some();
    let ssh = body.ssh_private_key.is_some() || body.known_hosts.is_some();
    let text = |value: Option<String>, field: &str, max: usize| -> ApiResult<String> {
        match value {
            Some(v) if !v.trim().is_empty() && v.len() <= max => Ok(v),
            _ => Err(ApiError::invalid(field, format!("1 to {max} characters"))),
        }
    };
    let (kind, pairs) = match (https, ssh) {
        (true, false) => {
            let username = text(body.username, "username", 255)?;
            if username.contains(char::is_control) {
                return Err(ApiError::invalid("username", "no control characters"));
            }
            (
                "https",
                [
                    ("username", username),
                    ("password", text(body.password, "password", 4096)?),
                    ("ssh-privatekey", String::new()),
                    ("known_hosts", String::new()),
                ],
            )
        }
        (false, true) => {
            let key = text(body.ssh_private_key, "ssh_private_key", 16384)?;
            if !key.trim_start().starts_with("-----BEGIN ") {
                return Err(ApiError::invalid(
                    "ssh_private_key",
                    "a private key in PEM or OpenSSH form (-----BEGIN ...)",
                ));
            }
            (
                "ssh",
                [
                    ("username", String::new()),
                    ("password", String::new()),
                    ("ssh-privatekey", key),
                    ("known_hosts", text(body.known_hosts, "known_hosts", 65536)?),
                ],
            )
        }
        (true, true) => {
            return Err(ApiError::invalid(
                "ssh_private_key",
                "give a username and password, or an ssh key and known_hosts, not both",
            ));
        }
        (false, false) => {
            return Err(ApiError::invalid(
                "username",
                "give a username and password, or an ssh key and known_hosts",
            ));
        }
    };
    Ok((
        kind.to_owned(),
        pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    ))
}

/// Sets a Git workload's repository credentials on the cluster (members), replacing earlier
/// ones; only its build's pod mounts them. Fails closed.
pub async fn put_git_credentials(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<ComponentPath>,
    Body(body): Body<GitCredentialsBody>,
) -> ApiResult<Json<GitCredentialsResponse>> {
    let scoped = secret_change(&state, &caller, &path).await?;
    let (kind, values) = git_values(body)?;
    let place = place_of(&scoped, &path.component, true)?;
    send_set(&state, place, values).await?;
    Ok(Json(GitCredentialsResponse {
        component: path.component,
        kind,
    }))
}

/// Removes a Git workload's repository credentials (members). Fails closed.
pub async fn delete_git_credentials(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<ComponentPath>,
) -> ApiResult<Json<GitCredentialsResponse>> {
    let scoped = secret_change(&state, &caller, &path).await?;
    let place = place_of(&scoped, &path.component, true)?;
    let command = place.delete(Vec::new());
    state.secrets().send(command).await?;
    Ok(Json(GitCredentialsResponse {
        component: path.component,
        kind: "none".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(user: Option<&str>, password: Option<&str>, key: Option<&str>) -> GitCredentialsBody {
        GitCredentialsBody {
            username: user.map(Into::into),
            password: password.map(Into::into),
            ssh_private_key: key.map(Into::into),
            known_hosts: key.map(|_| "[git.example.test]:22 ssh-ed25519 AAAA".into()),
        }
    }

    #[test]
    fn git_credentials_are_one_kind_and_replace_the_other() {
        let (kind, values) = git_values(body(Some("ci"), Some("token"), None)).unwrap();
        assert_eq!(kind, "https");
        assert_eq!(values["password"], "token");
        assert_eq!(values["ssh-privatekey"], "");
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n";
        let (kind, values) = git_values(body(None, None, Some(key))).unwrap();
        assert_eq!(kind, "ssh");
        assert_eq!(values["password"], "");
        let field = |b| git_values(b).unwrap_err().field;
        assert_eq!(
            field(body(Some("ci"), None, None)).as_deref(),
            Some("password")
        );
        assert_eq!(
            field(body(None, None, Some("not a key"))).as_deref(),
            Some("ssh_private_key")
        );
        assert_eq!(
            field(body(Some("ci"), Some("p"), Some(key))).as_deref(),
            Some("ssh_private_key")
        );
        assert_eq!(field(body(None, None, None)).as_deref(), Some("username"));
    }
}
