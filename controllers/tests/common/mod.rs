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

/// The Organization and Cluster controllers, started once per test binary on a runtime of their
/// own (a test's runtime ends with the test), signing with one key whose verifier is returned.
/// One set of controllers per management cluster, as in production: two sets with different
/// keys would mint over each other's tokens.
pub fn shared_controllers(
    mgmt: &'static kubenest_testkit::Cluster,
) -> &'static kubenest_contracts::TokenVerifier {
    use std::sync::{Arc, OnceLock};
    static SHARED: OnceLock<kubenest_contracts::TokenVerifier> = OnceLock::new();
    SHARED.get_or_init(|| {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let pem = key.serialize_pem();
        let signer = kubenest_contracts::TokenSigner::from_pem(pem.as_bytes(), "kubenest").unwrap();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let client = mgmt.client().await.unwrap();
                install(&client).await;
                let never = std::future::pending::<()>;
                let ctx = kubenest_controllers::cluster::Context {
                    client: client.clone(),
                    signer: Arc::new(signer),
                };
                tokio::join!(
                    kubenest_controllers::organization::run(client, never()),
                    kubenest_controllers::cluster::run(ctx, never()),
                );
            });
        });
        kubenest_contracts::TokenVerifier::from_pem(key.public_key_pem().as_bytes(), "kubenest")
            .unwrap()
    })
}
