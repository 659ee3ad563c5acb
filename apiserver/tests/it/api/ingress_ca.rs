//! A project's ingress CA (`/api/v1/projects/{id}/ingress-ca`), as an attacker would try it:
//! who may set, read and remove it, what is refused at the door, and that its key is never
//! answered, recorded on the Project, or kept when the hub cannot confirm it (these API servers
//! have no hub: a CA that passes every check is refused 503, fail-closed; the agent's side is
//! `agent/tests/it/api.rs`).

use super::*;
use kubenest_crds::project::Project;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, date_time_ymd,
};

/// The annotation the API server keeps the CA's certificate in.
const CERTIFICATE_ANNOTATION: &str = "kubenest.io/ingress-ca-certificate";

/// A self-signed certificate for `key`: a CA or not, valid from `from` to `until` (years).
fn certificate(key: &KeyPair, ca: bool, from: i32, until: i32) -> String {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "Attack test CA");
    if ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    }
    params.not_before = date_time_ymd(from, 1, 1);
    params.not_after = date_time_ymd(until, 1, 1);
    params.self_signed(key).unwrap().pem()
}

/// The base64 lines of a PEM key: none may ever come back.
fn key_lines(pem: &str) -> Vec<String> {
    pem.lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::to_owned)
        .collect()
}

fn assert_no_key(what: &str, text: &str, key: &[String]) {
    assert!(
        !text.contains("PRIVATE KEY-----"),
        "{what} holds a key: {text}"
    );
    for line in key {
        assert!(
            !text.contains(line.as_str()),
            "{what} quotes the key: {text}"
        );
    }
}

/// An organization with a cluster and projects `shop` and `blog`, and users by role: `shop`'s
/// admin, member and viewer, `blog`'s admin, and one with no role. Returns (org, shop's id,
/// shop's name, [padmin, pmember, pviewer, other, nobody]).
async fn setting() -> (String, String, String, [String; 5]) {
    let admin = Client::admin().await;
    let names: Vec<String> = futures::future::join_all(
        ["padmin", "pmember", "pviewer", "other", "nobody"]
            .iter()
            .map(|p| user(&admin, p)),
    )
    .await;
    let users = <[String; 5]>::try_from(names).unwrap();
    let org = org(&admin, "caorg", json!([])).await;
    let c = cluster(&admin, &org).await;
    let cluster_id = c["cluster_id"].as_str().unwrap();
    let shop = project(&admin, &org, cluster_id).await;
    let blog = project(&admin, &org, cluster_id).await;
    let shop_id = shop["id"].as_str().unwrap().to_owned();
    for (project, user, role) in [
        (&shop_id, &users[0], "admin"),
        (&shop_id, &users[1], "member"),
        (&shop_id, &users[2], "viewer"),
        (&blog["id"].as_str().unwrap().to_owned(), &users[3], "admin"),
    ] {
        admin
            .expect(
                Method::PUT,
                &format!("/api/v1/projects/{project}/members"),
                Some(json!({"user": user, "role": role})),
                200,
            )
            .await;
    }
    let name = shop["name"].as_str().unwrap().to_owned();
    (org, shop_id, name, users)
}

