//! One door: an object written with kubectl is refused for the same reasons, naming the same
//! field, as the same object sent to the REST API; a kubectl write is stamped with the identity
//! that really made it, whatever it claims; and every mutation by either path is in the
//! organization's audit log. Against a real management cluster whose kube-apiserver calls the
//! API server's admission webhooks over TLS, real PostgreSQL and the real controllers.

use crate::common;

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::common::{
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

/// The names of one place of the matrix: (cluster, project, app, addon).
type PlaceNames = (String, String, String, String);

/// Runs one row of the shared role matrix ([`common::matrix`]) as `kube`; Ok when Kubernetes
/// let it through. Every write is a server-side dry run: authorization, the admission policies
/// and webhooks all decide, and nothing changes.
async fn kubectl_request(
    what: &str,
    kube: &kube::Client,
    namespace: &str,
    (cluster, project, app, addon): &PlaceNames,
    me: &str,
) -> Result<(), kube::Error> {
    use kube::api::{DeleteParams, ListParams};
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let dry_create = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let clusters: Api<kubenest_crds::cluster::Cluster> = Api::namespaced(kube.clone(), namespace);
    let projects: Api<Project> = Api::namespaced(kube.clone(), namespace);
    let apps: Api<App> = Api::namespaced(kube.clone(), namespace);
    let addons: Api<AddonInstance> = Api::namespaced(kube.clone(), namespace);
    let escalate = json!({"spec": {"members": [{"user": me, "userId": me, "role": "admin"}]}});
    let annotate = json!({"metadata": {"annotations": {"example.com/note": "x"}}});
    let change = json!({"spec": {"progressDeadlineSeconds": 300}});
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
        "delete project" => projects.delete(project, &dry_delete).await.map(|_| ()),
        "get app" => apps.get(app).await.map(|_| ()),
        "list apps" => apps.list(&ListParams::default()).await.map(|_| ()),
        "change app" => apps
            .patch(app, &dry, &Patch::Merge(&change))
            .await
            .map(|_| ()),
        "annotate app" => apps
            .patch(app, &dry, &Patch::Merge(&annotate))
            .await
            .map(|_| ()),
        "delete app" => apps.delete(app, &dry_delete).await.map(|_| ()),
        "create app" => apps
            .create(
                &dry_create,
                &app_object(
                    &common::unique("k"),
                    project,
                    json!([{"name": "web", "workload": {"image": "k:1"}}]),
                ),
            )
            .await
            .map(|_| ()),
        "get addon" => addons.get(addon).await.map(|_| ()),
        "change addon" => addons
            .patch(addon, &dry, &Patch::Merge(&change))
            .await
            .map(|_| ()),
        "annotate addon" => addons
            .patch(addon, &dry, &Patch::Merge(&annotate))
            .await
            .map(|_| ()),
        "delete addon" => addons.delete(addon, &dry_delete).await.map(|_| ()),
        "create addon" => {
            let object: AddonInstance = serde_json::from_value(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
                "metadata": {"name": common::unique("k")},
                "spec": {"project": project, "definition": "redis"},
            }))
            .unwrap();
            addons.create(&dry_create, &object).await.map(|_| ())
        }
        other => panic!("the matrix row {other:?} has no kubectl request"),
    }
}

/// A project with an App `app` and a standalone addon `addon` on cluster `cluster_id` of
/// `org`, Ready; returns its names and id.
async fn matrix_place(
    admin: &Client,
    kube: &kube::Client,
    org: &str,
    cluster_id: &str,
    app: &str,
    addon: &str,
) -> (PlaceNames, String) {
    let p = project(admin, org, cluster_id).await;
    agent_took_namespace(admin, kube, org, &p).await;
    let project_id = p["id"].as_str().unwrap().to_owned();
    admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(common::web_app(&project_id, app, "m:1")),
            202,
        )
        .await;
    admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(json!({"project_id": project_id, "name": addon, "definition": "redis"})),
            202,
        )
        .await;
    let name = p["name"].as_str().unwrap().to_owned();
    let cluster = Api::<Project>::namespaced(kube.clone(), &format!("org-{org}"))
        .get(&name)
        .await
        .unwrap()
        .spec
        .cluster;
    (
        (cluster, name, app.to_owned(), addon.to_owned()),
        project_id,
    )
}

