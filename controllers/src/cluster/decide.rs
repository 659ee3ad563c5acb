//! The Cluster controller's decisions (pure): the token Secret of a cluster, the status fields
//! this controller owns, and what holds a deletion.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::ObjectMeta;
use kube::{Resource, ResourceExt};
use kubenest_crds::cluster::{Cluster, ClusterStatus};
use kubenest_crds::names::labels;
use serde::Serialize;

use super::{Error, token_secret_name};
use crate::conditions::DELETION_BLOCKED;

/// The fields of a Cluster's status this controller writes. Heartbeats write capacity and
/// health concurrently, so only these go in its patch; `conditions` only to drop a
/// `DeletionBlocked` left by a deletion that was called off.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Minted {
    pub cluster_id: String,
    pub token_secret: String,
    pub issued_token_version: u64,
    /// The generation this controller last wrote the status for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// Whether the token Secret must be (re)minted: its version was never issued, or the Secret
/// is gone (`secret_exists` is only known when the version was issued).
pub fn must_mint(status: &ClusterStatus, version: u64, secret_exists: Option<bool>) -> bool {
    status.issued_token_version != Some(version) || secret_exists != Some(true)
}

/// The Secret carrying `token` for `cluster` (owned by the cluster, so it goes with it).
pub fn token_secret(
    cluster: &Cluster,
    namespace: &str,
    org: &str,
    cluster_id: &str,
    token: String,
) -> Result<Secret, Error> {
    let name = cluster.name_any();
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Invalid("cluster without uid".into()))?;
    let data: BTreeMap<String, ByteString> = [
        ("token", token),
        ("cluster-id", cluster_id.to_owned()),
        ("org-id", org.to_owned()),
        ("token-version", cluster.spec.token_version.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
    .collect();
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(token_secret_name(&name)),
            namespace: Some(namespace.to_owned()),
            owner_references: Some(vec![owner]),
            labels: Some([(labels::CLUSTER.to_owned(), name)].into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubenest.io/cluster-token".into()),
        data: Some(data),
        ..Secret::default()
    })
}

/// The status fields to write for a live cluster, or `None` when they already read so.
pub fn minted(cluster: &Cluster, cluster_id: &str) -> Option<Minted> {
    let status = cluster.status.clone().unwrap_or_default();
    let secret_name = token_secret_name(&cluster.name_any());
    let version = cluster.spec.token_version;
    let conditions = status
        .conditions
        .iter()
        .any(|c| c.type_ == DELETION_BLOCKED)
        .then(|| {
            status
                .conditions
                .iter()
                .filter(|c| c.type_ != DELETION_BLOCKED)
                .cloned()
                .collect()
        });
    let unchanged = status.cluster_id.as_deref() == Some(cluster_id)
        && status.token_secret.as_deref() == Some(secret_name.as_str())
        && status.issued_token_version == Some(version)
        && status.observed_generation == cluster.metadata.generation
        && conditions.is_none();
    (!unchanged).then(|| Minted {
        cluster_id: cluster_id.to_owned(),
        token_secret: secret_name,
        issued_token_version: version,
        observed_generation: cluster.metadata.generation,
        conditions,
    })
}

/// What a cluster being deleted needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion {
    /// No project uses the cluster: the finalizer can go.
    Done,
    /// Projects still live on the cluster; `status` (saying which) is to be written when it
    /// says something new.
    Blocked { status: Option<Box<ClusterStatus>> },
}

/// What holds the deletion of `cluster`, given the projects on it.
pub fn deletion(cluster: &Cluster, projects: &[String]) -> Deletion {
    if projects.is_empty() {
        return Deletion::Done;
    }
    let mut status = cluster.status.clone().unwrap_or_default();
    let message = format!(
        "deletion waits until these projects are deleted: {}",
        projects.join(", ")
    );
    let blocked = status
        .conditions
        .iter()
        .any(|c| c.type_ == DELETION_BLOCKED && c.message == message);
    if blocked {
        return Deletion::Blocked { status: None };
    }
    status.observed_generation = cluster.metadata.generation;
    status.conditions.retain(|c| c.type_ != DELETION_BLOCKED);
    status.conditions.push(Condition {
        type_: DELETION_BLOCKED.into(),
        status: "True".into(),
        reason: "ProjectsExist".into(),
        message,
        observed_generation: cluster.metadata.generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
    });
    Deletion::Blocked {
        status: Some(Box::new(status)),
    }
}

