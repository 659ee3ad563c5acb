//! A project's registry credentials: one `kubernetes.io/dockerconfigjson` Secret in its
//! namespace, which its pods pull with and its builds push with. Fail-closed through the hub
//! like component secrets: the values go straight to the cluster in a `secret.set` and are never
//! stored, logged or echoed by the control plane; the Project only names the Secret.

pub use kubenest_api::registry::{
    RegistryAccount, RegistryCredentialsBody, RegistryCredentialsResponse,
};

use axum::Json;
use axum::extract::{Path, State};
use base64::Engine as _;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_contracts as wire;
use kubenest_crds::project::Project;
use serde_json::json;

use super::secret_place::SecretPlace;
use super::{IdPath, Scoped, actor_annotations, not_in_git, patch_params};
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::state::AppState;

/// `host` or `host:port`: letters, digits, `-` and `.` labels, an optional port.
fn check_host(host: &str) -> bool {
    let (name, port) = host
        .rsplit_once(':')
        .map_or((host, None), |(n, p)| (n, Some(p)));
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    name_ok && port_ok
}

/// The `.dockerconfigjson` of `body` (pure), or the field that is wrong.
pub fn docker_config(body: &RegistryCredentialsBody) -> ApiResult<String> {
    if body.registries.is_empty() || body.registries.len() > 16 {
        return Err(ApiError::invalid("registries", "1 to 16 registries"));
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let mut auths = serde_json::Map::new();
    for (host, account) in &body.registries {
        if !check_host(host) {
            return Err(ApiError::invalid(
                format!("registries.{host}"),
                "a registry is a host or host:port (no scheme, no path)",
            ));
        }
        let user = &account.username;
        if user.is_empty()
            || user.len() > 255
            || user.contains(':')
            || user.contains(char::is_control)
        {
            return Err(ApiError::invalid(
                format!("registries.{host}.username"),
                "1 to 255 characters, without ':' or control characters",
            ));
        }
        if account.password.is_empty() || account.password.len() > 4096 {
            return Err(ApiError::invalid(
                format!("registries.{host}.password"),
                "1 to 4096 characters",
            ));
        }
        let auth = engine.encode(format!("{user}:{}", account.password));
        auths.insert(
            host.clone(),
            json!({"username": user, "password": account.password, "auth": auth}),
        );
    }
    Ok(json!({ "auths": auths }).to_string())
}

/// Where the project's registry Secret is, and its name.
fn place(scoped: &Scoped<Project>) -> ApiResult<(SecretPlace, String)> {
    let secret = scoped
        .object
        .spec
        .registry_secret
        .clone()
        .unwrap_or_else(|| wire::REGISTRY_SECRET.to_owned());
    let target = wire::SecretTarget {
        namespace: wire::Name::new(&scoped.object.spec.namespace),
        secret: wire::Name::new(&secret),
        app_id: None,
        credentials: true,
    };
    Ok((SecretPlace::of(scoped, "project", target)?, secret))
}

/// Names the Secret on the Project (so `project.ensure` puts it on the namespace's pulls), or
/// removes the name. The callers refused a project kept in Git before the Secret changed.
async fn name_secret(
    state: &AppState,
    caller: &Caller,
    scoped: &Scoped<Project>,
    secret: Option<&str>,
) -> ApiResult<()> {
    if scoped.object.spec.registry_secret.as_deref() == secret {
        return Ok(());
    }
    let api: Api<Project> = Api::namespaced(state.client().clone(), &scoped.namespace());
    let patch = json!({
        "metadata": {"annotations": actor_annotations(caller)},
        "spec": {"registrySecret": secret},
    });
    api.patch(
        &scoped.object.name_any(),
        &patch_params(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Sets the project's registry credentials (admins), replacing earlier ones. Fails closed: a
/// non-2xx unless the agent confirms it stored them; then the project names the Secret.
pub async fn put_registry_credentials(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<RegistryCredentialsBody>,
) -> ApiResult<Json<RegistryCredentialsResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    let config = docker_config(&body)?;
    let (place, secret) = place(&scoped)?;
    // Checked before the values leave: a change the Project cannot take is refused first.
    if scoped.object.spec.registry_secret.is_none() {
        not_in_git(
            &scoped.object,
            "project",
            &format!("Set spec.registrySecret to {secret} in its manifest in Git."),
        )?;
    }
    let values = [(wire::DOCKER_CONFIG_JSON_KEY.to_owned(), config)].into();
    let command = place.set(wire::SecretKind::DockerConfigJson, values);
    state.secrets().send(command).await?;
    name_secret(&state, &caller, &scoped, Some(&secret)).await?;
    Ok(Json(RegistryCredentialsResponse {
        project: scoped.object.name_any(),
        secret,
        registries: body.registries.into_keys().collect(),
    }))
}

/// Removes the project's registry credentials (admins): the Secret on the cluster, then its
/// name on the Project. Fails closed; 404 when the project names none.
pub async fn delete_registry_credentials(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<RegistryCredentialsResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    if scoped.object.spec.registry_secret.is_none() {
        return Err(ApiError::not_found("registry credentials"));
    }
    let (place, secret) = place(&scoped)?;
    not_in_git(
        &scoped.object,
        "project",
        "Remove spec.registrySecret from its manifest in Git.",
    )?;
    let command = place.delete(Vec::new());
    state.secrets().send(command).await?;
    name_secret(&state, &caller, &scoped, None).await?;
    Ok(Json(RegistryCredentialsResponse {
        project: scoped.object.name_any(),
        secret,
        registries: Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn body(host: &str, user: &str, password: &str) -> RegistryCredentialsBody {
        RegistryCredentialsBody {
            registries: [(
                host.to_owned(),
                RegistryAccount {
                    username: user.into(),
                    password: password.into(),
                },
            )]
            .into(),
        }
    }

    #[test]
    fn credentials_become_a_docker_config_with_basic_auth() {
        let config = docker_config(&body("registry.example.test:5000", "ci", "s3cret")).unwrap();
        let config: serde_json::Value = serde_json::from_str(&config).unwrap();
        let entry = &config["auths"]["registry.example.test:5000"];
        assert_eq!(entry["username"], "ci");
        assert_eq!(entry["auth"], "Y2k6czNjcmV0");
    }

    #[test]
    fn a_wrong_host_user_or_password_is_refused_naming_it() {
        let field = |b: RegistryCredentialsBody| docker_config(&b).unwrap_err().field;
        assert_eq!(
            field(body("https://registry.example.test", "ci", "p")).as_deref(),
            Some("registries.https://registry.example.test")
        );
        assert_eq!(
            field(body("registry.example.test/path", "ci", "p")).as_deref(),
            Some("registries.registry.example.test/path")
        );
        assert_eq!(
            field(body("registry.example.test:99999", "ci", "p")).as_deref(),
            Some("registries.registry.example.test:99999")
        );
        assert_eq!(
            field(body("registry.example.test", "c:i", "p")).as_deref(),
            Some("registries.registry.example.test.username")
        );
        assert_eq!(
            field(body("registry.example.test", "ci", "")).as_deref(),
            Some("registries.registry.example.test.password")
        );
        let none = RegistryCredentialsBody {
            registries: BTreeMap::new(),
        };
        assert_eq!(field(none).as_deref(), Some("registries"));
    }
}
