//! The GitOps repository is real: what the agent commits for an addon is applied by a real
//! engine, Flux's source- and kustomize-controller, on another cluster, with the agent
//! stopped, and the same addon runs there. A push the remote refuses is said beside an addon
//! that runs (never a failed revision), and written once the remote takes it again; an addon
//! component an App drops leaves the repository. (That a Helm workload is never committed is
//! checked in `chart_workloads`.)

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kubenest_contracts::{self as wire, Message};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{self, Backend, eventually, project};

const LONG: Duration = Duration::from_secs(120);

const CLUSTER_ID: &str = "c-gitops-1";

/// A hub and an agent on `east` whose GitOps remote is `remote` (a bare repository's path), in
/// a namespace of its own: other tests' agents run on the same cluster.
async fn agent_with_remote(
    env: &kubenest_testkit::Environment,
    remote: &std::path::Path,
    shutdown: &CancellationToken,
) -> Backend {
    let namespace = format!(
        "kubenest-gitops-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let (mgmt, east) = (env.management().unwrap(), env.cluster("east").unwrap());
    let (url, backend, token) = common::hub_with_backend(mgmt, CLUSTER_ID, "acme", shutdown).await;
    let config =
        common::agent_config(east, &url, token, CLUSTER_ID, "acme", remote, &namespace).await;
    tokio::spawn(kubenest_agent::run(config, shutdown.clone()));
    backend
}

/// A standalone Redis addon `name` of `project` in `namespace`, at `revision`.
fn redis(name: &str, project: &str, namespace: &str, revision: u32) -> wire::AddonApply {
    wire::AddonApply {
        addon: wire::AddonRef {
            addon_id: wire::Id::new(format!("ad-{name}")),
            name: wire::Name::new(name),
            project_id: wire::Id::new(project),
            namespace: wire::Name::new(namespace),
        },
        revision,
        definition: wire::Name::new("redis"),
        chart: wire::ChartRef {
            repository: "charts/addons".into(),
            name: "redis".into(),
            version: "1.0.0".into(),
        },
        // kwok clusters have no volume provisioner.
        values: serde_json::from_value(json!({"persistence": {"enabled": false},
                                              "resources": {"requests": {"memory": "64Mi"}}}))
        .unwrap(),
        exports: [("password", "{password}")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }
}

/// The latest `addon.status` of `addon_id` at `revision` that `check` accepts.
async fn addon_status(
    backend: &Backend,
    what: &str,
    addon_id: &str,
    revision: u32,
    check: impl Fn(&wire::AddonStatus) -> bool,
) -> wire::AddonStatus {
    backend
        .wait_for(what, LONG, |m: &Message| match m {
            Message::AddonStatus(s)
                if s.addon_id.as_str() == addon_id && s.observed_revision == revision =>
            {
                check(s).then(|| s.clone())
            }
            _ => None,
        })
        .await
}

/// A Flux object (GitRepository, Kustomization) in Flux's namespace on `client`'s cluster.
async fn flux_apply(client: &kube::Client, kind: &str, group_version: &str, spec: Value) {
    let (group, version) = group_version.split_once('/').unwrap();
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), kubenest_testkit::flux::NAMESPACE, &resource);
    let object = json!({
        "apiVersion": group_version, "kind": kind,
        "metadata": {"name": "addons", "namespace": kubenest_testkit::flux::NAMESPACE},
        "spec": spec,
    });
    api.patch(
        "addons",
        &PatchParams::apply("tests").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

/// The status of Flux object `kind` `addons` (for a failure's message).
async fn flux_status(client: &kube::Client, group_version: &str, kind: &str) -> Value {
    let (group, version) = group_version.split_once('/').unwrap();
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), kubenest_testkit::flux::NAMESPACE, &resource);
    match api.get_opt("addons").await {
        Ok(Some(object)) => object.data["status"].clone(),
        other => json!(format!("{other:?}")),
    }
}