#[cfg(test)]
mod tests {
    use kubenest_crds::cluster::ClusterSpec;

    use super::*;

    fn cluster(status: Option<ClusterStatus>) -> Cluster {
        let mut c = Cluster::new(
            "east",
            ClusterSpec {
                display_name: None,
                provider: Default::default(),
                token_version: 2,
                desired_node_count: None,
                members: Vec::new(),
                budget: None,
            },
        );
        c.metadata.namespace = Some("org-acme".into());
        c.metadata.uid = Some("uid-east".into());
        c.status = status;
        c
    }

    fn blocked() -> Condition {
        Condition {
            type_: DELETION_BLOCKED.into(),
            status: "True".into(),
            reason: "ProjectsExist".into(),
            message: "deletion waits until these projects are deleted: web".into(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        }
    }

    #[test]
    fn a_token_is_minted_for_a_new_version_or_a_lost_secret() {
        let issued = ClusterStatus {
            issued_token_version: Some(2),
            ..Default::default()
        };
        assert!(must_mint(&ClusterStatus::default(), 2, None));
        assert!(must_mint(&issued, 3, None));
        assert!(must_mint(&issued, 2, Some(false)));
        assert!(!must_mint(&issued, 2, Some(true)));
        let secret =
            token_secret(&cluster(None), "org-acme", "acme", "uid-east", "t".into()).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("cluster-east-token"));
        let data = secret.data.unwrap();
        assert_eq!(data["token-version"].0, b"2");
        assert_eq!(data["org-id"].0, b"acme");
    }

    #[test]
    fn the_status_is_written_only_when_it_differs_and_a_called_off_deletion_is_cleared() {
        let fresh = minted(&cluster(None), "uid-east").unwrap();
        assert_eq!(
            serde_json::to_value(&fresh).unwrap(),
            serde_json::json!({
                "clusterId": "uid-east",
                "tokenSecret": "cluster-east-token",
                "issuedTokenVersion": 2,
            })
        );
        let written = ClusterStatus {
            cluster_id: Some("uid-east".into()),
            token_secret: Some("cluster-east-token".into()),
            issued_token_version: Some(2),
            ..Default::default()
        };
        assert_eq!(minted(&cluster(Some(written.clone())), "uid-east"), None);
        let called_off = ClusterStatus {
            conditions: vec![blocked()],
            ..written
        };
        let patch = minted(&cluster(Some(called_off)), "uid-east").unwrap();
        assert_eq!(patch.conditions, Some(vec![]));
    }

    #[test]
    fn a_new_generation_is_written_as_observed_even_when_the_token_stands() {
        let written = ClusterStatus {
            cluster_id: Some("uid-east".into()),
            token_secret: Some("cluster-east-token".into()),
            issued_token_version: Some(2),
            observed_generation: Some(1),
            ..Default::default()
        };
        let mut edited = cluster(Some(written));
        edited.metadata.generation = Some(2);
        let patch = minted(&edited, "uid-east").unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap()["observedGeneration"],
            2
        );
        edited.status.as_mut().unwrap().observed_generation = Some(2);
        assert_eq!(minted(&edited, "uid-east"), None);
    }

    #[test]
    fn projects_hold_a_deletion_and_the_same_reason_is_written_once() {
        assert_eq!(deletion(&cluster(None), &[]), Deletion::Done);
        let Deletion::Blocked {
            status: Some(status),
        } = deletion(&cluster(None), &["web".to_owned()])
        else {
            panic!("a project lives on the cluster");
        };
        assert_eq!(status.conditions[0].message, blocked().message);
        let again = ClusterStatus {
            conditions: vec![blocked()],
            ..Default::default()
        };
        assert_eq!(
            deletion(&cluster(Some(again)), &["web".to_owned()]),
            Deletion::Blocked { status: None }
        );
    }
}
