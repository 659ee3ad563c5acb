//! Projects: a namespace with kubenest's labels and its Pod Security level ([`pod_security`]),
//! optionally a registry pull secret for its default service account, and, when the agent's
//! powers are namespaced, its RoleBinding there. The agent never creates or deletes anything
//! outside a project's namespace, and refuses a namespace that exists without being this
//! project's.

use kubenest_crds::names::{field_managers, labels};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kubenest_contracts::{self as wire, ProjectPhase, RejectReason};
use serde_json::json;

use crate::boundary::Refusal;
use crate::context::Context;
use crate::pod_security;

fn report(
    ctx: &Context,
    project_id: &wire::Id,
    namespace: &wire::Name,
    phase: ProjectPhase,
    message: &str,
) {
    let (usage, healed) = ctx.kept.report(namespace.as_str());
    ctx.reporter.report(wire::ProjectStatus {
        project_id: project_id.clone(),
        namespace: namespace.clone(),
        phase,
        message: message.to_owned(),
        observed_at: chrono::Utc::now(),
        usage,
        healed,
    });
}

/// The labels of a project's namespace (pure): the command's extra labels, then kubenest's and
/// Pod Security Admission's over them, so no extra label can loosen the namespace's level.
pub fn namespace_labels(command: &wire::ProjectEnsure) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = command
        .labels
        .iter()
        .filter(|(key, _)| !key.starts_with(pod_security::PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    labels.insert(labels::PROJECT_ID.into(), command.project_id.to_string());
    labels.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_AGENT.into());
    labels.extend(pod_security::labels_for(command.pod_security));
    labels
}

/// `project.ensure`: the namespace, its labels and the pull secret reference.
pub async fn ensure(ctx: &Arc<Context>, command: &wire::ProjectEnsure) -> Result<(), Refusal> {
    let namespaces = Api::<Namespace>::all(ctx.client.clone());
    let name = command.namespace.as_str();
    let project = command.project_id.as_str();
    let existing = namespaces.get_opt(name).await.map_err(Refusal::internal)?;
    if let Some(existing) = &existing {
        match existing.labels().get(labels::PROJECT_ID) {
            Some(owner) if owner == project => {}
            Some(_) => {
                return Err(violation(format!(
                    "namespace {name} belongs to another project"
                )));
            }
            None => {
                return Err(violation(format!(
                    "namespace {name} already exists and is not managed by kubenest"
                )));
            }
        }
        if existing.metadata.deletion_timestamp.is_some() {
            return Err(Refusal::new(
                RejectReason::Internal,
                format!("namespace {name} is still being deleted; try again"),
                Some("/namespace"),
            ));
        }
    }
    let labels = namespace_labels(command);
    let object = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {pod_security::LEVEL_ANNOTATION: command.pod_security.as_str()},
        },
    });
    namespaces
        .patch(
            name,
            &PatchParams::apply(field_managers::AGENT).force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(Refusal::internal)?;
    // With namespaced powers, the agent's own in the new namespace before anything goes in.
    ctx.applier.grant(name).await.map_err(Refusal::internal)?;
    // Its quota, default limits and network isolation, before anything runs in it.
    crate::fences::keep(ctx, command).await?;
    // The namespace's pulls use the project's registry Secret, if it names one; applied either
    // way, so a removed Secret's name goes from the ServiceAccount too.
    let pull_secrets: Vec<_> = command
        .registry_secret
        .iter()
        .map(|secret| json!({"name": secret.as_str()}))
        .collect();
    let account = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": name},
        "imagePullSecrets": pull_secrets,
    });
    Api::<ServiceAccount>::namespaced(ctx.client.clone(), name)
        .patch(
            "default",
            &PatchParams::apply(field_managers::AGENT).force(),
            &Patch::Apply(&account),
        )
        .await
        .map_err(Refusal::internal)?;
    report(
        ctx,
        &command.project_id,
        &command.namespace,
        ProjectPhase::Ready,
        "",
    );
    Ok(())
}

