//! The REST API end to end with real parts only: the API server, every controller, the history
//! in PostgreSQL and a hub replica on a management kube-apiserver, and the real agent on a
//! workload cluster with kwok nodes, installed with the token from the API's registration
//! response. Through REST alone: register, project, the reference App Running, a component
//! secret set and removed on the cluster, a change and a rollback, all in the history.

use crate::common;

use std::time::Duration;

use crate::common::eventually;
use crate::common::rest::Rest;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kubenest_store::{DatabaseUrl, History};
use reqwest::Method;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_rest_alone_an_app_runs_gets_its_secret_changes_and_rolls_back() {
    let env = kubenest_testkit::shared().await.unwrap();
    let (mgmt, east) = (env.management().unwrap(), env.cluster("east").unwrap());
    let client = mgmt.client().await.unwrap();
    kubenest_controllers::ensure_crds(&client).await.unwrap();
    kubenest_controllers::rbac::ensure_cluster_roles(&client)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    common::system_namespace(&client).await;
    let database = env
        .postgres()
        .unwrap()
        .fresh_database("api-e2e")
        .await
        .unwrap();
    let url = DatabaseUrl::new(database.url.clone());

    let hub = common::Hub::prepare(mgmt);
    let (hub_url, signer) = (hub.url.clone(), hub.signer.clone());
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    hub.start(shutdown.clone());
    tokio::spawn(kubenest_controllers::run::run(
        kubenest_controllers::run::Config {
            client: client.clone(),
            history: History::connect(&url, 4).await.unwrap(),
            hub_urls: vec![hub_url.clone()],
            signer: signer.clone(),
            session_namespace: common::SYSTEM.into(),
            system_namespace: common::SYSTEM.into(),
            heartbeat_window: chrono::Duration::seconds(90),
        },
        shutdown.clone(),
    ));
    common::postgres_definition(&client).await;

    // The API server, with a hub session of its own for component secrets.
    let rest = Rest::start(
        &client,
        &url,
        &hub_url,
        &signer,
        "admin-password-e2e",
        &shutdown,
    )
    .await;

    // Register the cluster and install its agent with the response's token.
    let org = format!("rest-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    rest.expect(
        Method::POST,
        "/api/v1/orgs",
        Some(json!({"name": org, "display_name": "REST"})),
        201,
    )
    .await;
    let registration = rest
        .expect(
            Method::POST,
            &format!("/api/v1/orgs/{org}/clusters"),
            Some(json!({"name": "east"})),
            201,
        )
        .await;
    let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
    let token = registration["connection_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let bare = common::bare_repository();
    let agent = common::agent_config(
        east,
        &hub_url,
        token,
        &cluster_id,
        &org,
        &bare,
        "kubenest-agent-rest",
    )
    .await;
    tokio::spawn(kubenest_agent::run(agent, shutdown.clone()));
    eventually("the cluster connected", LONG, async || {
        rest.get(&format!("/api/v1/clusters/{cluster_id}")).await["state"] == "connected"
    })
    .await;
    let cluster = rest.get(&format!("/api/v1/clusters/{cluster_id}")).await;
    eventually("heartbeat capacity", LONG, async || {
        rest.get(&format!("/api/v1/clusters/{cluster_id}")).await["node_count"].as_u64() > Some(0)
    })
    .await;
    assert!(cluster["last_heartbeat"].is_string() || cluster["state"] == "connected");

    let target_ns = format!("shop-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    let project = rest
        .expect(
            Method::POST,
            &format!("/api/v1/orgs/{org}/projects"),
            Some(json!({"name": "shop", "cluster_id": cluster_id, "namespace": target_ns})),
            201,
        )
        .await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    eventually("the project Ready", LONG, async || {
        rest.get(&format!("/api/v1/projects/{project_id}")).await["phase"] == "Ready"
    })
    .await;

    let created = rest
        .expect(Method::POST, "/api/v1/apps", Some(json!({
            "project_id": project_id, "name": "web",
            "components": [
                {"name": "db", "type": "addon", "addon_spec": {"definition": "postgres"}},
                {"name": "web", "type": "workload", "workload_spec": {
                    "image": "nginx:1.27", "replicas": 2, "port": 8080,
                    "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}]}}
            ]})), 202)
        .await;
    assert_eq!(created["phase"], "Pending");
    let app_id = created["id"].as_str().unwrap().to_owned();
    let app_path = format!("/api/v1/apps/{app_id}");
    let running = async |revision: Option<&str>| {
        eventually("the App Running", LONG, async || {
            let app = rest.get(&app_path).await;
            app["phase"] == "Running"
                && app["observed_revision"] == app["revision"]
                && revision.is_none_or(|r| app["revision"] != r)
        })
        .await;
        rest.get(&app_path).await
    };
    let first = running(None).await;
    assert_eq!(
        first["component_status"].as_array().unwrap().len(),
        2,
        "{first}"
    );

    // A component secret: set on the cluster, confirmed, never echoed; then removed.
    let secret_path = format!("{app_path}/components/web/secret");
    let answer = rest
        .expect(
            Method::PUT,
            &secret_path,
            Some(json!({"values": {"API_KEY": "s3cret-value"}})),
            200,
        )
        .await;
    assert_eq!(answer, json!({"component": "web", "keys": ["API_KEY"]}));
    let east_client = east.client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(east_client.clone(), &target_ns);
    let secret = secrets.get("web-web-env").await.unwrap();
    assert_eq!(secret.data.unwrap()["API_KEY"].0, b"s3cret-value");
    let deployment = Api::<Deployment>::namespaced(east_client.clone(), &target_ns)
        .get("web-web")
        .await
        .unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let env_from = container.env_from.clone().unwrap();
    assert_eq!(env_from[0].secret_ref.as_ref().unwrap().name, "web-web-env");
    rest.expect(
        Method::DELETE,
        &format!("{secret_path}?keys=API_KEY"),
        None,
        200,
    )
    .await;
    let secret = secrets.get("web-web-env").await.unwrap();
    assert!(!secret.data.unwrap_or_default().contains_key("API_KEY"));

    // The project's registry credentials: a dockerconfigjson Secret on the cluster that the
    // namespace pulls with, named (never held) by the Project; bad input refused by field.
    let registry_path = format!("/api/v1/projects/{project_id}/registry-credentials");
    let refused = rest
        .expect(
            Method::PUT,
            &registry_path,
            Some(json!({"registries": {"https://registry.example.test": {"username": "ci", "password": "p"}}})),
            422,
        )
        .await;
    assert_eq!(refused["field"], "registries.https://registry.example.test");
    let answer = rest
        .expect(
            Method::PUT,
            &registry_path,
            Some(json!({"registries": {"registry.example.test:5000": {
                "username": "ci", "password": "registry-s3cret"}}})),
            200,
        )
        .await;
    assert_eq!(
        answer,
        json!({"project": "shop", "secret": "kubenest-registry",
               "registries": ["registry.example.test:5000"]})
    );
    let pull = secrets.get("kubenest-registry").await.unwrap();
    assert_eq!(
        pull.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    let config: serde_json::Value =
        serde_json::from_slice(&pull.data.unwrap()[".dockerconfigjson"].0).unwrap();
    assert_eq!(
        config["auths"]["registry.example.test:5000"]["username"],
        "ci"
    );
    assert_eq!(
        rest.get(&format!("/api/v1/projects/{project_id}")).await["registry_secret"],
        "kubenest-registry"
    );
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(east_client.clone(), &target_ns);
    let pulls_with = async || {
        accounts
            .get("default")
            .await
            .unwrap()
            .image_pull_secrets
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
    };
    eventually(
        "the namespace pulls with the registry Secret",
        LONG,
        async || pulls_with().await == ["kubenest-registry"],
    )
    .await;
    let projects = Api::<kubenest_crds::project::Project>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        !serde_json::to_string(&projects.items)
            .unwrap()
            .contains("registry-s3cret")
    );
    rest.expect(Method::DELETE, &registry_path, None, 200).await;
    assert!(
        secrets
            .get_opt("kubenest-registry")
            .await
            .unwrap()
            .is_none()
    );
    eventually("the namespace pulls with nothing", LONG, async || {
        pulls_with().await.is_empty()
    })
    .await;
    // Nothing left to remove: a 404, once the API server sees the Project name none.
    eventually("a second removal answered 404", LONG, async || {
        rest.call(Method::DELETE, &registry_path, None).await.0 == 404
    })
    .await;

    // The project's ingress CA: a kubernetes.io/tls Secret on the cluster, written as
    // credentials (no chart pod may read it); the Project records that it has one and its
    // certificate, never the key; removed again through the API.
    let ca_path = format!("/api/v1/projects/{project_id}/ingress-ca");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "shop ingress CA");
    let ca_cert = params.self_signed(&ca_key).unwrap().pem();
    let ca_key_pem = ca_key.serialize_pem();
    let answer = rest
        .expect(
            Method::PUT,
            &ca_path,
            Some(json!({"certificate": ca_cert, "private_key": ca_key_pem})),
            200,
        )
        .await;
    assert!(!answer.to_string().contains("PRIVATE KEY"), "{answer}");
    let ca = secrets
        .get(kubenest_contracts::INGRESS_CA_SECRET)
        .await
        .unwrap();
    assert_eq!(ca.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(
        ca.metadata.labels.unwrap_or_default()["kubenest.io/credentials"],
        "true"
    );
    let key_on_cluster = String::from_utf8(ca.data.unwrap()["tls.key"].0.clone()).unwrap();
    assert!(key_on_cluster.contains("PRIVATE KEY"));
    let read = rest.get(&ca_path).await;
    assert!(read.to_string().contains("BEGIN CERTIFICATE"), "{read}");
    assert_eq!(
        rest.get(&format!("/api/v1/projects/{project_id}")).await["ingress_ca"],
        true
    );
    let projects = Api::<kubenest_crds::project::Project>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    let body = key_on_cluster
        .lines()
        .find(|l| !l.starts_with("-----"))
        .unwrap()
        .to_owned();
    assert!(
        !serde_json::to_string(&projects.items)
            .unwrap()
            .contains(&body),
        "the key is never on the Project"
    );
    rest.expect(Method::DELETE, &ca_path, None, 200).await;
    assert!(
        secrets
            .get_opt(kubenest_contracts::INGRESS_CA_SECRET)
            .await
            .unwrap()
            .is_none()
    );

    // A Git workload's repository credentials: only a Git workload has them; they land in its
    // Git Secret (one kind at a time), which nothing but its build mounts.
    rest.expect(
        Method::PUT,
        &format!("{app_path}/components/web/git-credentials"),
        Some(json!({"username": "ci", "password": "t0ken"})),
        409,
    )
    .await;
    let built = rest
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(json!({
            "project_id": project_id, "name": "built",
            "components": [{"name": "site", "type": "workload", "workload_spec": {
                "git": {"repository": "https://git.example.test/site.git", "ref": "main",
                        "mode": "dockerfile"}, "replicas": 1, "port": 8080}}]})),
            202,
        )
        .await;
    let built_path = format!("/api/v1/apps/{}", built["id"].as_str().unwrap());
    let credentials = format!("{built_path}/components/site/git-credentials");
    let answer = rest
        .expect(
            Method::PUT,
            &credentials,
            Some(json!({"username": "ci", "password": "git-t0ken"})),
            200,
        )
        .await;
    assert_eq!(answer, json!({"component": "site", "kind": "https"}));
    let git_secret = secrets.get("built-site-git").await.unwrap().data.unwrap();
    assert_eq!(git_secret["password"].0, b"git-t0ken");
    assert_eq!(git_secret["ssh-privatekey"].0, b"");
    let refused = rest
        .expect(
            Method::PUT,
            &credentials,
            Some(json!({"ssh_private_key": "not a key", "known_hosts": "x"})),
            422,
        )
        .await;
    assert_eq!(refused["field"], "ssh_private_key");
    rest.expect(Method::DELETE, &credentials, None, 200).await;
    assert!(secrets.get_opt("built-site-git").await.unwrap().is_none());
    rest.expect(Method::DELETE, &built_path, None, 202).await;

    // A change is a new deployment; a rollback restores the first and is recorded as such.
    let first_revision = first["revision"].as_str().unwrap().to_owned();
    let mut components = first["components"].clone();
    components[1]["workload_spec"]["image"] = json!("nginx:1.28");
    rest.expect(
        Method::PATCH,
        &app_path,
        Some(json!({"components": components})),
        202,
    )
    .await;
    let changed = running(Some(&first_revision)).await;
    assert_eq!(
        changed["components"][1]["workload_spec"]["image"],
        "nginx:1.28"
    );
    let history = rest.get(&format!("{app_path}/deployments")).await;
    let rows = history.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{history}");
    assert_eq!(
        (rows[0]["operation"].as_str(), rows[0]["actor"].as_str()),
        (Some("update"), Some("admin"))
    );
    assert_eq!(rows[1]["operation"], "create");
    assert!(
        rows[0]["diff"].to_string().contains("nginx:1.28"),
        "{}",
        rows[0]["diff"]
    );
    let first_deployment = rows[1]["id"].as_str().unwrap().to_owned();
    rest.expect(
        Method::POST,
        &format!("{app_path}/rollback"),
        Some(json!({"deployment_id": first_deployment})),
        202,
    )
    .await;
    let mut polls = 0;
    eventually("the rollback recorded and running", LONG, async || {
        let app = rest.get(&app_path).await;
        polls += 1;
        if polls % 100 == 0 {
            eprintln!("waiting for the rollback: {app}");
        }
        app["components"][1]["workload_spec"]["image"] == "nginx:1.27"
            && app["phase"] == "Running"
            && app["observed_revision"] == app["revision"]
    })
    .await;
    let history = rest.get(&format!("{app_path}/deployments")).await;
    let rows = history.as_array().unwrap();
    assert_eq!(rows[0]["operation"], "rollback", "{history}");
    assert_eq!(rows[0]["rollback_of"], first_deployment);
    eventually("the rollback succeeded", LONG, async || {
        rest.get(&format!("{app_path}/deployments")).await[0]["result"] == "succeeded"
    })
    .await;
}
