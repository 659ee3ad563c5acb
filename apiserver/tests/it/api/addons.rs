//! Standalone addons: progress deadlines at the door, recording, revisions and values against the catalog.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_addons_and_projects_take_their_progress_deadline_at_the_door() {
    redis_definition().await;
    let admin = Client::admin().await;
    let org = org(&admin, "deadlines", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let projects = format!("/api/v1/orgs/{org}/projects");
    let (status, answer) = admin
        .post(
            &projects,
            json!({"name": "slow", "cluster_id": cluster_id, "progress_deadline_seconds": 5}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (422, Some("progress_deadline_seconds")),
        "{answer}"
    );
    let project = admin
        .expect(
            Method::POST,
            &projects,
            Some(
                json!({"name": "slow", "cluster_id": cluster_id, "progress_deadline_seconds": 900}),
            ),
            201,
        )
        .await;
    assert_eq!(project["progress_deadline_seconds"], 900, "{project}");
    let addon = |deadline: u32| {
        json!({"project_id": project["id"], "name": "cache", "definition": "redis",
               "progress_deadline_seconds": deadline})
    };
    let (status, answer) = admin.post("/api/v1/addon-instances", addon(90_000)).await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (422, Some("progress_deadline_seconds")),
        "{answer}"
    );
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(addon(120)),
            202,
        )
        .await;
    assert_eq!(created["progress_deadline_seconds"], 120, "{created}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_is_recorded_soon_after_its_definition_reaches_the_catalog() {
    let admin = Client::admin().await;
    let org = org(&admin, "late-catalog", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let kube = plane().kube().await;
    // The project as the status router leaves it once the agent took its namespace.
    let projects: Api<kubenest_crds::project::Project> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    let name = project["name"].as_str().unwrap();
    let generation = projects
        .get(name)
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    let taken = json!({"status": {"clusterPhase": "Ready", "ensuredGeneration": generation}});
    projects
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&taken))
        .await
        .unwrap();
    let path = format!("/api/v1/projects/{}", project["id"].as_str().unwrap());
    common::eventually("the project is Ready", 30, async || {
        admin.get(&path).await.1["phase"] == "Ready"
    })
    .await;
    // An addon in the organization's namespace of a definition that only comes later (an
    // organization's own catalog entry, written with kubectl after the addon).
    let addons: Api<kubenest_crds::addon::AddonInstance> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    addons
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
                "metadata": {"name": "queue"},
                "spec": {"project": name, "definition": "late-queue"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    common::eventually("the addon waits for its definition", 30, async || {
        let addon = addons.get("queue").await.unwrap();
        addon.status.is_some_and(|s| s.phase.is_some())
    })
    .await;
    let definitions = Api::<kubenest_crds::addon::AddonDefinition>::namespaced(
        kube.clone(),
        &format!("org-{org}"),
    );
    definitions
        .patch(
            "late-queue",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "late-queue"},
                "spec": {"displayName": "Queue",
                    "chart": {"repository": "charts/addons", "name": "redis", "version": "1.0.0"},
                    "exports": {"host": "{release}.{namespace}.svc"}}
            })),
        )
        .await
        .unwrap();
    // Before, the addon looked again after a minute; the definition's arrival now wakes it.
    common::eventually("revision 1 is recorded", 30, async || {
        let addon = addons.get("queue").await.unwrap();
        addon.status.and_then(|s| s.revision) == Some(1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_addons_phase_and_revisions_reach_the_event_stream() {
    redis_definition().await;
    let admin = Client::admin().await;
    let org = org(&admin, "addon-events", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let response = admin
        .http
        .get(format!("{}/api/v1/events/stream?org={org}", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = Box::pin(response.bytes_stream());
    let mut buffer = String::new();
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(json!({"project_id": project["id"], "name": "cache", "definition": "redis"})),
            202,
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    // Each addon event names the addon, its project and cluster. No agent runs here: the
    // addon waits for its cluster (Pending), and then the test writes what a report of the
    // agent would make of it (Ready at revision 1), which is one more event.
    let mut until_phase = async |phase: &str| loop {
        let (_, event) = next_event(&mut stream, &mut buffer).await;
        if event["kind"] != "addon.changed" {
            continue;
        }
        assert_eq!(event["addon_id"], id.as_str(), "{event}");
        assert_eq!(event["project_id"], project["id"], "{event}");
        assert_eq!(event["cluster_id"], registration["cluster_id"], "{event}");
        if event["phase"] == phase {
            return event;
        }
    };
    until_phase("Pending").await;
    let addons: Api<kubenest_crds::addon::AddonInstance> =
        Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let report = json!({"status": {"phase": "Ready", "revision": 1, "observedRevision": 1,
        "clusterPhase": "Ready"}});
    addons
        .patch_status("cache", &PatchParams::default(), &Patch::Merge(&report))
        .await
        .unwrap();
    let ready = until_phase("Ready").await;
    assert_eq!(
        (ready["previous"].as_str(), ready["revision"].as_u64()),
        (Some("Pending"), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_addons_check_values_against_the_catalog_and_change_by_revision() {
    redis_definition().await;
    let admin = Client::admin().await;
    let catalog = admin
        .expect(Method::GET, "/api/v1/addon-definitions/redis", None, 200)
        .await;
    assert_eq!(catalog["chart_version"], "1.0.0");
    let org = org(&admin, "addons", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let body = |values: Value| {
        json!({"project_id": project["id"], "name": "cache",
        "definition": "redis", "values": values})
    };
    let (status, answer) = admin
        .post(
            "/api/v1/addon-instances",
            body(json!({"maxmemory": "lots"})),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["field"], "values.maxmemory");
    let (status, answer) = admin
        .post(
            "/api/v1/addon-instances",
            json!({"project_id": project["id"], "name": "x", "definition": "nosuch"}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (404, Some("definition"))
    );
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(body(json!({"maxmemory": "64mb"}))),
            202,
        )
        .await;
    let id = created["id"].as_str().unwrap();
    let changed = admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/addon-instances/{id}"),
            Some(json!({"version": "1.0.1", "values": {"maxmemory": "128mb"}})),
            202,
        )
        .await;
    assert_eq!(
        (changed["version"].as_str(), &changed["values"]),
        (Some("1.0.1"), &json!({"maxmemory": "128mb"}))
    );
    let (status, answer) = admin
        .call(
            Method::PATCH,
            &format!("/api/v1/addon-instances/{id}"),
            Some(json!({"version": "^1.0"})),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (422, Some("version"))
    );
    let read = admin
        .expect(
            Method::GET,
            &format!("/api/v1/addon-instances/{id}"),
            None,
            200,
        )
        .await;
    assert!(read["revisions"].is_array(), "{read}");
    let (status, answer) = admin
        .post(
            &format!("/api/v1/addon-instances/{id}/rollback"),
            json!({"revision": 99}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (404, Some("revision"))
    );
    let listed = admin
        .expect(
            Method::GET,
            &format!("/api/v1/addon-instances?org={org}"),
            None,
            200,
        )
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    admin
        .expect(
            Method::DELETE,
            &format!("/api/v1/addon-instances/{id}"),
            None,
            202,
        )
        .await;
}
