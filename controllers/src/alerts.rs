//! Alerts are real objects: a cluster silent past its heartbeat window, an App past its
//! progress deadline, and an App, addon or Project whose deletion is past its deadline each
//! become a row users list and acknowledge (`kubenest_store::Alerts`)
//! and a Kubernetes Event on the object, opened when the condition starts and resolved when it
//! ends. What starts and ends one is [`kubenest_domain::alerts`] (the API server's live stream
//! derives its `alert` events from the same rules).
//!
//! Level-based: each pass compares the open rows with what the caches show ([`plan`], pure), so
//! a controller restarted or newly elected picks up where the last one was, and a subject
//! deleted while alerting has its alert resolved.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use kubenest_crds::cluster::Cluster;
use kubenest_domain::alerts::{
    AlertKind, Signal, app_signal, cluster_signal, deletion_signal, gitops_signal,
    verification_signal,
};
use kubenest_runtime::events::event;
use kubenest_store::{Alerts, NewAlert};
use tokio_util::sync::CancellationToken;

use crate::caches::Caches;
use crate::placement::org_in;

/// How often open alerts are compared with the caches.
const ALERTS_EVERY: Duration = Duration::from_secs(2);

/// An object that may alert, with what its status says.
#[derive(Debug, Clone)]
pub struct Subject {
    pub kind: AlertKind,
    /// What the subject is: `cluster`, `app`, `addon` or `project`.
    pub subject_kind: &'static str,
    /// The object's uid.
    pub uid: String,
    pub name: String,
    pub org_id: String,
    pub cluster_id: Option<String>,
    pub project_id: Option<String>,
    pub signal: Signal,
    /// Where its Kubernetes Events go.
    pub reference: ObjectReference,
}

/// What a pass does.
#[derive(Debug, Clone)]
pub enum Change {
    /// Open this alert and tell the object.
    Open(NewAlert, ObjectReference),
    /// Resolve the open alert of `kind` about `subject_id`, saying why (and tell the object,
    /// when it still exists).
    Resolve {
        kind: AlertKind,
        subject_id: String,
        why: String,
        reference: Option<ObjectReference>,
    },
}

/// What to open and resolve, given the open alerts (subject uid, kind) and the subjects that
/// exist (pure).
pub fn plan(open: &[(String, AlertKind)], subjects: &[Subject]) -> Vec<Change> {
    let open_set: HashSet<(&str, AlertKind)> =
        open.iter().map(|(id, kind)| (id.as_str(), *kind)).collect();
    let mut changes = Vec::new();
    for subject in subjects {
        let is_open = open_set.contains(&(subject.uid.as_str(), subject.kind));
        match (&subject.signal, is_open) {
            (Signal::Raise(message), false) => changes.push(Change::Open(
                NewAlert {
                    org_id: subject.org_id.clone(),
                    kind: subject.kind.as_str().into(),
                    severity: subject.kind.severity().into(),
                    subject_kind: subject.subject_kind.into(),
                    subject_id: subject.uid.clone(),
                    subject_name: subject.name.clone(),
                    cluster_id: subject.cluster_id.clone(),
                    project_id: subject.project_id.clone(),
                    message: message.clone(),
                },
                subject.reference.clone(),
            )),
            (Signal::Clear(why), true) => changes.push(Change::Resolve {
                kind: subject.kind,
                subject_id: subject.uid.clone(),
                why: why.clone(),
                reference: Some(subject.reference.clone()),
            }),
            _ => {}
        }
    }
    let existing: HashSet<(&str, AlertKind)> =
        subjects.iter().map(|s| (s.uid.as_str(), s.kind)).collect();
    for (id, kind) in open {
        if !existing.contains(&(id.as_str(), *kind)) {
            changes.push(Change::Resolve {
                kind: *kind,
                subject_id: id.clone(),
                why: match kind {
                    AlertKind::DeletionDeadlineExceeded => {
                        "the deletion finished, or the object was removed by force".into()
                    }
                    AlertKind::GitOpsWriteFailed => "the object was deleted".into(),
                    _ => format!("the {} was deleted", kind.subject()),
                },
                reference: None,
            });
        }
    }
    changes
}