/// `project.delete`: deletes the namespace (everything in it goes with it) and reports
/// `Deleted` once it is gone.
pub async fn delete(ctx: &Arc<Context>, command: &wire::ProjectDelete) -> Result<(), Refusal> {
    let namespaces = Api::<Namespace>::all(ctx.client.clone());
    let name = command.namespace.as_str();
    match namespaces.get_opt(name).await.map_err(Refusal::internal)? {
        None => {
            report(
                ctx,
                &command.project_id,
                &command.namespace,
                ProjectPhase::Deleted,
                "",
            );
            return Ok(());
        }
        Some(ns)
            if ns.labels().get(labels::PROJECT_ID).map(String::as_str)
                != Some(command.project_id.as_str()) =>
        {
            return Err(violation(format!("namespace {name} is not this project's")));
        }
        Some(_) => {}
    }
    ctx.kept.forget(name);
    match namespaces.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => return Err(Refusal::internal(error)),
    }
    report(
        ctx,
        &command.project_id,
        &command.namespace,
        ProjectPhase::Terminating,
        BEING_DELETED,
    );
    let ctx = ctx.clone();
    let command = command.clone();
    tokio::spawn(async move {
        let namespaces = Api::<Namespace>::all(ctx.client.clone());
        let mut said = BEING_DELETED.to_owned();
        for _ in 0..600 {
            match namespaces.get_opt(command.namespace.as_str()).await {
                Ok(None) => {
                    report(
                        &ctx,
                        &command.project_id,
                        &command.namespace,
                        ProjectPhase::Deleted,
                        "",
                    );
                    return;
                }
                Ok(Some(namespace)) => {
                    // What the namespace controller says holds it, each time that changes.
                    let now = terminating(&namespace);
                    if now != said {
                        let phase = ProjectPhase::Terminating;
                        report(&ctx, &command.project_id, &command.namespace, phase, &now);
                        said = now;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    });
    Ok(())
}

/// What a project's namespace being deleted says before it has said what holds it.
const BEING_DELETED: &str = "the namespace is being deleted";

/// The namespace conditions that say what holds a namespace's deletion.
const HOLDING: [&str; 5] = [
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
    "NamespaceDeletionContentFailure",
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
];

/// What holds the deletion of `namespace` (pure), as its namespace controller's conditions say
/// (e.g. `Some content in the namespace has finalizers remaining: example.test/hold in 1
/// resource instances`), or that it is being deleted.
pub fn terminating(namespace: &Namespace) -> String {
    let conditions = namespace
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref());
    let holding: Vec<&str> = conditions
        .into_iter()
        .flatten()
        .filter(|c| HOLDING.contains(&c.type_.as_str()) && c.status == "True")
        .filter_map(|c| c.message.as_deref())
        .collect();
    if holding.is_empty() {
        BEING_DELETED.to_owned()
    } else {
        format!("{BEING_DELETED}: {}", holding.join("; "))
    }
}

fn violation(message: String) -> Refusal {
    Refusal::new(
        RejectReason::NamespaceViolation,
        message,
        Some("/namespace"),
    )
}

/// The status of every project namespace, for a resync.
pub async fn statuses(ctx: &Context) -> Vec<wire::ProjectStatus> {
    let listed = Api::<Namespace>::all(ctx.client.clone())
        .list(&kube::api::ListParams::default().labels(labels::PROJECT_ID))
        .await;
    let Ok(listed) = listed else {
        return vec![];
    };
    listed
        .items
        .into_iter()
        .filter_map(|ns| {
            let project = ns.labels().get(labels::PROJECT_ID)?.clone();
            let (phase, message) = if ns.metadata.deletion_timestamp.is_some() {
                (ProjectPhase::Terminating, terminating(&ns))
            } else {
                (ProjectPhase::Ready, String::new())
            };
            let (usage, healed) = ctx.kept.report(&ns.name_any());
            Some(wire::ProjectStatus {
                project_id: wire::Id::new(project),
                namespace: wire::Name::new(ns.name_any()),
                phase,
                message,
                observed_at: chrono::Utc::now(),
                usage,
                healed,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ensure(pod_security: wire::PodSecurity) -> wire::ProjectEnsure {
        wire::ProjectEnsure {
            project_id: wire::Id::new("p1"),
            namespace: wire::Name::new("shop"),
            labels: [
                ("team".to_owned(), "web".to_owned()),
                (
                    format!("{}enforce", pod_security::PREFIX),
                    "privileged".to_owned(),
                ),
                (
                    format!("{}warn", pod_security::PREFIX),
                    "privileged".to_owned(),
                ),
            ]
            .into(),
            registry_secret: None,
            pod_security,
            fences: wire::Fences::default(),
        }
    }

    #[test]
    fn a_project_namespace_enforces_baseline_by_default_and_no_extra_label_loosens_it() {
        let labels = namespace_labels(&ensure(wire::PodSecurity::default()));
        for mode in ["enforce", "warn", "audit"] {
            assert_eq!(
                labels[&format!("{}{mode}", pod_security::PREFIX)],
                "baseline"
            );
        }
        assert_eq!(labels["team"], "web");
        assert_eq!(labels[labels::PROJECT_ID], "p1");
    }

    #[test]
    fn a_restricted_project_namespace_enforces_restricted() {
        let labels = namespace_labels(&ensure(wire::PodSecurity::Restricted));
        assert_eq!(
            labels[&format!("{}enforce", pod_security::PREFIX)],
            "restricted"
        );
    }

    #[test]
    fn a_terminating_namespace_says_what_its_namespace_controller_says_holds_it() {
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "shop"},
            "status": {"phase": "Terminating", "conditions": [
                {"type": "NamespaceDeletionDiscoveryFailure", "status": "False",
                 "message": "All resources successfully discovered"},
                {"type": "NamespaceContentRemaining", "status": "True",
                 "message": "Some resources are remaining: configmaps. has 1 resource instances"},
                {"type": "NamespaceFinalizersRemaining", "status": "True",
                 "message": "Some content in the namespace has finalizers remaining: example.test/hold in 1 resource instances"},
            ]}
        }))
        .unwrap();
        assert_eq!(
            terminating(&namespace),
            "the namespace is being deleted: Some resources are remaining: configmaps. has 1 \
             resource instances; Some content in the namespace has finalizers remaining: \
             example.test/hold in 1 resource instances"
        );
        assert_eq!(terminating(&Namespace::default()), BEING_DELETED);
    }
}