/// The project as stored on the management cluster, as JSON.
async fn stored(org: &str, name: &str) -> (Project, String) {
    let api: Api<Project> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let project = api.get(name).await.unwrap();
    let text = serde_json::to_string(&project).unwrap();
    (project, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_projects_admins_set_or_remove_its_ingress_ca_and_its_readers_see_only_the_certificate()
 {
    let (org, shop_id, shop, users) = setting().await;
    let [padmin, pmember, pviewer, other, nobody] = users;
    let login = async |name: &str| Client::login(0, name, PASSWORD).await;
    let path = format!("/api/v1/projects/{shop_id}/ingress-ca");
    let key = KeyPair::generate().unwrap();
    let body = json!({"certificate": certificate(&key, true, 2024, 2040),
                      "private_key": key.serialize_pem()});
    let secret = key_lines(&key.serialize_pem());
    // Roles too weak are a 403, no role on the project a 404, for every verb.
    for (who, put, get, delete) in [
        (&pmember, 403, 404, 403),
        (&pviewer, 403, 404, 403),
        (&other, 404, 404, 404),
        (&nobody, 404, 404, 404),
    ] {
        let client = login(who).await;
        let (status, answer) = client.call(Method::PUT, &path, Some(body.clone())).await;
        assert_eq!(status.as_u16(), put, "PUT as {who}: {answer}");
        assert_no_key("a refusal", &answer.to_string(), &secret);
        // The viewer sees the project, which has no CA yet (404); the others see nothing.
        assert_eq!(client.get(&path).await.0.as_u16(), get, "GET as {who}");
        let (status, answer) = client.call(Method::DELETE, &path, None).await;
        assert_eq!(status.as_u16(), delete, "DELETE as {who}: {answer}");
    }
    // The project's admin: a CA that passes every check still needs the agent to confirm it.
    // Without a hub it is refused, and nothing of it is recorded.
    let admin = login(&padmin).await;
    let (status, answer) = admin.call(Method::PUT, &path, Some(body.clone())).await;
    assert_eq!(status.as_u16(), 503, "{answer}");
    assert_no_key("the 503", &answer.to_string(), &secret);
    let (project, text) = stored(&org, &shop).await;
    assert!(!project.spec.ingress_ca, "{text}");
    assert_no_key("the Project", &text, &secret);
    let view = admin.get(&format!("/api/v1/projects/{shop_id}")).await.1;
    assert_eq!(view["ingress_ca"], false, "{view}");
    assert_eq!(admin.get(&path).await.0.as_u16(), 404);
    assert_eq!(
        admin.call(Method::DELETE, &path, None).await.0.as_u16(),
        404
    );

    // A CA set by the project's manifest (as Git would keep it): its readers get the
    // certificate, the outsiders still nothing.
    let ca = certificate(&key, true, 2024, 2040);
    let api: Api<Project> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let patch = json!({"metadata": {"annotations": {CERTIFICATE_ANNOTATION: ca}},
                       "spec": {"ingressCa": true}});
    api.patch(&shop, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    for who in [&padmin, &pmember, &pviewer] {
        let answer = login(who).await.expect(Method::GET, &path, None, 200).await;
        assert_eq!(answer["certificate"], ca, "{answer}");
        assert_eq!(answer["subject"], "CN=Attack test CA");
        assert_eq!(answer["not_after"], "2040-01-01T00:00:00Z");
        assert_eq!(answer["secret"], "kubenest-ingress-ca");
        assert_no_key("GET", &answer.to_string(), &secret);
    }
    for who in [&other, &nobody] {
        assert_eq!(login(who).await.get(&path).await.0.as_u16(), 404, "{who}");
    }
    let view = admin.get(&format!("/api/v1/projects/{shop_id}")).await.1;
    assert_eq!(view["ingress_ca"], true, "{view}");

    // An App whose ingress takes its certificate from the CA keeps it: the removal names it.
    let mut app = web_app(&shop_id, "storefront", "shop:1");
    app["components"][0]["workload_spec"]["ingress"] =
        json!({"host": "shop.example.test", "tls": true});
    admin
        .expect(Method::POST, "/api/v1/apps", Some(app), 202)
        .await;
    let mut own = web_app(&shop_id, "own-cert", "shop:1");
    own["components"][0]["workload_spec"]["ingress"] =
        json!({"host": "own.example.test", "tls": true, "tls_secret": "own-cert"});
    admin
        .expect(Method::POST, "/api/v1/apps", Some(own), 202)
        .await;
    let refused = admin.expect(Method::DELETE, &path, None, 409).await;
    assert_eq!(refused["code"], "ingress_ca_in_use", "{refused}");
    let message = refused["detail"].as_str().unwrap();
    assert!(message.contains("storefront (web)"), "{message}");
    assert!(!message.contains("own-cert"), "{message}");
    // A member cannot remove it either way, nor learn which Apps use it.
    let member = login(&pmember).await;
    let (status, answer) = member.call(Method::DELETE, &path, None).await;
    assert_eq!(status.as_u16(), 403, "{answer}");
    assert!(!answer.to_string().contains("storefront"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_ca_that_is_no_usable_ca_is_refused_naming_its_field_and_never_quoting_the_key()
{
    let (org, shop_id, shop, users) = setting().await;
    let admin = Client::login(0, &users[0], PASSWORD).await;
    let path = format!("/api/v1/projects/{shop_id}/ingress-ca");
    let key = KeyPair::generate().unwrap();
    let other = KeyPair::generate().unwrap();
    let pem = key.serialize_pem();
    let good = certificate(&key, true, 2024, 2040);
    let big = format!("{}{pem}", "#".repeat(16 * 1024));
    let cases = [
        ("garbage".to_owned(), pem.clone(), "certificate"),
        (
            good.replace("-----END CERTIFICATE-----", ""),
            pem.clone(),
            "certificate",
        ),
        (format!("{good}{good}"), pem.clone(), "certificate"),
        (pem.clone(), pem.clone(), "certificate"),
        (
            certificate(&key, false, 2024, 2040),
            pem.clone(),
            "certificate",
        ),
        (
            certificate(&key, true, 2019, 2020),
            pem.clone(),
            "certificate",
        ),
        (
            certificate(&key, true, 2090, 2095),
            pem.clone(),
            "certificate",
        ),
        (good.clone(), other.serialize_pem(), "private_key"),
        (good.clone(), "not a key".to_owned(), "private_key"),
        (good.clone(), format!("{pem}{pem}"), "private_key"),
        (good.clone(), good.clone(), "private_key"),
        (good.clone(), big, "private_key"),
    ];
    let secrets = [key_lines(&pem), key_lines(&other.serialize_pem())].concat();
    for (certificate, private_key, field) in cases {
        let body = json!({"certificate": certificate, "private_key": private_key});
        let refused = admin.expect(Method::PUT, &path, Some(body), 422).await;
        assert_eq!(refused["field"], field, "{refused}");
        assert_no_key("a refusal", &refused.to_string(), &secrets);
    }
    // Unknown fields are refused, and so is a body without the key.
    let extra = json!({"certificate": good, "private_key": pem, "ca_chain": good});
    let refused = admin.expect(Method::PUT, &path, Some(extra), 400).await;
    assert_eq!(refused["field"], "ca_chain", "{refused}");
    assert_no_key("a refusal", &refused.to_string(), &secrets);
    admin
        .expect(Method::PUT, &path, Some(json!({"certificate": good})), 400)
        .await;
    let (project, text) = stored(&org, &shop).await;
    assert!(!project.spec.ingress_ca);
    assert_no_key("the Project", &text, &secrets);
}