fn reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    object.object_ref(&())
}

fn cluster_subject(caches: &Caches, cluster: &Cluster) -> Option<Subject> {
    let namespace = cluster.namespace()?;
    let uid = cluster.uid()?;
    Some(Subject {
        kind: AlertKind::HeartbeatMissed,
        subject_kind: "cluster",
        org_id: org_in(caches, &namespace)?,
        cluster_id: Some(uid.clone()),
        project_id: None,
        name: cluster.name_any(),
        signal: cluster_signal(cluster.status.as_ref()),
        reference: reference(cluster),
        uid,
    })
}

/// `object` (an App or addon of `project`, or the Project itself) as a subject of `kind`.
fn in_project<K: Resource<DynamicType = ()>>(
    caches: &Caches,
    object: &K,
    project: &str,
    (kind, subject_kind): (AlertKind, &'static str),
    signal: Signal,
) -> Option<Subject> {
    let namespace = object.namespace()?;
    let project_id = caches
        .projects
        .get(&ObjectRef::new(project).within(&namespace))
        .and_then(|p| p.uid());
    Some(Subject {
        kind,
        subject_kind,
        org_id: org_in(caches, &namespace)?,
        cluster_id: caches.cluster_of_project(&namespace, project),
        project_id,
        name: object.name_any(),
        signal,
        reference: reference(object),
        uid: object.uid()?,
    })
}

/// Every Cluster, App, addon and Project in the caches, as subjects: each cluster of its
/// heartbeat, each App of its progress deadline, each App, addon and Project being deleted of
/// its deletion's deadline, and each App and addon of its GitOps record.
fn subjects(caches: &Caches) -> Vec<Subject> {
    let deletion = AlertKind::DeletionDeadlineExceeded;
    let gitops = AlertKind::GitOpsWriteFailed;
    let mut subjects: Vec<Subject> = caches
        .clusters
        .state()
        .iter()
        .filter_map(|c| cluster_subject(caches, c))
        .collect();
    for app in caches.apps.state() {
        let status = app.status.as_ref();
        let project = &app.spec.project;
        let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
        let gitops_error = status.and_then(|s| s.gitops_error.as_deref());
        for (kind, signal) in [
            (AlertKind::ProgressDeadlineExceeded, app_signal(status)),
            (deletion, deletion_signal(conditions)),
            (gitops, gitops_signal(gitops_error)),
            (AlertKind::VerificationFailed, verification_signal(status)),
        ] {
            subjects.extend(in_project(caches, &*app, project, (kind, "app"), signal));
        }
    }
    for addon in caches.addons.state() {
        let status = addon.status.as_ref();
        let project = &addon.spec.project;
        let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
        let gitops_error = status.and_then(|s| s.gitops_error.as_deref());
        for (kind, signal) in [
            (deletion, deletion_signal(conditions)),
            (gitops, gitops_signal(gitops_error)),
        ] {
            subjects.extend(in_project(
                caches,
                &*addon,
                project,
                (kind, "addon"),
                signal,
            ));
        }
    }
    for project in caches.projects.state() {
        let conditions = project.status.as_ref().map(|s| s.conditions.as_slice());
        let signal = deletion_signal(conditions.unwrap_or_default());
        let kind = (deletion, "project");
        let name = project.name_any();
        subjects.extend(in_project(caches, &*project, &name, kind, signal));
    }
    subjects
}

/// Keeps the alert rows and Events in step with the caches until `shutdown`.
pub async fn run(
    client: kube::Client,
    caches: Caches,
    alerts: Alerts,
    shutdown: CancellationToken,
) {
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: kubenest_crds::names::field_managers::CONTROLLERS.into(),
            instance: None,
        },
    );
    loop {
        match alerts.unresolved().await {
            Ok(open) => {
                let open: Vec<(String, AlertKind)> = open
                    .into_iter()
                    .filter_map(|a| Some((a.subject_id, AlertKind::parse(&a.kind)?)))
                    .collect();
                for change in plan(&open, &subjects(&caches)) {
                    act(&alerts, &recorder, change).await;
                }
            }
            Err(error) => tracing::warn!(%error, "alerts: open alerts not read"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(ALERTS_EVERY) => {}
        }
    }
}

