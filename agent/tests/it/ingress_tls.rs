//! An ingress with `tls` and no `tls_secret` on a kwok cluster (the fixture of `agent.rs`):
//! without the project's ingress CA the App waits saying so, and nothing is issued; once the
//! CA is set (`secret.set`, as the API server does), the agent issues a certificate for the
//! host into `{app}-{component}-tls`, signed by that CA, names it in the Ingress, and keeps it
//! across passes. (`real_ingress.rs` serves it through a real controller on the real node.)

use crate::agent::{LONG, fixture};
use crate::common::{app_ref, project, secret_set};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, Patch, PatchParams};
use kubenest_contracts::{self as wire, AppPhase};
use serde_json::json;

fn shop(app: wire::AppRef, revision: &str) -> wire::AppDeploy {
    serde_json::from_value(json!({
        "app": app,
        "revision": revision,
        "progress_deadline_seconds": 120,
        "components": [
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx:1.27"},
             "replicas": 1, "port": 8080,
             "ingress": {"host": "shop.tls.example.test", "path": "/", "tls": true}}
        ]
    }))
    .unwrap()
}

#[tokio::test]
async fn an_ingress_waits_for_the_projects_ca_then_gets_a_certificate_issued_from_it() {
    let f = fixture();
    let (project_id, namespace) = project(&f.backend, "tlsca").await;
    let id = format!("shop-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let app = app_ref(&id, "shop", &project_id, &namespace);
    f.backend.accept(shop(app.clone(), "r1")).await;
    let waiting = f
        .backend
        .app_status("the App says it has no CA", LONG, &id, |s| {
            s.components
                .iter()
                .any(|c| c.message.contains("the project has no ingress CA"))
        })
        .await;
    assert_ne!(waiting.phase, AppPhase::Running, "{waiting:?}");
    let client = f.east.client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    assert!(secrets.get_opt("shop-web-tls").await.unwrap().is_none());

    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "tlsca test CA");
    let ca = params.self_signed(&key).unwrap().pem();
    let set = secret_set(
        &namespace,
        wire::INGRESS_CA_SECRET,
        None,
        wire::SecretKind::Tls,
        &[("tls.crt", &ca), ("tls.key", &key.serialize_pem())],
    );
    // The CA alone wakes the App: no revision is needed.
    f.backend.accept(set).await;
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), &namespace);
    let mut issued = None;
    crate::common::eventually("the certificate issued", LONG, async || {
        issued = secrets.get_opt("shop-web-tls").await.unwrap();
        issued.is_some()
    })
    .await;
    let issued = issued.unwrap();
    assert_eq!(issued.type_.as_deref(), Some("kubernetes.io/tls"));
    let annotations = issued.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["kubenest.io/tls-host"], "shop.tls.example.test");
    let labels = issued.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubenest.io/app-id"], id);
    let data = issued.data.clone().unwrap();
    let chain = String::from_utf8(data["tls.crt"].0.clone()).unwrap();
    assert!(
        chain.trim_end().ends_with(ca.trim_end()),
        "the leaf, then the CA"
    );
    let (_, leaf) = x509_parser::pem::parse_x509_pem(chain.as_bytes()).unwrap();
    let leaf = leaf.parse_x509().unwrap();
    assert_eq!(leaf.issuer().to_string(), "CN=tlsca test CA");
    let ingress = ingresses.get("shop-web").await.unwrap();
    let tls = ingress.spec.unwrap().tls.unwrap();
    assert_eq!(tls[0].secret_name.as_deref(), Some("shop-web-tls"));

    // A later pass keeps the certificate as it is. (kwok runs no ingress controller: the
    // address is published as one would, so the App can be Running.)
    let address = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.8"}]}}});
    ingresses
        .patch_status("shop-web", &PatchParams::default(), &Patch::Merge(&address))
        .await
        .unwrap();
    f.backend.accept(shop(app, "r3")).await;
    f.backend
        .app_status("r3 applied", LONG, &id, |s| {
            s.observed_revision == "r3" && s.phase == AppPhase::Running
        })
        .await;
    let kept = secrets.get("shop-web-tls").await.unwrap();
    assert_eq!(kept.data, issued.data, "not issued again");

    // A new CA for the project: the Running App's certificate is issued from it at once, not
    // at its next full pass (a minute away) or revision.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "tlsca second CA");
    let second = params.self_signed(&key).unwrap().pem();
    let set = secret_set(
        &namespace,
        wire::INGRESS_CA_SECRET,
        None,
        wire::SecretKind::Tls,
        &[("tls.crt", &second), ("tls.key", &key.serialize_pem())],
    );
    f.backend.accept(set).await;
    crate::common::eventually(
        "the certificate issued from the new CA",
        std::time::Duration::from_secs(20),
        async || {
            let now = secrets.get("shop-web-tls").await.unwrap();
            let chain = String::from_utf8(now.data.unwrap()["tls.crt"].0.clone()).unwrap();
            chain.trim_end().ends_with(second.trim_end())
        },
    )
    .await;
}