/// The text of `path` on `main` of bare repository `bare`.
fn show(bare: &std::path::Path, path: &str) -> Option<String> {
    common::committed(bare, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_applies_an_addon_from_the_agents_repository_on_another_cluster_with_the_agent_stopped()
 {
    let env = kubenest_testkit::shared().await.unwrap();
    let git = kubenest_testkit::GitServer::start().await.unwrap();
    git.commit("fleet", &[("README.md", Some("addons\n"))], "start")
        .unwrap();
    let bare = git.path("fleet");
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let backend = agent_with_remote(env, &bare, &shutdown).await;
    let (project, namespace) = project(&backend, "fluxed").await;

    backend
        .accept(redis("cache", &project, &namespace, 1))
        .await;
    let ready = addon_status(&backend, "the addon Ready", "ad-cache", 1, |s| {
        s.phase == wire::AddonPhase::Ready
    })
    .await;
    assert!(
        ready.git_commit.is_some() && ready.gitops_error.is_none(),
        "{ready:?}"
    );
    let dir = format!("clusters/{CLUSTER_ID}/addons/{namespace}-cache");
    let manifests = show(&bare, &format!("{dir}/manifests.yaml")).expect("manifests.yaml");
    assert!(manifests.contains("kind: StatefulSet"), "{manifests}");
    assert!(
        !manifests.contains("kind: Secret"),
        "no Secret is committed: {manifests}"
    );
    let east = env.cluster("east").unwrap().client().await.unwrap();
    let secret = Api::<Secret>::namespaced(east, &namespace)
        .get("cache-exports")
        .await
        .unwrap();
    let password = secret.data.unwrap()["password"].0.clone();
    let password = String::from_utf8(password).unwrap();
    let everything = [
        "Chart.yaml",
        "values.yaml",
        "kustomization.yaml",
        "README.md",
        "chart/Chart.yaml",
    ];
    for file in everything {
        let text = show(&bare, &format!("{dir}/{file}")).unwrap_or_else(|| panic!("{file}"));
        assert!(!text.contains(&password), "{file} holds the password");
    }
    assert!(
        show(&bare, &format!("{dir}/Chart.yaml"))
            .unwrap()
            .contains("repository: file://chart"),
        "the catalog's chart is vendored"
    );

    // kubenest stops; only Git and Flux remain.
    shutdown.cancel();
    let west = env.cluster("west").unwrap();
    let client = west.client().await.unwrap();
    // What the folder's README asks for first: the namespace and the addon's credentials.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let credentials: Secret = serde_json::from_value(json!({
        "metadata": {"name": "cache-exports"}, "stringData": {"password": "set-by-the-operator"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &credentials)
        .await
        .unwrap();
    let flux_user = "system:serviceaccount:flux-system:kustomize-controller";
    let _flux = kubenest_testkit::Flux::start(west.kubeconfig_path(), flux_user)
        .await
        .unwrap();
    flux_apply(
        &client,
        "GitRepository",
        "source.toolkit.fluxcd.io/v1",
        json!({"interval": "1m", "url": git.url("fleet"), "ref": {"branch": "main"}}),
    )
    .await;
    flux_apply(
        &client,
        "Kustomization",
        "kustomize.toolkit.fluxcd.io/v1",
        json!({"interval": "1m", "path": format!("./clusters/{CLUSTER_ID}/addons"),
               "prune": true, "sourceRef": {"kind": "GitRepository", "name": "addons"}}),
    )
    .await;
    let sets = Api::<StatefulSet>::namespaced(client.clone(), &namespace);
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let set = sets.get_opt("cache").await.ok().flatten();
        if set
            .and_then(|s| s.status)
            .is_some_and(|s| s.ready_replicas == Some(1))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the addon does not run on west: Kustomization {}",
            flux_status(&client, "kustomize.toolkit.fluxcd.io/v1", "Kustomization").await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_the_remote_refuses_is_said_beside_an_addon_that_runs_and_written_once_it_takes_it()
{
    let env = kubenest_testkit::shared().await.unwrap();
    // An empty remote (its first commit would start the branch) that refuses every push, as a
    // protected branch or a full disk would.
    let bare = common::bare_repository();
    let hook = bare.join("hooks").join("pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'pushes are closed' >&2\nexit 1\n").unwrap();
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&hook, executable).unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let backend = agent_with_remote(env, &bare, &shutdown).await;
    let (project, namespace) = project(&backend, "closed").await;

    backend
        .accept(redis("queue", &project, &namespace, 1))
        .await;
    let refused = addon_status(&backend, "Ready, the record refused", "ad-queue", 1, |s| {
        s.phase == wire::AddonPhase::Ready && s.gitops_error.is_some()
    })
    .await;
    let error = refused.gitops_error.unwrap();
    assert!(error.contains("pushes are closed"), "{error}");
    let dir = format!("clusters/{CLUSTER_ID}/addons/{namespace}-queue");
    assert_eq!(show(&bare, &format!("{dir}/manifests.yaml")), None);

    // The remote takes pushes again: the record is written, and the error cleared.
    std::fs::remove_file(&hook).unwrap();
    let written = addon_status(&backend, "the record written", "ad-queue", 1, |s| {
        s.gitops_error.is_none() && s.git_commit.is_some()
    })
    .await;
    assert_eq!(written.phase, wire::AddonPhase::Ready);
    assert!(show(&bare, &format!("{dir}/manifests.yaml")).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_component_the_app_drops_leaves_the_repository_with_its_objects() {
    let env = kubenest_testkit::shared().await.unwrap();
    let bare = common::bare_repository();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let backend = agent_with_remote(env, &bare, &shutdown).await;
    let (project, namespace) = project(&backend, "dropper").await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = common::app_ref(&id, "shop", &project, &namespace);

    backend
        .accept(common::reference_app(app.clone(), "r1", "nginx:1.27", 1))
        .await;
    backend
        .app_status("Running with its addon", LONG, &id, |s| {
            s.phase == wire::AppPhase::Running
        })
        .await;
    let folder = format!("clusters/{CLUSTER_ID}/addons/{namespace}-shop-db");
    assert!(show(&bare, &format!("{folder}/manifests.yaml")).is_some());
    let index = show(
        &bare,
        &format!("clusters/{CLUSTER_ID}/addons/kustomization.yaml"),
    )
    .unwrap();
    assert!(index.contains(&format!("{namespace}-shop-db")), "{index}");

    // The App without its addon: the addon's objects are pruned, and its folder goes too.
    backend
        .accept(common::web_app(app, "r2", "nginx:1.27", 1, 120))
        .await;
    backend
        .app_status("Running without it", LONG, &id, |s| {
            s.phase == wire::AppPhase::Running && s.observed_revision == "r2"
        })
        .await;
    eventually("the dropped addon's folder removed", LONG, async || {
        show(&bare, &format!("{folder}/manifests.yaml")).is_none()
    })
    .await;
    assert_eq!(
        show(
            &bare,
            &format!("clusters/{CLUSTER_ID}/addons/kustomization.yaml")
        ),
        None,
        "no folder is left to list"
    );
}
