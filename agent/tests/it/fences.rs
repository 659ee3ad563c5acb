//! A project's fences on a real API server (kwok nodes): the ResourceQuota, LimitRange and
//! NetworkPolicies `project.ensure` asks for, Kubernetes' own admission holding pods to them, the
//! quota's count reported back, and a fence changed or deleted by someone else put back with a
//! `FenceRestored` Event and the project's status saying so. (That the NetworkPolicies hold
//! for real is the real node's test: `real_node::fences_hold_between_projects`.)

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{LimitRange, Pod, ResourceQuota};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubenest_contracts::{self as wire, Message};
use kubenest_crds::names::labels;
use serde_json::json;

use crate::agent::{LONG, fixture};
use crate::common::eventually;

fn ensure(id: &str, namespace: &str, fences: wire::Fences) -> wire::ProjectEnsure {
    wire::ProjectEnsure {
        project_id: wire::Id::new(id),
        namespace: wire::Name::new(namespace),
        labels: [
            (labels::ORGANIZATION.to_owned(), "acme".to_owned()),
            (labels::PROJECT.to_owned(), namespace.to_owned()),
        ]
        .into(),
        registry_secret: None,
        pod_security: Default::default(),
        fences,
    }
}

fn fenced() -> wire::Fences {
    wire::Fences {
        quota: Some(wire::Quota {
            cpu: Some("1".into()),
            memory: Some("1Gi".into()),
            pods: Some(4),
            ..wire::Quota::default()
        }),
        defaults: Some(wire::Resources {
            cpu_request: Some("200m".into()),
            memory_request: Some("64Mi".into()),
            memory_limit: Some("128Mi".into()),
            ..wire::Resources::default()
        }),
        network: wire::NetworkFence {
            isolated: true,
            allow_from: vec![wire::Name::new("web")],
            egress: vec![],
        },
    }
}

fn pod(name: &str, cpu: Option<&str>) -> Pod {
    let mut container = json!({"name": "main", "image": "shop:1"});
    if let Some(cpu) = cpu {
        container["resources"] = json!({"requests": {"cpu": cpu}});
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }))
    .unwrap()
}

/// The latest `project.status` of `id` that `check` accepts.
async fn status(
    id: &str,
    what: &str,
    check: impl Fn(&wire::ProjectStatus) -> bool,
) -> wire::ProjectStatus {
    fixture()
        .backend
        .wait_for(what, LONG, |m| match m {
            Message::ProjectStatus(s) if s.project_id.as_str() == id && check(s) => Some(s.clone()),
            _ => None,
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_project_is_held_by_its_cluster_and_its_fences_are_put_back() {
    let fx = fixture();
    let client = fx.east.client().await.unwrap();
    let id = format!("p-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let namespace = format!("fenced-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    fx.backend.accept(ensure(&id, &namespace, fenced())).await;

    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &namespace);
    let quota = quotas.get("kubenest-quota").await.unwrap();
    let hard = quota.spec.unwrap().hard.unwrap();
    let hard: BTreeMap<_, _> = hard
        .iter()
        .map(|(k, v)| (k.as_str(), v.0.as_str()))
        .collect();
    assert_eq!(
        hard,
        [
            ("pods", "4"),
            ("requests.cpu", "1"),
            ("requests.memory", "1Gi")
        ]
        .into()
    );
    let ranges: Api<LimitRange> = Api::namespaced(client.clone(), &namespace);
    let range = serde_json::to_value(ranges.get("kubenest-defaults").await.unwrap()).unwrap();
    assert_eq!(range["spec"]["limits"][0]["defaultRequest"]["cpu"], "200m");
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), &namespace);
    let isolation =
        serde_json::to_value(policies.get("kubenest-isolation").await.unwrap()).unwrap();
    assert_eq!(
        isolation["spec"]["ingress"][0]["from"][2]["namespaceSelector"]["matchLabels"],
        json!({labels::ORGANIZATION: "acme", labels::PROJECT: "web"})
    );
    assert!(policies.get_opt("kubenest-builds").await.unwrap().is_some());

    // A container that asks for nothing gets the project's defaults, and the quota counts it;
    // the agent reports the count.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let created = pods
        .create(&PostParams::default(), &pod("plain", None))
        .await
        .unwrap();
    let requests = created.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests["cpu"].0, "200m");
    assert_eq!(requests["memory"].0, "64Mi");
    status(&id, "the quota's count of the pod", |s| {
        s.usage.get("requests.cpu").map(String::as_str) == Some("200m")
            && s.usage.get("pods").map(String::as_str) == Some("1")
    })
    .await;
    // Past the quota, Kubernetes itself refuses.
    let refused = pods
        .create(&PostParams::default(), &pod("greedy", Some("2")))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403 && s.message.contains("exceeded quota")),
        "{refused:?}"
    );

    // Someone raises the quota by hand: it is put back, told on the quota and in the status.
    let raise = json!({"apiVersion": "v1", "kind": "ResourceQuota",
                       "spec": {"hard": {"requests.cpu": "100"}}});
    quotas
        .patch(
            "kubenest-quota",
            &PatchParams::apply("kubectl-edit").force(),
            &Patch::Apply(&raise),
        )
        .await
        .unwrap();
    eventually("the quota put back", LONG, async || {
        let quota = quotas.get("kubenest-quota").await.unwrap();
        quota.spec.unwrap().hard.unwrap()["requests.cpu"].0 == "1"
    })
    .await;
    let healed = status(&id, "the status naming the fence put back", |s| {
        s.healed
            .iter()
            .any(|h| h.starts_with("ResourceQuota kubenest-quota: spec changed"))
    })
    .await;
    assert!(
        healed.healed.iter().any(|h| h.contains("by kubectl-edit")),
        "{:?}",
        healed.healed
    );
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), &namespace);
    eventually("a FenceRestored Event on the quota", LONG, async || {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("FenceRestored")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref())
                        == Some("kubenest-quota")
            })
    })
    .await;

    // Someone deletes the isolation: it comes back.
    policies
        .delete("kubenest-isolation", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the isolation put back", LONG, async || {
        policies
            .get_opt("kubenest-isolation")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    status(&id, "the status naming the isolation put back", |s| {
        s.healed
            .iter()
            .any(|h| h == "NetworkPolicy kubenest-isolation: deleted; restored")
    })
    .await;

    // Fences lifted: nothing of them is left.
    let open = wire::Fences {
        network: wire::NetworkFence {
            isolated: false,
            ..wire::NetworkFence::default()
        },
        ..wire::Fences::default()
    };
    fx.backend.accept(ensure(&id, &namespace, open)).await;
    assert!(quotas.get_opt("kubenest-quota").await.unwrap().is_none());
    assert!(ranges.get_opt("kubenest-defaults").await.unwrap().is_none());
    for name in ["kubenest-isolation", "kubenest-builds"] {
        assert!(policies.get_opt(name).await.unwrap().is_none(), "{name}");
    }
    // And what the agent no longer keeps, it does not put back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(quotas.get_opt("kubenest-quota").await.unwrap().is_none());
}
