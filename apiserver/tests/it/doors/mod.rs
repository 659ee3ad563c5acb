//! One door: an object written with kubectl is refused for the same reasons, naming the same
//! field, as the same object sent to the REST API; a kubectl write is stamped with the identity
//! that really made it, whatever it claims; and every mutation by either path is in the
//! organization's audit log. Against a real management cluster whose kube-apiserver calls the
//! API server's admission webhooks over TLS, real PostgreSQL and the real controllers.
//!
//! - [`refusals`]: the same bad object refused alike at REST, kubectl and the hub, naming its
//!   field, hostile values for programs included;
//! - [`authorship`]: a write names its real author and every path is audited; the webhooks take
//!   reviews only from the kube-apiserver;
//! - [`matrix`]: the shared role matrix through kubectl;
//! - [`gitops`]: objects kept in Git and applied by Flux pass the same door;
//! - [`fences`]: a member of another project cannot reach a project's objects;
//! - [`quotas`], [`fence_admins`]: quotas and budgets refused alike at both doors, with the
//!   numbers; fences set by the organization's admins alone;
//! - [`ingress_ca`]: an ingress whose certificate the project's CA would issue needs the CA;
//! - [`verification`]: a metrics path that climbs out of the pod's proxy path is refused.

use crate::common;

mod authorship;
mod fence_admins;
mod fences;
mod gitops;
mod ingress_ca;
mod matrix;
mod quotas;
mod refusals;
mod verification;

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::common::{
    Client, PASSWORD, agent_took_namespace, cluster, eventually, org, plane, project, user, user_id,
};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubenest_apiserver::routes::api_field;
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::project::Project;
use reqwest::Method;
use serde_json::{Value, json};

/// A kube client acting as the Kubernetes user of kubenest user id `id`.
async fn as_user(id: &str) -> kube::Client {
    impersonating(&kubenest_crds::common::kubernetes_user(id), &[]).await
}

/// A kube client of the plane's admin impersonating Kubernetes user `name` in `groups`.
async fn impersonating(name: &str, groups: &[&str]) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&plane().kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(name.to_owned());
    if !groups.is_empty() {
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
    }
    kube::Client::try_from(config).unwrap()
}

/// The REST refusal and the kubectl one of the same object: (status, code, field, reason),
/// the kubectl field turned into the API's spelling.
#[derive(Debug, PartialEq)]
struct Refusal {
    status: u16,
    code: String,
    field: Option<String>,
    reason: String,
}

fn rest_refusal(status: reqwest::StatusCode, body: &Value) -> Refusal {
    Refusal {
        status: status.as_u16(),
        code: body["code"].as_str().unwrap_or_default().to_owned(),
        field: body["field"].as_str().map(str::to_owned),
        reason: body["detail"].as_str().unwrap_or_default().to_owned(),
    }
}

fn kube_refusal(error: kube::Error) -> Refusal {
    let kube::Error::Api(status) = error else {
        panic!("not a refusal: {error}");
    };
    let cause = status.details.as_ref().and_then(|d| d.causes.first());
    let reason = match cause {
        Some(cause) => cause.message.clone(),
        None => status
            .message
            .split_once("denied the request: ")
            .map(|(_, m)| m.to_owned())
            .unwrap_or(status.message.clone()),
    };
    Refusal {
        status: status.code,
        code: status.reason.clone(),
        field: cause.map(|c| api_field(&c.field)),
        reason,
    }
}

/// An organization with member `who` (a new user), a cluster and a Ready project; returns
/// (org, project, the member's session, the member's id).
async fn setting(prefix: &str) -> (String, Value, Client, String) {
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let who = user(&admin, prefix).await;
    let org = org(&admin, prefix, json!([{"user": who, "role": "member"}])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    agent_took_namespace(&admin, &kube, &org, &project).await;
    let session = Client::login(0, &who, PASSWORD).await;
    let id = session.my_id().await;
    // The member's RoleBinding lets their Kubernetes user write in the organization.
    let kube = plane().kube().await;
    eventually("the member's RoleBinding", 30, async || {
        common::org_binding_has(&kube, &org, "kubenest-org-member", &id).await
    })
    .await;
    (org, project, session, id)
}

fn app_object(name: &str, project: &str, components: Value) -> App {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name},
        "spec": {"project": project, "components": components},
    }))
    .unwrap()
}
