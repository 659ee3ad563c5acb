//! A kubectl write names its real author in the history, whatever its annotations claim, and
//! every path is audited; the webhooks refuse callers without the kube-apiserver's certificate.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubectl_write_names_its_real_author_in_the_history_and_every_path_is_audited() {
    let (org, project, session, id) = setting("actor").await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();
    let admin = Client::admin().await;
    let me = session.get("/api/v1/me").await.1["username"]
        .as_str()
        .unwrap()
        .to_owned();

    // She claims to be the API and the admin; the stamp says who she is.
    let mut object = app_object(
        "forged",
        project_name,
        json!([{"name": "web", "workload": {"image": "shop:1", "port": 8080}}]),
    );
    object.metadata.annotations = Some(
        [
            ("kubenest.io/actor".to_owned(), common::ADMIN.to_owned()),
            ("kubenest.io/actor-path".to_owned(), "rest".to_owned()),
        ]
        .into(),
    );
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &namespace);
    let params = PostParams {
        field_manager: Some("kubenest-apiserver".into()),
        ..PostParams::default()
    };
    let stored = apps.create(&params, &object).await.unwrap();
    let annotations = stored.metadata.annotations.unwrap();
    assert_eq!(annotations["kubenest.io/actor"], me);
    assert_eq!(annotations["kubenest.io/actor-path"], "kubectl");

    // The history's deployment row names her.
    let uid = stored.metadata.uid.unwrap();
    let history = format!("/api/v1/apps/{uid}/deployments");
    let mut actor = Value::Null;
    eventually("the deployment is recorded", 60, async || {
        let (status, body) = admin.get(&history).await;
        actor = body[0]["actor"].clone();
        status == 200 && !actor.is_null()
    })
    .await;
    assert_eq!(actor, me.as_str());

    // A GitOps engine's field manager is the gitops path.
    let gitops = PatchParams::apply("kustomize-controller").force();
    let applied = json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": "from-git"},
        "spec": {"project": project_name, "components": [
            {"name": "web", "workload": {"image": "shop:1"}}]},
    });
    let stored = apps
        .patch("from-git", &gitops, &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(stored.annotations()["kubenest.io/actor-path"], "gitops");

    // A refused kubectl write, a REST write and a kubectl delete are in the log too.
    let bad = app_object(
        "bad",
        project_name,
        json!([{"name": "db", "addon": {"definition": "nosuchdb"}}]),
    );
    apps.create(&PostParams::default(), &bad).await.unwrap_err();
    session
        .expect(
            Method::POST,
            &format!("/api/v1/apps/{uid}/pause"),
            None,
            202,
        )
        .await;
    apps.delete("from-git", &Default::default()).await.unwrap();

    let audit = format!("/api/v1/orgs/{org}/audit");
    let page = admin
        .expect(Method::GET, &format!("{audit}?actor={me}"), None, 200)
        .await;
    let entries: Vec<(String, String, String, String)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
                e["resource_name"].as_str().unwrap().to_owned(),
                e["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("kubectl", "apps.delete", "from-git", "succeeded"),
        (
            "rest",
            "POST /api/v1/apps/{id}/pause",
            uid.as_str(),
            "succeeded",
        ),
        ("kubectl", "apps.create", "bad", "refused"),
        ("gitops", "apps.create", "from-git", "succeeded"),
        ("kubectl", "apps.create", "forged", "succeeded"),
    ];
    let expected: Vec<(String, String, String, String)> = expected
        .iter()
        .map(|(a, b, c, d)| ((*a).into(), (*b).into(), (*c).into(), (*d).into()))
        .collect();
    assert_eq!(entries, expected, "{page}");
    assert!(
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["actor_id"] == id.as_str()),
        "{page}"
    );

    // Paged and filtered; only organization admins read it.
    let first = admin
        .expect(
            Method::GET,
            &format!("{audit}?actor={me}&limit=2"),
            None,
            200,
        )
        .await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let token = first["continue"].as_str().unwrap();
    let second = admin
        .expect(
            Method::GET,
            &format!("{audit}?actor={me}&limit=2&continue={token}"),
            None,
            200,
        )
        .await;
    assert_eq!(second["items"][0]["resource_name"], "bad", "{second}");
    let refused = admin
        .expect(Method::GET, &format!("{audit}?outcome=refused"), None, 200)
        .await;
    assert!(
        refused["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["outcome"] == "refused"),
        "{refused}"
    );
    let (status, body) = admin.get(&format!("{audit}?continue=abc")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "continue");
    let (status, body) = admin.get(&format!("{audit}?path=ftp")).await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (422, Some("path"))
    );
    let (status, _) = session.get(&audit).await;
    assert_eq!(status, 403);

    // Another member deletes the App with kubectl: the delete row names them, not the last
    // writer whose stamp the App still carries.
    let other = user(&admin, "other").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/orgs/{org}/members"),
            Some(json!({"user": other, "role": "member"})),
            200,
        )
        .await;
    let other_id = user_id(&other).await;
    let theirs: Api<App> = Api::namespaced(as_user(&other_id).await, &namespace);
    eventually("the other member's binding", 30, async || {
        theirs.delete("forged", &Default::default()).await.is_ok()
    })
    .await;
    let mut rows = Value::Null;
    eventually("the delete is recorded", 60, async || {
        rows = admin.get(&history).await.1;
        rows.as_array()
            .is_some_and(|r| r.iter().any(|d| d["operation"] == "delete"))
    })
    .await;
    let delete = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["operation"] == "delete")
        .unwrap();
    assert_eq!(delete["actor"], other.as_str(), "{rows}");
}

