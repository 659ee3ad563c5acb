//! One door: an object written with kubectl is refused for the same reasons, naming the same
//! field, as the same object sent to the REST API; a kubectl write is stamped with the identity
//! that really made it, whatever it claims; and every mutation by either path is in the
//! organization's audit log. Against a real management cluster whose kube-apiserver calls the
//! API server's admission webhooks over TLS, real PostgreSQL and the real controllers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};

use common::{
    Client, PASSWORD, agent_took_namespace, cluster, eventually, org, plane, project, user,
};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubenest_apiserver::routes::api_field;
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::project::Project;
use reqwest::Method;
use serde_json::{Value, json};

/// A kube client acting as the Kubernetes user of kubenest user id `id`.
async fn as_user(id: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&plane().kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(kubenest_crds::common::kubernetes_user(id));
    kube::Client::try_from(config).unwrap()
}

/// The REST refusal and the kubectl one of the same object: (status, code, field, reason),
/// the kubectl field turned into the API's spelling.
#[derive(Debug, PartialEq)]
struct Refusal {
    status: u16,
    code: String,
    field: Option<String>,
    reason: String,
}

fn rest_refusal(status: reqwest::StatusCode, body: &Value) -> Refusal {
    Refusal {
        status: status.as_u16(),
        code: body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        field: body["error"]["field"].as_str().map(str::to_owned),
        reason: body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

fn kube_refusal(error: kube::Error) -> Refusal {
    let kube::Error::Api(status) = error else {
        panic!("not a refusal: {error}");
    };
    let cause = status.details.as_ref().and_then(|d| d.causes.first());
    let reason = match cause {
        Some(cause) => cause.message.clone(),
        None => status
            .message
            .split_once("denied the request: ")
            .map(|(_, m)| m.to_owned())
            .unwrap_or(status.message.clone()),
    };
    Refusal {
        status: status.code,
        code: status.reason.clone(),
        field: cause.map(|c| api_field(&c.field)),
        reason,
    }
}

/// An organization with member `who` (a new user), a cluster and a Ready project; returns
/// (org, project, the member's session, the member's id).
async fn setting(prefix: &str) -> (String, Value, Client, String) {
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let who = user(&admin, prefix).await;
    let org = org(&admin, prefix, json!([{"user": who, "role": "member"}])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    agent_took_namespace(&admin, &kube, &org, &project).await;
    let session = Client::login(0, &who, PASSWORD).await;
    let id = session.get("/api/v1/me").await.1["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The member's RoleBinding lets their Kubernetes user write in the organization.
    let kube = plane().kube().await;
    eventually("the member's RoleBinding", 30, async || {
        common::org_binding_has(&kube, &org, "kubenest-org-member", &id).await
    })
    .await;
    (org, project, session, id)
}

fn app_object(name: &str, project: &str, components: Value) -> App {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name},
        "spec": {"project": project, "components": components},
    }))
    .unwrap()
}

