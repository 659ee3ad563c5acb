//! Helpers shared by the controller tests.

#![allow(dead_code)] // each test binary uses part of this

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::wait::{await_condition, conditions};
use tokio::sync::watch;

/// Polls `check` every 100 ms until it holds, for at most 15 s.
pub async fn eventually<F: AsyncFnMut() -> bool>(what: &str, check: F) {
    eventually_within(what, Duration::from_secs(15), check).await;
}

/// Polls `check` every 100 ms until it holds, for at most `within`.
pub async fn eventually_within<F: AsyncFnMut() -> bool>(
    what: &str,
    within: Duration,
    mut check: F,
) {
    for _ in 0..within.as_millis() / 100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out after {within:?}: {what}");
}

/// Installs the CRDs and the kubenest ClusterRoles, and waits until every CRD is served.
pub async fn install(client: &Client) {
    kubenest_controllers::ensure_crds(client).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in kubenest_crds::all() {
        let name = crd.metadata.name.unwrap();
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .unwrap()
            .unwrap();
    }
    kubenest_controllers::rbac::ensure_cluster_roles(client)
        .await
        .unwrap();
}

/// A stop signal for controllers: every future from `stopped()` resolves when this drops.
pub struct Stop(watch::Sender<bool>);

impl Stop {
    pub fn new() -> Self {
        Self(watch::channel(false).0)
    }

    pub fn stopped(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut rx = self.0.subscribe();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}