/// Every kubectl row of the shared role matrix ([`common::matrix`]), for every role bound on
/// organization A, its cluster and its first project, against that project, another project
/// on the same cluster (whose addon is named like the first project's App) and organization B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_at_every_scope_through_kubectl_in_two_organizations_with_escalations() {
    use crate::common::Level;
    use crate::common::matrix::{Door, Place, rows};
    common::redis_definition().await;
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let a = org(&admin, "kmatrix-a", json!([])).await;
    let b = org(&admin, "kmatrix-b", json!([])).await;
    let cluster_a = cluster(&admin, &a).await["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cluster_b = cluster(&admin, &b).await["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (own, project_a) = matrix_place(&admin, &kube, &a, &cluster_a, "m", "mdb").await;
    let (other, _) = matrix_place(&admin, &kube, &a, &cluster_a, "m2", "m").await;
    let (outside, _) = matrix_place(&admin, &kube, &b, &cluster_b, "m", "mdb").await;
    let places = [
        (Place::OwnProject, &a, own.clone()),
        (Place::OtherProject, &a, other),
        (Place::OtherOrg, &b, outside),
    ];
    let roles = [
        ("admin", common::Needs::Admin),
        ("member", common::Needs::Member),
        ("viewer", common::Needs::Viewer),
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
            // Every one of them reaches project A's addon once the controllers have bound
            // the role (the addon is the last object the Roles name).
            let addons: Api<AddonInstance> = Api::namespaced(client.clone(), &format!("org-{a}"));
            eventually(&format!("{name}'s binding"), 60, async || {
                addons.get(&own.3).await.is_ok()
            })
            .await;
            users.push((name, id, client, needs, level));
        }
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (name, id, client, holds, bound) in &users {
        for (place, org, names) in &places {
            for row in rows(Door::Kubectl) {
                let allowed = row.allowed(*holds, *bound, *place);
                let result =
                    kubectl_request(row.what, client, &format!("org-{org}"), names, id).await;
                checked += 1;
                let ok = match (&result, allowed) {
                    (Ok(()), true) => true,
                    // Refused by RBAC or by kubenest's admission policies: 403 either way.
                    (Err(kube::Error::Api(status)), false) => status.code == 403,
                    _ => false,
                };
                if !ok {
                    wrong.push(format!(
                        "{name} ({holds:?} at {bound:?}) {} at {place:?}: {:?}, want {}",
                        row.what,
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
    assert_eq!(checked, 9 * 3 * rows(Door::Kubectl).count());
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

/// A kube client impersonating the Kubernetes user `name` (no kubenest user behind it).
async fn as_kubernetes_user(name: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&plane().kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(name.to_owned());
    kube::Client::try_from(config).unwrap()
}

/// Gets, changes, annotates and deletes `name` as `api`'s user: every outcome, in that order.
async fn attack<K>(api: &Api<K>, name: &str) -> Vec<Result<(), kube::Error>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let params = PatchParams::default();
    let change = json!({"spec": {"progressDeadlineSeconds": 301}});
    let annotate = json!({"metadata": {"annotations": {"attacker.example/note": "mine"}}});
    vec![
        api.get(name).await.map(|_| ()),
        api.patch(name, &params, &Patch::Merge(&change))
            .await
            .map(|_| ()),
        api.patch(name, &params, &Patch::Merge(&annotate))
            .await
            .map(|_| ()),
        api.delete(name, &Default::default()).await.map(|_| ()),
    ]
}

const VERBS: &[&str] = &["get", "change", "annotate", "delete"];

fn all_forbidden(
    what: &str,
    verbs: &[&str],
    outcomes: impl IntoIterator<Item = Result<(), kube::Error>>,
) {
    let outcomes: Vec<_> = outcomes.into_iter().collect();
    assert_eq!(outcomes.len(), verbs.len());
    for (verb, outcome) in verbs.iter().zip(outcomes) {
        match outcome {
            Err(kube::Error::Api(status)) if status.code == 403 => {}
            other => panic!(
                "{verb} {what}: {:?}, want 403",
                other.map_err(|e| e.to_string())
            ),
        }
    }
}

/// A member of project B attacks project A of the same organization through kubectl: A's
/// AddonInstance named like B's own App, and A's App. Every get, change, annotation and delete
/// is refused (RBAC names objects per kind), and so are a delete and an annotation by a
/// Kubernetes user whom an RBAC Role lets delete and patch every App but who holds `deploy` on
/// no project (the admission policy checks deletes and metadata-only writes too). A's objects
/// are as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_another_project_cannot_reach_a_projects_objects_through_kubectl() {
    use k8s_openapi::api::rbac::v1::{Role as KubeRole, RoleBinding};
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let org = org(&admin, "cross", json!([])).await;
    let namespace = format!("org-{org}");
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let a = project(&admin, &org, cluster_id).await;
    let b = project(&admin, &org, cluster_id).await;
    let (a_name, b_name) = (a["name"].as_str().unwrap(), b["name"].as_str().unwrap());
    let mia = user(&admin, "mia").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{}/members", b["id"].as_str().unwrap()),
            Some(json!({"user": mia, "role": "member"})),
            200,
        )
        .await;
    let mia_id = Client::login(0, &mia, PASSWORD)
        .await
        .get("/api/v1/me")
        .await
        .1["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // B's App and A's AddonInstance share the name `twin`; A also has an App.
    let admin_apps: Api<App> = Api::namespaced(kube.clone(), &namespace);
    let admin_addons: Api<AddonInstance> = Api::namespaced(kube.clone(), &namespace);
    let web = json!([{"name": "web", "workload": {"image": "shop:1"}}]);
    admin_apps
        .create(
            &PostParams::default(),
            &app_object("twin", b_name, web.clone()),
        )
        .await
        .unwrap();
    admin_apps
        .create(&PostParams::default(), &app_object("a-web", a_name, web))
        .await
        .unwrap();
    let addon: AddonInstance = serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
        "metadata": {"name": "twin"},
        "spec": {"project": a_name, "definition": "postgres"},
    }))
    .unwrap();
    admin_addons
        .create(&PostParams::default(), &addon)
        .await
        .unwrap();
    let before_addon = admin_addons.get("twin").await.unwrap();
    let before_app = admin_apps.get("a-web").await.unwrap();

    // Mia reaches her own App once the controllers have written her project's Role.
    let mia_kube = as_user(&mia_id).await;
    let her_apps: Api<App> = Api::namespaced(mia_kube.clone(), &namespace);
    eventually("mia's project Role names her App", 60, async || {
        her_apps.get("twin").await.is_ok()
    })
    .await;
    let her_addons: Api<AddonInstance> = Api::namespaced(mia_kube, &namespace);
    all_forbidden(
        "A's AddonInstance",
        VERBS,
        attack(&her_addons, "twin").await,
    );
    all_forbidden("A's App", VERBS, attack(&her_apps, "a-web").await);

    // Ops may, by RBAC, patch and delete every App of the organization, but deploys nowhere.
    let role: KubeRole = serde_json::from_value(json!({
        "metadata": {"name": "ops-apps"},
        "rules": [{"apiGroups": ["kubenest.io"], "resources": ["apps", "addoninstances"],
                   "verbs": ["get", "patch", "update", "delete"]}],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "ops-apps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ops-apps"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ops"}],
    }))
    .unwrap();
    Api::<KubeRole>::namespaced(kube.clone(), &namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(kube.clone(), &namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let ops = as_kubernetes_user("ops").await;
    for (what, outcomes) in [
        (
            "A's App",
            attack(&Api::<App>::namespaced(ops.clone(), &namespace), "a-web").await,
        ),
        (
            "A's AddonInstance",
            attack(&Api::<AddonInstance>::namespaced(ops, &namespace), "twin").await,
        ),
    ] {
        let mut outcomes = outcomes.into_iter();
        // RBAC lets ops read; every write is the admission policy's to refuse.
        outcomes.next().unwrap().unwrap();
        all_forbidden(what, &["change", "annotate", "delete"], outcomes);
    }

    let after_addon = admin_addons.get("twin").await.unwrap();
    let after_app = admin_apps.get("a-web").await.unwrap();
    for (before, after) in [
        (before_addon.metadata.clone(), after_addon.metadata.clone()),
        (before_app.metadata.clone(), after_app.metadata.clone()),
    ] {
        assert!(after.deletion_timestamp.is_none(), "{after:?}");
        assert!(
            !after
                .annotations
                .unwrap_or_default()
                .contains_key("attacker.example/note"),
            "{before:?}"
        );
    }
    assert_eq!(before_addon.spec, after_addon.spec);
    assert_eq!(before_app.spec, after_app.spec);
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