/// A forged AdmissionReview: `who` creates an App in `namespace` whose annotations claim the
/// platform admin wrote it through kubectl.
fn forged_review(namespace: &str, project: &str, who: &str, name: &str) -> Value {
    let gvk = json!({"group": "kubenest.io", "version": "v1alpha1", "kind": "App"});
    let gvr = json!({"group": "kubenest.io", "version": "v1alpha1", "resource": "apps"});
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uuid::Uuid::new_v4().to_string(),
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name, "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": who},
            "object": {
                "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
                "metadata": {"name": name, "namespace": namespace, "annotations": {
                    "kubenest.io/actor": common::ADMIN, "kubenest.io/actor-path": "kubectl"}},
                "spec": {"project": project, "components": [
                    {"name": "web", "workload": {"image": "shop:1"}}]},
            },
            "oldObject": null, "dryRun": false,
        },
    })
}

/// The audit rows of `org` about `name`: (actor, action).
async fn audit_rows(admin: &Client, org: &str, name: &str) -> Vec<(String, String)> {
    let page = admin
        .expect(
            Method::GET,
            &format!("/api/v1/orgs/{org}/audit?limit=200"),
            None,
            200,
        )
        .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["resource_name"] == name)
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The webhooks take reviews only from the kube-apiserver: a caller without its client
/// certificate is refused in the TLS handshake and no audit row is written; and a review's
/// actor is the request's user, never the actor the object's annotations claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhooks_refuse_callers_without_the_api_servers_certificate_and_name_the_real_user() {
    let (org, project, session, id) = setting("hook").await;
    let me = session.get("/api/v1/me").await.1["username"]
        .as_str()
        .unwrap()
        .to_owned();
    let admin = Client::admin().await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();
    let validate = format!("{}/admission/validate", plane().admission_url);
    let who = kubenest_crds::common::kubernetes_user(&id);

    // Anyone on the network: TLS, but no client certificate.
    let stranger = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let review = forged_review(&namespace, project_name, &who, "forged-review");
    let refused = stranger.post(&validate).json(&review).send().await;
    assert!(refused.is_err(), "{refused:?}");
    // Stamped by a client certificate of another CA: refused alike.
    let other = rcgen::generate_simple_self_signed(vec!["intruder".to_owned()]).unwrap();
    let pem = format!("{}{}", other.cert.pem(), other.signing_key.serialize_pem());
    let intruder = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let refused = intruder.post(&validate).json(&review).send().await;
    assert!(refused.is_err(), "{refused:?}");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(audit_rows(&admin, &org, "forged-review").await, vec![]);

    // The kube-apiserver's own certificate gets through; the row names the request's user.
    let client = &plane().webhook_client;
    let pem = format!(
        "{}{}",
        std::fs::read_to_string(&client.cert).unwrap(),
        std::fs::read_to_string(&client.key).unwrap()
    );
    let apiserver = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let answer = apiserver
        .post(&validate)
        .json(&review)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let rows = audit_rows(&admin, &org, "forged-review").await;
    assert_eq!(rows, vec![(me, "apps.create".to_owned())]);
}
