//! A reconcile that fails is told as a Kubernetes Event on its object, on a real API server: a
//! controller over ConfigMaps whose reconcile always fails, measured by [`Reconciles`] with an
//! Event sink, leaves a `ReconcileFailed` Warning naming the error's category and words.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_runtime::events::{EventMetrics, EventSink};
use kubenest_runtime::reconciles::{Category, RECONCILE_FAILED, Reconciles};
use tokio_util::sync::CancellationToken;

/// What the reconcile fails with.
#[derive(Debug, thiserror::Error)]
#[error("the spec names a project that does not exist")]
struct Unplaced;

impl Category for Unplaced {
    fn category(&self) -> &'static str {
        "invalid"
    }
}

#[tokio::test]
async fn a_failed_reconcile_is_a_warning_event_on_its_object() {
    let cluster = kubenest_testkit::shared_management().await.unwrap();
    let namespace = cluster.test_namespace("reconcile-events").await.unwrap();
    let client = namespace.client();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace.name());
    let stuck: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "stuck"}})).unwrap();
    config_maps
        .create(&PostParams::default(), &stuck)
        .await
        .unwrap();

    let shutdown = CancellationToken::new();
    let reconciles = Reconciles::default();
    reconciles.tell_errors_to(EventSink::start(
        client.clone(),
        "kubenest-test",
        EventMetrics::default(),
        shutdown.child_token(),
    ));
    let failing = async |_: Arc<ConfigMap>, _: Arc<()>| Err::<Action, _>(Unplaced);
    let controller = Controller::new(config_maps, watcher::Config::default())
        .run(
            reconciles.measure("stuck", failing),
            |_, _, _| Action::requeue(Duration::from_secs(60)),
            Arc::new(()),
        )
        .for_each(|_| async {});
    let running = tokio::spawn(controller);

    let events: Api<Event> = Api::namespaced(client, namespace.name());
    let started = Instant::now();
    let told = loop {
        let listed = events.list(&Default::default()).await.unwrap();
        let found = listed.items.into_iter().find(|e| {
            e.reason.as_deref() == Some(RECONCILE_FAILED)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("stuck")
        });
        if let Some(found) = found {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no {RECONCILE_FAILED} Event on ConfigMap stuck"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    running.abort();
    shutdown.cancel();
    assert_eq!(told.type_.as_deref(), Some("Warning"));
    assert_eq!(
        told.note.as_deref(),
        Some("invalid error: the spec names a project that does not exist")
    );
    assert!(reconciles.count("stuck") > 0);
}