async fn act(alerts: &Alerts, recorder: &Recorder, change: Change) {
    let (told, event) = match change {
        Change::Open(new, reference) => {
            let kind = AlertKind::parse(&new.kind);
            match alerts.open(&new).await {
                Ok(Some(alert)) => {
                    tracing::warn!(alert = %alert.id, kind = %alert.kind, subject = %alert.subject_name, "alert opened");
                    let made = event(
                        EventType::Warning,
                        kind.map_or("Alert", |k| k.reason()),
                        truncated(&alert.message),
                        "Alert",
                    );
                    (Some(reference), made)
                }
                Ok(None) => return, // opened by a pass before
                Err(error) => {
                    tracing::warn!(%error, "alerts: not opened");
                    return;
                }
            }
        }
        Change::Resolve {
            kind,
            subject_id,
            why,
            reference,
        } => match alerts.resolve(&subject_id, kind.as_str(), &why).await {
            Ok(Some(alert)) => {
                tracing::info!(alert = %alert.id, kind = %alert.kind, subject = %alert.subject_name, %why, "alert resolved");
                let made = event(
                    EventType::Normal,
                    kind.resolved_reason(),
                    truncated(&why),
                    "Alert",
                );
                (reference, made)
            }
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, "alerts: not resolved");
                return;
            }
        },
    };
    if let Some(reference) = told
        && let Err(error) = recorder.publish(&event, &reference).await
    {
        tracing::warn!(%error, "alerts: the Kubernetes Event was not written");
    }
}

/// An Event's note is at most 1 kB.
fn truncated(text: &str) -> String {
    text.chars().take(1000).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(kind: AlertKind, uid: &str, signal: Signal) -> Subject {
        Subject {
            kind,
            subject_kind: kind.subject(),
            uid: uid.into(),
            name: format!("name-{uid}"),
            org_id: "acme".into(),
            cluster_id: Some("c1".into()),
            project_id: None,
            signal,
            reference: ObjectReference::default(),
        }
    }

    fn summary(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Open(new, _) => format!("open {} {}", new.kind, new.subject_id),
                Change::Resolve {
                    kind,
                    subject_id,
                    reference,
                    ..
                } => format!(
                    "resolve {} {subject_id}{}",
                    kind.as_str(),
                    if reference.is_some() { "" } else { " (gone)" }
                ),
            })
            .collect()
    }

    #[test]
    fn a_raise_opens_once_a_clear_resolves_once_and_a_deleted_subject_is_resolved() {
        let silent = subject(
            AlertKind::HeartbeatMissed,
            "c1",
            Signal::Raise("no report".into()),
        );
        let failed = subject(
            AlertKind::ProgressDeadlineExceeded,
            "a1",
            Signal::Raise("not running".into()),
        );
        let changes = plan(&[], &[silent.clone(), failed]);
        assert_eq!(
            summary(&changes),
            [
                "open heartbeat_missed c1",
                "open progress_deadline_exceeded a1"
            ]
        );
        let Change::Open(new, _) = &changes[0] else {
            panic!("an open first");
        };
        assert_eq!(
            (new.severity.as_str(), new.subject_kind.as_str()),
            ("critical", "cluster")
        );

        let open = vec![
            ("c1".to_owned(), AlertKind::HeartbeatMissed),
            ("a1".to_owned(), AlertKind::ProgressDeadlineExceeded),
        ];
        let rolling = subject(AlertKind::ProgressDeadlineExceeded, "a1", Signal::Keep);
        assert!(
            plan(&open, &[silent, rolling]).is_empty(),
            "still silent; a new rollout has not run yet"
        );

        let back = subject(
            AlertKind::HeartbeatMissed,
            "c1",
            Signal::Clear("reports".into()),
        );
        assert_eq!(
            summary(&plan(&open, &[back])),
            [
                "resolve heartbeat_missed c1",
                "resolve progress_deadline_exceeded a1 (gone)"
            ]
        );
    }
}