/// Apps the hub's `app.deploy` schema would refuse once built: each is refused at both doors
/// with its field, never accepted to sit `Pending` with `InvalidCommand`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_hub_would_refuse_is_refused_at_both_doors_with_the_field() {
    let (org, project, session, id) = setting("hubdoor").await;
    let project_name = project["name"].as_str().unwrap();
    let project_id = project["id"].as_str().unwrap();
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &format!("org-{org}"));
    let web = |spec: Value| {
        let mut workload = json!({"image": "shop:1", "port": 8080});
        workload
            .as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        workload
    };
    let cases = [
        (
            json!({"ingress": {"host": "Bad Host!", "path": "/"}}),
            json!({"ingress": {"host": "Bad Host!", "path": "/"}}),
            "components[0].workload_spec.ingress.host",
        ),
        (
            json!({"resources": {"cpu_request": "lots"}}),
            json!({"resources": {"cpuRequest": "lots"}}),
            "components[0].workload_spec.resources.cpu_request",
        ),
        (
            json!({"resources": {"memory_limit": "1 banana"}}),
            json!({"resources": {"memoryLimit": "1 banana"}}),
            "components[0].workload_spec.resources.memory_limit",
        ),
        (
            json!({"health_check": {"path": "/", "period_seconds": 0}}),
            json!({"healthCheck": {"path": "/", "periodSeconds": 0}}),
            "components[0].workload_spec.health_check.period_seconds",
        ),
    ];
    for (rest_spec, crd_spec, field) in cases {
        let (status, body) = session
            .post(
                "/api/v1/apps",
                json!({"project_id": project_id, "name": "shop", "components": [
                    {"name": "web", "type": "workload", "workload_spec": web(rest_spec)}]}),
            )
            .await;
        let rest = rest_refusal(status, &body);
        assert_eq!(
            (rest.status, rest.field.as_deref()),
            (422, Some(field)),
            "{body}"
        );
        let object = app_object(
            "shop",
            project_name,
            json!([{"name": "web", "workload": web(crd_spec)}]),
        );
        let kube = kube_refusal(
            apps.create(&PostParams::default(), &object)
                .await
                .unwrap_err(),
        );
        assert_eq!((kube.status, kube.field.as_deref()), (422, Some(field)));
    }
    // A chart version that is no exact version, for an addon component.
    Api::<kubenest_crds::addon::AddonDefinition>::namespaced(plane().kube().await, common::SYSTEM)
        .patch(
            "hubdoordb",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "hubdoordb"},
                "spec": {"displayName": "Hub door DB",
                    "chart": {"repository": "charts/addons", "name": "hubdoordb", "version": "1.0.0"},
                    "valuesSchema": {"type": "object", "additionalProperties": false,
                        "properties": {"memory": {"type": "string"}}},
                    "exports": {"host": "{release}.{namespace}.svc"}}
            })),
        )
        .await
        .unwrap();
    let (status, body) = session
        .post(
            "/api/v1/apps",
            json!({"project_id": project_id, "name": "shop", "components": [
                {"name": "db", "type": "addon",
                 "addon_spec": {"definition": "hubdoordb", "version": "latest"}}]}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    assert_eq!(
        (rest.status, rest.field.as_deref()),
        (422, Some("components[0].addon_spec.version")),
        "{body}"
    );
    // An addon component's values against its definition's schema, at both doors: a
    // `replicas` the chart does not take.
    let (status, body) = session
        .post(
            "/api/v1/apps",
            json!({"project_id": project_id, "name": "shop", "components": [
                {"name": "db", "type": "addon",
                 "addon_spec": {"definition": "hubdoordb", "values": {"replicas": 2}}}]}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    assert_eq!(
        (rest.status, rest.field.as_deref()),
        (422, Some("components[0].addon_spec.values")),
        "{body}"
    );
    let object = app_object(
        "shop",
        project_name,
        json!([{"name": "db", "addon": {"definition": "hubdoordb", "values": {"replicas": 2}}}]),
    );
    let kube = kube_refusal(
        apps.create(&PostParams::default(), &object)
            .await
            .unwrap_err(),
    );
    assert_eq!(kube, rest);
    // Nothing was written by any of them.
    assert!(apps.get_opt("shop").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_bad_objects_are_refused_alike_through_rest_and_kubectl() {
    let (org, project, session, id) = setting("doors").await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();
    let project_id = project["id"].as_str().unwrap();
    let kubectl = as_user(&id).await;
    let apps: Api<App> = Api::namespaced(kubectl.clone(), &namespace);

    // An export that no addon of the App publishes.
    let (status, body) = session
        .post(
            "/api/v1/apps",
            json!({"project_id": project_id, "name": "shop", "components": [
                {"name": "web", "type": "workload", "workload_spec": {"image": "shop:1",
                 "env": [{"name": "DATABASE_URL",
                          "export_ref": {"component": "db", "export": "dsn"}}]}}]}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    let object = app_object(
        "shop",
        project_name,
        json!([{"name": "web", "workload": {"image": "shop:1",
                "env": [{"name": "DATABASE_URL",
                         "exportRef": {"component": "db", "export": "dsn"}}]}}]),
    );
    let error = apps
        .create(&PostParams::default(), &object)
        .await
        .unwrap_err();
    let kube = kube_refusal(error);
    assert_eq!(rest.status, 422, "{body}");
    assert!(rest.field.is_some(), "{body}");
    assert_eq!(kube, rest);

    // An addon the catalog does not hold.
    let (status, body) = session
        .post(
            "/api/v1/apps",
            json!({"project_id": project_id, "name": "shop", "components": [
                {"name": "db", "type": "addon", "addon_spec": {"definition": "nosuchdb"}}]}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    let object = app_object(
        "shop",
        project_name,
        json!([{"name": "db", "addon": {"definition": "nosuchdb"}}]),
    );
    let kube = kube_refusal(
        apps.create(&PostParams::default(), &object)
            .await
            .unwrap_err(),
    );
    assert_eq!(rest.status, 422, "{body}");
    assert_eq!(kube, rest);

    // A project namespace that belongs to Kubernetes (the member is a cluster writer through
    // the organization).
    let cluster_id = session
        .get(&format!("/api/v1/projects/{project_id}"))
        .await
        .1["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cluster_name = Api::<Project>::namespaced(plane().kube().await, &namespace)
        .get(project_name)
        .await
        .unwrap()
        .spec
        .cluster;
    let (status, body) = session
        .post(
            &format!("/api/v1/orgs/{org}/projects"),
            json!({"name": "sys", "cluster_id": cluster_id, "namespace": "kube-system"}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    let object: Project = serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "Project",
        "metadata": {"name": "sys"},
        "spec": {"cluster": cluster_name, "namespace": "kube-system"},
    }))
    .unwrap();
    let kube = kube_refusal(
        Api::<Project>::namespaced(kubectl.clone(), &namespace)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_err(),
    );
    assert_eq!(rest.status, 422, "{body}");
    assert_eq!(kube, rest);

    // A chart version range for a standalone addon (the definition is the catalog's).
    let catalog = plane().kube().await;
    Api::<kubenest_crds::addon::AddonDefinition>::namespaced(catalog, common::SYSTEM)
        .patch(
            "doorsdb",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "doorsdb"},
                "spec": {"displayName": "Doors DB",
                    "chart": {"repository": "charts/addons", "name": "doorsdb", "version": "1.0.0"},
                    "valuesSchema": {"type": "object", "additionalProperties": false,
                        "properties": {"memory": {"type": "string"}}},
                    "exports": {"host": "{release}.{namespace}.svc"}}
            })),
        )
        .await
        .unwrap();
    let addons: Api<AddonInstance> = Api::namespaced(kubectl.clone(), &namespace);
    for (rest_body, crd_spec) in [
        (json!({"version": "^1.0"}), json!({"version": "^1.0"})),
        (
            json!({"values": {"memory": 64}}),
            json!({"values": {"memory": 64}}),
        ),
    ] {
        let mut body = json!({"project_id": project_id, "name": "cache", "definition": "doorsdb"});
        body.as_object_mut()
            .unwrap()
            .extend(rest_body.as_object().unwrap().clone());
        let (status, answer) = session.post("/api/v1/addon-instances", body).await;
        let rest = rest_refusal(status, &answer);
        let mut spec = json!({"project": project_name, "definition": "doorsdb"});
        spec.as_object_mut()
            .unwrap()
            .extend(crd_spec.as_object().unwrap().clone());
        let object: AddonInstance = serde_json::from_value(json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
            "metadata": {"name": "cache"}, "spec": spec,
        }))
        .unwrap();
        let kube = kube_refusal(
            addons
                .create(&PostParams::default(), &object)
                .await
                .unwrap_err(),
        );
        assert_eq!(rest.status, 422, "{answer}");
        assert_eq!(kube, rest);
    }

    // blocked_sync: a change that piles onto an App whose `web` does not converge is a 409
    // on both paths; changing `web` (a way out) passes on both.
    let created = session
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(
                json!({"project_id": project_id, "name": "stuck", "components": [
                {"name": "web", "type": "workload", "workload_spec": {"image": "web:1"}},
                {"name": "worker", "type": "workload", "workload_spec": {"image": "worker:1"}}]}),
            ),
            202,
        )
        .await;
    let app_path = format!("/api/v1/apps/{}", created["id"].as_str().unwrap());
    let admin_apps: Api<App> = Api::namespaced(plane().kube().await, &namespace);
    let blocked = json!({"status": {"sync": {"driftDetected": true, "driftClass": "blocked_sync",
        "driftDetails": [{"resource": "Deployment/stuck-web",
                          "field": "status.conditions[Progressing]",
                          "desired": "NewReplicaSetAvailable",
                          "observed": "ProgressDeadlineExceeded"}]}}});
    admin_apps
        .patch_status("stuck", &PatchParams::default(), &Patch::Merge(&blocked))
        .await
        .unwrap();
    let components = |web: &str, worker: &str| {
        (
            json!([{"name": "web", "type": "workload", "workload_spec": {"image": web}},
                   {"name": "worker", "type": "workload", "workload_spec": {"image": worker}}]),
            json!([{"name": "web", "workload": {"image": web}},
                   {"name": "worker", "workload": {"image": worker}}]),
        )
    };
    let (rest_components, crd_components) = components("web:1", "worker:2");
    let (status, body) = session
        .call(
            Method::PATCH,
            &app_path,
            Some(json!({"components": rest_components})),
        )
        .await;
    let rest = rest_refusal(status, &body);
    let patch = json!({"spec": {"components": crd_components}});
    let kube = kube_refusal(
        apps.patch("stuck", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (rest.status, rest.code.as_str()),
        (409, "blocked_sync"),
        "{body}"
    );
    assert_eq!(kube, rest);
    let (_, crd_components) = components("web:2", "worker:1");
    let patch = json!({"spec": {"components": crd_components}});
    apps.patch("stuck", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    // The CLI a person uses says the same, field first.
    let manifest = json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": "cli", "namespace": namespace},
        "spec": {"project": project_name, "components": [
            {"name": "db", "addon": {"definition": "nosuchdb"}}]},
    });
    let bins = kubenest_testkit::Binaries::locate().unwrap();
    let mut apply = Command::new(&bins.kubectl)
        .arg(format!("--kubeconfig={}", plane().kubeconfig.display()))
        .arg(format!(
            "--as={}",
            kubenest_crds::common::kubernetes_user(&id)
        ))
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.to_string().as_bytes())
        .unwrap();
    let output = apply.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("denied the request: spec.components[0].addon.definition:"),
        "{stderr}"
    );
}

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
    assert_eq!(body["error"]["field"], "continue");
    let (status, body) = admin.get(&format!("{audit}?path=ftp")).await;
    assert_eq!(
        (status.as_u16(), body["error"]["field"].as_str()),
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
    let other_id = Client::login(0, &other, PASSWORD)
        .await
        .get("/api/v1/me")
        .await
        .1["id"]
        .as_str()
        .unwrap()
        .to_owned();
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

/// What a kubectl request of the matrix is: its name, where its object sits, the role it
/// needs, and whether only an organization-wide binding allows it (lists: Kubernetes cannot
/// filter them by project).
struct KubectlCase {
    what: &'static str,
    at: common::Level,
    needs: common::Needs,
    org_wide: bool,
}

/// Runs one request of the matrix as `kube`; Ok when Kubernetes let it through. Every write is
/// a server-side dry run: authorization, the admission policies and webhooks all decide, and
/// nothing changes.
async fn kubectl_request(
    what: &str,
    kube: &kube::Client,
    namespace: &str,
    (cluster, project, app): (&str, &str, &str),
    me: &str,
) -> Result<(), kube::Error> {
    use kube::api::{DeleteParams, ListParams};
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let clusters: Api<kubenest_crds::cluster::Cluster> = Api::namespaced(kube.clone(), namespace);
    let projects: Api<Project> = Api::namespaced(kube.clone(), namespace);
    let apps: Api<App> = Api::namespaced(kube.clone(), namespace);
    let escalate = json!({"spec": {"members": [{"user": me, "userId": me, "role": "admin"}]}});
    match what {
        "get cluster" => clusters.get(cluster).await.map(|_| ()),
        "change cluster" => clusters
            .patch(
                cluster,
                &dry,
                &Patch::Merge(json!({"spec": {"displayName": "x"}})),
            )
            .await
            .map(|_| ()),
        "make self cluster admin" => clusters
            .patch(cluster, &dry, &Patch::Merge(&escalate))
            .await
            .map(|_| ()),
        "get project" => projects.get(project).await.map(|_| ()),
        "make self project admin" => projects
            .patch(project, &dry, &Patch::Merge(&escalate))
            .await
            .map(|_| ()),
        "delete project" => projects
            .delete(
                project,
                &DeleteParams {
                    dry_run: true,
                    ..DeleteParams::default()
                },
            )
            .await
            .map(|_| ()),
        "get app" => apps.get(app).await.map(|_| ()),
        "list apps" => apps.list(&ListParams::default()).await.map(|_| ()),
        "change app" => apps
            .patch(
                app,
                &dry,
                &Patch::Merge(json!({"spec": {"progressDeadlineSeconds": 300}})),
            )
            .await
            .map(|_| ()),
        "delete app" => apps
            .delete(
                app,
                &DeleteParams {
                    dry_run: true,
                    ..DeleteParams::default()
                },
            )
            .await
            .map(|_| ()),
        "create app" => apps
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &app_object(
                    &common::unique("k"),
                    project,
                    json!([{"name": "web", "workload": {"image": "k:1"}}]),
                ),
            )
            .await
            .map(|_| ()),
        other => panic!("no request {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_at_every_scope_through_kubectl_in_two_organizations_with_escalations() {
    use common::{Level, Needs, reaches};
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let a = org(&admin, "kmatrix-a", json!([])).await;
    let b = org(&admin, "kmatrix-b", json!([])).await;
    // (cluster name, cluster id, project name, project id, app name) per organization.
    let mut objects = std::collections::HashMap::new();
    for (key, org) in [("a", &a), ("b", &b)] {
        let registration = cluster(&admin, org).await;
        let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
        let p = project(&admin, org, &cluster_id).await;
        agent_took_namespace(&admin, &kube, org, &p).await;
        let project_id = p["id"].as_str().unwrap().to_owned();
        admin
            .expect(
                Method::POST,
                "/api/v1/apps",
                Some(common::web_app(&project_id, "m", "m:1")),
                202,
            )
            .await;
        let cluster_name = Api::<Project>::namespaced(kube.clone(), &format!("org-{org}"))
            .get(p["name"].as_str().unwrap())
            .await
            .unwrap()
            .spec
            .cluster;
        objects.insert(
            key,
            (
                cluster_name,
                cluster_id,
                p["name"].as_str().unwrap().to_owned(),
                project_id,
                "m".to_owned(),
            ),
        );
    }
    let (_, cluster_a, project_a_name, project_a, _) = objects["a"].clone();
    let roles = [
        ("admin", Needs::Admin),
        ("member", Needs::Member),
        ("viewer", Needs::Viewer),
    ];
    let mut users = Vec::new();
    for (role, needs) in roles {
        for level in [Level::Org, Level::Cluster, Level::Project] {
            let name = user(&admin, &format!("k{role}-{level:?}").to_lowercase()).await;
            let path = match level {
                Level::Org => format!("/api/v1/orgs/{a}/members"),
                Level::Cluster => format!("/api/v1/clusters/{cluster_a}/members"),
                Level::Project => format!("/api/v1/projects/{project_a}/members"),
            };
            admin
                .expect(
                    Method::PUT,
                    &path,
                    Some(json!({"user": name, "role": role})),
                    200,
                )
                .await;
            let session = Client::login(0, &name, PASSWORD).await;
            let id = session.get("/api/v1/me").await.1["id"]
                .as_str()
                .unwrap()
                .to_owned();
            let client = as_user(&id).await;
            // Every one of them reaches project A once the controllers have bound the role.
            let projects: Api<Project> = Api::namespaced(client.clone(), &format!("org-{a}"));
            eventually(&format!("{name}'s binding"), 30, async || {
                projects.get(&project_a_name).await.is_ok()
            })
            .await;
            users.push((name, id, client, needs, level));
        }
    }
    let cases = [
        ("get cluster", Level::Cluster, Needs::Viewer, false),
        ("change cluster", Level::Cluster, Needs::Admin, false),
        (
            "make self cluster admin",
            Level::Cluster,
            Needs::Admin,
            false,
        ),
        ("get project", Level::Project, Needs::Viewer, false),
        (
            "make self project admin",
            Level::Project,
            Needs::Admin,
            false,
        ),
        ("delete project", Level::Project, Needs::Admin, false),
        ("get app", Level::Project, Needs::Viewer, false),
        ("list apps", Level::Org, Needs::Viewer, true),
        ("change app", Level::Project, Needs::Member, false),
        ("delete app", Level::Project, Needs::Member, false),
        ("create app", Level::Project, Needs::Member, false),
    ]
    .map(|(what, at, needs, org_wide)| KubectlCase {
        what,
        at,
        needs,
        org_wide,
    });
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (name, id, client, holds, bound) in &users {
        for (org, key) in [(&a, "a"), (&b, "b")] {
            let own = key == "a";
            let (cluster, _, project, _, app) = &objects[key];
            for case in &cases {
                let reached = if case.org_wide {
                    *bound == Level::Org
                } else {
                    reaches(*bound, case.at)
                };
                let allowed = own && reached && *holds >= case.needs;
                let result = kubectl_request(
                    case.what,
                    client,
                    &format!("org-{org}"),
                    (cluster, project, app),
                    id,
                )
                .await;
                checked += 1;
                let ok = match (&result, allowed) {
                    (Ok(()), true) => true,
                    // Refused by RBAC or by kubenest's admission policies: 403 either way.
                    (Err(kube::Error::Api(status)), false) => status.code == 403,
                    _ => false,
                };
                if !ok {
                    wrong.push(format!(
                        "{name} ({holds:?} at {bound:?}) {} in {}: {:?}, want {}",
                        case.what,
                        if own { "own org" } else { "other org" },
                        result.map_err(|e| e.to_string()),
                        if allowed { "allowed" } else { "403" }
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(checked, 9 * 2 * cases.len());
    eprintln!("kubectl matrix: {checked} requests, 0 leaks, 0 escalations");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_kept_in_git_are_not_rewritten_through_rest_and_a_cluster_manifest_survives_rotation()
 {
    let (org, project, session, member_id) = setting("git").await;
    let admin = Client::admin().await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();

    // Flux applies an App from a Kustomization (its field manager, its tracking labels).
    let flux = PatchParams::apply("kustomize-controller").force();
    let manifest = json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": "gitapp", "labels": {
            "kustomize.toolkit.fluxcd.io/name": "apps",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"project": project_name, "components": [
            {"name": "web", "workload": {"image": "shop:1", "port": 8080}}]},
    });
    let apps: Api<App> = Api::namespaced(as_user(&member_id).await, &namespace);
    let stored = apps
        .patch("gitapp", &flux, &Patch::Apply(&manifest))
        .await
        .unwrap();
    let path = format!("/api/v1/apps/{}", stored.metadata.uid.unwrap());
    let owner = "Flux Kustomization flux-system/apps";
    for (method, route, body, says) in [
        (
            Method::PATCH,
            path.clone(),
            Some(json!({"progress_deadline_seconds": 300})),
            "Change its manifest in Git",
        ),
        (
            Method::POST,
            format!("{path}/pause"),
            None,
            "Set spec.paused: true",
        ),
        (
            Method::POST,
            format!("{path}/rollback"),
            Some(json!({"deployment_id": uuid::Uuid::new_v4().to_string()})),
            "revert the commit",
        ),
        (
            Method::DELETE,
            path.clone(),
            None,
            "Remove its manifest from Git",
        ),
    ] {
        let (status, answer) = session.call(method.clone(), &route, body).await;
        assert_eq!(status, 409, "{method} {route}: {answer}");
        assert_eq!(answer["error"]["code"], "gitops_owned", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(owner) && message.contains(says),
            "{message}"
        );
    }
    // A redeploy does not fight Git (the spec stays as Git has it).
    session
        .expect(Method::POST, &format!("{path}/redeploy"), None, 202)
        .await;
    let unchanged = Api::<App>::namespaced(plane().kube().await, &namespace)
        .get("gitapp")
        .await
        .unwrap();
    assert_eq!(unchanged.spec.progress_deadline_seconds, 600);
    assert!(!unchanged.spec.paused);

    // An organization admin keeps the cluster's manifest in Git; a rotation through REST
    // raises the token version, and the manifest (still saying version 1) applies after it.
    let keeper = user(&admin, "keeper").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/orgs/{org}/members"),
            Some(json!({"user": keeper, "role": "admin"})),
            200,
        )
        .await;
    let keeper_session = Client::login(0, &keeper, PASSWORD).await;
    let keeper_id = keeper_session.get("/api/v1/me").await.1["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cluster_id = session
        .get(&format!(
            "/api/v1/projects/{}",
            project["id"].as_str().unwrap()
        ))
        .await
        .1["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let clusters: Api<kubenest_crds::cluster::Cluster> =
        Api::namespaced(as_user(&keeper_id).await, &namespace);
    let cluster_name = Api::<Project>::namespaced(plane().kube().await, &namespace)
        .get(project_name)
        .await
        .unwrap()
        .spec
        .cluster;
    let cluster_manifest = |display: &str| {
        json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": cluster_name},
            "spec": {"displayName": display, "provider": "existing", "tokenVersion": 1},
        })
    };
    eventually("the keeper's binding", 30, async || {
        clusters
            .patch(
                &cluster_name,
                &flux,
                &Patch::Apply(cluster_manifest("from git")),
            )
            .await
            .is_ok()
    })
    .await;
    let rotated = admin
        .expect(
            Method::POST,
            &format!("/api/v1/clusters/{cluster_id}/rotate-token"),
            None,
            200,
        )
        .await;
    assert_eq!(rotated["token_version"], 2, "{rotated}");
    let applied = clusters
        .patch(
            &cluster_name,
            &flux,
            &Patch::Apply(cluster_manifest("from git, again")),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.token_version, 2);
    assert_eq!(
        applied.spec.display_name.as_deref(),
        Some("from git, again")
    );
}

/// A Flux object (GitRepository, Kustomization) in Flux's namespace, by the admin.
async fn flux_apply(kind: &str, group_version: &str, name: &str, spec: Value) {
    let (group, version) = group_version.split_once('/').unwrap();
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        plane().kube().await,
        kubenest_testkit::flux::NAMESPACE,
        &resource,
    );
    let object = json!({
        "apiVersion": group_version, "kind": kind,
        "metadata": {"name": name, "namespace": kubenest_testkit::flux::NAMESPACE,
                     "annotations": {"reconcile.fluxcd.io/requestedAt": common::unique("now")}},
        "spec": spec,
    });
    api.patch(
        name,
        &PatchParams::apply("tests").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

/// The Kustomization's Ready condition: (status, message).
async fn kustomization_ready(name: &str) -> (String, String) {
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "Kustomization",
    ));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        plane().kube().await,
        kubenest_testkit::flux::NAMESPACE,
        &resource,
    );
    let object = api.get(name).await.unwrap();
    let ready = object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or(Value::Null);
    (
        ready["status"].as_str().unwrap_or_default().to_owned(),
        ready["message"].as_str().unwrap_or_default().to_owned(),
    )
}

fn app_manifest(namespace: &str, name: &str, project: &str, component: Value) -> String {
    serde_json::to_string_pretty(&json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"project": project, "components": [component]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_applies_apps_from_git_through_the_same_door_and_rest_does_not_fight_it() {
    let (org, project, session, _) = setting("flux").await;
    let admin = Client::admin().await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();
    let flux_user = "system:serviceaccount:flux-system:kustomize-controller";
    let actor = format!("kubernetes:{flux_user}");
    let web = |image: &str| json!({"name": "web", "workload": {"image": image, "port": 8080}});

    let git = kubenest_testkit::GitServer::start().await.unwrap();
    git.commit(
        "fleet",
        &[(
            "apps/shop.yaml",
            Some(&app_manifest(
                &namespace,
                "shop",
                project_name,
                web("shop:1"),
            )),
        )],
        "shop 1",
    )
    .unwrap();
    let flux = kubenest_testkit::Flux::start(&plane().kubeconfig, flux_user)
        .await
        .unwrap();
    let reconcile = async || {
        flux_apply(
            "GitRepository",
            "source.toolkit.fluxcd.io/v1",
            "fleet",
            json!({"interval": "1m", "url": git.url("fleet"), "ref": {"branch": "main"}}),
        )
        .await;
        flux_apply(
            "Kustomization",
            "kustomize.toolkit.fluxcd.io/v1",
            "apps",
            json!({"interval": "1m", "path": "./apps", "prune": true,
                   "sourceRef": {"kind": "GitRepository", "name": "fleet"}}),
        )
        .await;
    };
    reconcile().await;

    // Flux applied the App; the door stamped Flux's identity and the gitops path.
    let apps: Api<App> = Api::namespaced(plane().kube().await, &namespace);
    let mut shop = None;
    eventually("Flux applies the App", 90, async || {
        shop = apps.get_opt("shop").await.unwrap();
        shop.is_some()
    })
    .await;
    let shop = shop.unwrap();
    let annotations = shop.annotations();
    assert_eq!(annotations["kubenest.io/actor"], actor, "{}", flux.logs(20));
    assert_eq!(annotations["kubenest.io/actor-path"], "gitops");
    let uid = shop.metadata.uid.clone().unwrap();

    // REST does not rewrite what Git holds.
    let (status, answer) = session
        .call(
            Method::PATCH,
            &format!("/api/v1/apps/{uid}"),
            Some(json!({"progress_deadline_seconds": 300})),
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Flux Kustomization flux-system/apps"),
        "{answer}"
    );

    // A change committed to Git is a deployment by Flux.
    git.commit(
        "fleet",
        &[(
            "apps/shop.yaml",
            Some(&app_manifest(
                &namespace,
                "shop",
                project_name,
                web("shop:2"),
            )),
        )],
        "shop 2",
    )
    .unwrap();
    reconcile().await;
    let history = format!("/api/v1/apps/{uid}/deployments");
    let mut rows = Value::Null;
    eventually("the change from Git is recorded", 90, async || {
        rows = admin.get(&history).await.1;
        rows.as_array()
            .is_some_and(|r| r.iter().any(|d| d["diff"].to_string().contains("shop:2")))
    })
    .await;
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|d| d["actor"] == actor.as_str()),
        "{rows}"
    );

    // A bad App committed to Git is refused at the door, and Flux says why.
    git.commit(
        "fleet",
        &[(
            "apps/bad.yaml",
            Some(&app_manifest(
                &namespace,
                "bad",
                project_name,
                json!({"name": "db", "addon": {"definition": "nosuchdb"}}),
            )),
        )],
        "a bad app",
    )
    .unwrap();
    reconcile().await;
    let mut ready = (String::new(), String::new());
    eventually("Flux reports the refusal", 90, async || {
        ready = kustomization_ready("apps").await;
        ready.0 == "False" && ready.1.contains("spec.components[0].addon.definition")
    })
    .await;
    assert!(ready.1.contains("rules.kubenest.io"), "{ready:?}");
    assert!(apps.get_opt("bad").await.unwrap().is_none());

    // The audit log has Flux's writes on the gitops path. (Flux tried the bad App as a
    // server-side dry run first, which the webhook refused without recording: a dry run stores
    // nothing, and the webhook declares no side effects on dry runs.)
    let audit = admin
        .expect(
            Method::GET,
            &format!("/api/v1/orgs/{org}/audit?path=gitops"),
            None,
            200,
        )
        .await;
    let shop_entries: Vec<(&str, &str)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["resource_name"] == "shop" && e["actor"] == actor.as_str())
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shop_entries,
        [("apps.update", "succeeded"), ("apps.create", "succeeded")],
        "{audit}"
    );
    drop(flux);
}

/// Hostile values for every field that reaches a program or a fetched URL (a leading `-`, `..`
/// and absolute paths, NUL, line breaks, credentials in URLs, other schemes), generated from a
/// seed (`KUBENEST_PROPERTY_SEED` replays or explores), are refused at every door naming their
/// field: REST, kubectl (the CRD's schema), and the hub's and the agent's (the `app.deploy`
/// schema and `validate_deploy`, which both run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_values_for_programs_are_refused_at_every_door_with_their_field() {
    use kubenest_testkit::hostile::{FIELDS, Field, seed, values};
    let (org, project, session, id) = setting("hostile").await;
    let project_name = project["name"].as_str().unwrap();
    let project_id = project["id"].as_str().unwrap();
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &format!("org-{org}"));
    let git = |field: Field, value: &str| {
        let mut git = json!({"repository": "https://git.example.test/shop.git", "ref": "main",
                             "context_dir": "web", "mode": "dockerfile"});
        let key = match field {
            Field::GitRepository => "repository",
            Field::GitRef => "ref",
            _ => "context_dir",
        };
        git[key] = json!(value);
        git
    };
    let chart = |field: Field, value: &str| {
        let mut chart =
            json!({"repository": "https://charts.example.test", "name": "web", "version": "1.0.0"});
        let key = match field {
            Field::ChartRepository => "repository",
            Field::ChartName => "name",
            _ => "version",
        };
        chart[key] = json!(value);
        chart
    };
    // The wire's deploy, as the controllers would send it and the hub and agent check it.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../contracts/fixtures/app.deploy/pass/git-and-helm-sources.json"
    );
    let frame: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let seed = seed(0x5eed_0036);
    let mut tried = 0;
    for field in FIELDS {
        for value in values(field, seed, 6) {
            let is_git = matches!(
                field,
                Field::GitRepository | Field::GitRef | Field::ContextDir
            );
            let (rest_workload, crd_workload, rest_field, pointer) = if is_git {
                let body = git(field, &value);
                let mut crd = body.clone();
                if let Some(dir) = crd.as_object_mut().unwrap().remove("context_dir") {
                    crd["contextDir"] = dir;
                }
                let (key, wire) = match field {
                    Field::GitRepository => ("repository", "repository"),
                    Field::GitRef => ("ref", "git_ref"),
                    _ => ("context_dir", "context_dir"),
                };
                (
                    json!({"git": body, "port": 8080}),
                    json!({"git": crd, "port": 8080}),
                    format!("components[0].workload_spec.git.{key}"),
                    format!("/components/0/source/{wire}"),
                )
            } else {
                let body = chart(field, &value);
                let key = match field {
                    Field::ChartRepository => "repository",
                    Field::ChartName => "name",
                    _ => "version",
                };
                (
                    json!({"helm": {"chart": body}}),
                    json!({"helm": {"chart": body}}),
                    format!("components[0].workload_spec.helm.chart.{key}"),
                    format!("/components/1/source/chart/{key}"),
                )
            };
            let (status, body) = session
                .post(
                    "/api/v1/apps",
                    json!({"project_id": project_id, "name": "shop", "components": [
                        {"name": "web", "type": "workload", "workload_spec": rest_workload}]}),
                )
                .await;
            let rest = rest_refusal(status, &body);
            assert_eq!(
                (rest.status, rest.field.as_deref()),
                (422, Some(rest_field.as_str())),
                "REST took {field:?} {value:?}: {body}"
            );
            let object = app_object(
                "shop",
                project_name,
                json!([{"name": "web", "workload": crd_workload}]),
            );
            let kube = kube_refusal(
                apps.create(&PostParams::default(), &object)
                    .await
                    .unwrap_err(),
            );
            assert_eq!(
                (kube.status, kube.field.as_deref()),
                (422, Some(rest_field.as_str())),
                "kubectl took {field:?} {value:?}: {kube:?}"
            );
            // The hub's door and the agent's: the same value in the wire's deploy.
            let mut payload = frame["payload"].clone();
            let target = payload.pointer_mut(&pointer).unwrap();
            *target = json!(value);
            let deploy: kubenest_contracts::AppDeploy = serde_json::from_value(payload).unwrap();
            let refused = kubenest_domain::app::validate_deploy(&deploy).unwrap_err();
            assert_eq!(refused.pointer, pointer, "the hub took {field:?} {value:?}");
            tried += 1;
        }
    }
    assert_eq!(tried, 36);
    assert!(apps.get_opt("shop").await.unwrap().is_none());
}
