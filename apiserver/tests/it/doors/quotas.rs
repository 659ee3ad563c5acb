//! Quotas and budgets at the door: an App that would take its project past its quota, or its
//! organization past its budget across clusters, is refused by REST and by kubectl alike with
//! the limit, the use and the field that asks.

use super::*;
use kubenest_crds::cluster::Cluster;

fn web(project_id: &str, name: &str, replicas: u32, cpu: &str) -> Value {
    json!({
        "project_id": project_id, "name": name,
        "components": [{"name": "web", "type": "workload", "workload_spec": {
            "image": "shop:1", "replicas": replicas, "port": 8080,
            "resources": {"cpu_request": cpu}}}],
    })
}

fn web_object(name: &str, project: &str, replicas: u32, cpu: &str) -> App {
    app_object(
        name,
        project,
        json!([{"name": "web", "workload": {
            "image": "shop:1", "replicas": replicas, "port": 8080,
            "resources": {"cpuRequest": cpu}}}]),
    )
}

/// A project with a quota of 1 CPU and 4 pods: 600m taken, the next 600m refused at REST and
/// at kubectl with the quota, the use and the field; what fits, and a lowering, go through;
/// the project's use says what counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_over_its_project_quota_is_refused_at_both_doors_with_the_numbers() {
    let (org, project, session, id) = setting("quota").await;
    let admin = Client::admin().await;
    let project_id = project["id"].as_str().unwrap();
    let project_name = project["name"].as_str().unwrap();
    let fenced = admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/fences"),
            Some(json!({"quota": {"cpu": "1", "pods": 4},
                        "defaults": {"cpu_request": "250m"}})),
            200,
        )
        .await;
    assert_eq!(fenced["fences"]["quota"]["cpu"], "1");
    assert_eq!(fenced["fences"]["network"]["isolation"], "isolated");
    session
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web(project_id, "one", 2, "300m")),
            202,
        )
        .await;

    let (status, body) = session
        .post("/api/v1/apps", web(project_id, "two", 2, "300m"))
        .await;
    let rest = rest_refusal(status, &body);
    let reason = format!(
        "project {project_name}'s quota of cpu is 1: it uses 600m and this change adds 600m \
         (1200m in all)"
    );
    assert_eq!(
        (
            rest.status,
            rest.code.as_str(),
            rest.field.as_deref(),
            rest.reason.as_str()
        ),
        (
            422,
            "quota_exceeded",
            Some("components[0].workload_spec.resources.cpu_request"),
            reason.as_str()
        ),
        "{body}"
    );
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &format!("org-{org}"));
    let kube = kube_refusal(
        apps.create(
            &PostParams::default(),
            &web_object("two", project_name, 2, "300m"),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (
            kube.status,
            kube.code.as_str(),
            kube.field.as_deref(),
            kube.reason.as_str()
        ),
        rest_as_kube(&rest)
    );
    // A container that names no request is charged the project's default: 2 × 250m fits
    // beside 600m? No: 1100m. 1 × 250m does.
    let mut defaulted = web(project_id, "three", 1, "1");
    defaulted["components"][0]["workload_spec"]
        .as_object_mut()
        .unwrap()
        .remove("resources");
    session
        .expect(Method::POST, "/api/v1/apps", Some(defaulted), 202)
        .await;
    let (status, body) = session
        .post("/api/v1/apps", {
            let mut pods = web(project_id, "four", 2, "10m");
            pods["components"][0]["workload_spec"]["replicas"] = json!(2);
            pods
        })
        .await;
    let pods = rest_refusal(status, &body);
    assert_eq!(pods.code, "quota_exceeded", "{body}");
    assert!(
        pods.reason.starts_with(&format!(
            "project {project_name}'s quota of pods is 4: it uses 3"
        )),
        "{body}"
    );
    // Lowering always goes through, however full the project is.
    let one = apps.get("one").await.unwrap();
    let app_id = one.uid().unwrap();
    session
        .expect(
            Method::PATCH,
            &format!("/api/v1/apps/{app_id}"),
            Some(
                json!({"components": [{"name": "web", "type": "workload", "workload_spec": {
                "image": "shop:1", "replicas": 1, "port": 8080,
                "resources": {"cpu_request": "300m"}}}]}),
            ),
            202,
        )
        .await;
    let usage = session
        .expect(
            Method::GET,
            &format!("/api/v1/projects/{project_id}/usage"),
            None,
            200,
        )
        .await;
    assert_eq!(usage["used"]["cpu"], "550m", "{usage}");
    assert_eq!(usage["declared"]["pods"], "2", "{usage}");
    assert_eq!(usage["reported"]["cpu"], "0", "{usage}");

    // A full project has no room for an addon's pods: refused at both doors, naming the
    // project.
    session
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web(project_id, "five", 2, "10m")),
            202,
        )
        .await;
    common::redis_definition().await;
    let (status, body) = session
        .post(
            "/api/v1/addon-instances",
            json!({"project_id": project_id, "name": "cache", "definition": "redis"}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    assert_eq!(
        (rest.status, rest.code.as_str(), rest.field.as_deref()),
        (422, "quota_exceeded", Some("project_id")),
        "{body}"
    );
    assert_eq!(
        rest.reason,
        format!(
            "project {project_name}'s quota of pods is 4: it uses 4, and an addon's pods need room"
        )
    );
    let addons: Api<AddonInstance> = Api::namespaced(as_user(&id).await, &format!("org-{org}"));
    let addon: AddonInstance = serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
        "metadata": {"name": "cache"},
        "spec": {"project": project_name, "definition": "redis"},
    }))
    .unwrap();
    let kube = kube_refusal(
        addons
            .create(&PostParams::default(), &addon)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (kube.status, kube.code.as_str(), kube.reason.as_str()),
        (422, "quota_exceeded", rest.reason.as_str())
    );
}

/// What a REST refusal looks like through kubectl: the same status, code and reason, the field
/// in the resource's own spelling (read back into REST's by `kube_refusal`).
fn rest_as_kube(rest: &Refusal) -> (u16, &str, Option<&str>, &str) {
    (
        rest.status,
        rest.code.as_str(),
        rest.field.as_deref(),
        rest.reason.as_str(),
    )
}

/// An organization budget of 4 CPU across clusters east and west: 2 on each is all of it, and
/// the fifth CPU is refused on east though east alone has room; what a cluster reports running
/// (a chart's pods the specs do not show) counts too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organization_budget_refuses_the_fifth_cpu_across_its_clusters() {
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let lead = user(&admin, "lead").await;
    let org = org(&admin, "budget", json!([{"user": lead, "role": "admin"}])).await;
    let lead_id = user_id(&lead).await;
    let org_budget = admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/orgs/{org}"),
            Some(json!({"budget": {"cpu": "4"}})),
            200,
        )
        .await;
    assert_eq!(org_budget["budget"]["cpu"], "4");
    let east = cluster(&admin, &org).await;
    let west = cluster(&admin, &org).await;
    let on_east = project(&admin, &org, east["cluster_id"].as_str().unwrap()).await;
    let on_west = project(&admin, &org, west["cluster_id"].as_str().unwrap()).await;
    for p in [&on_east, &on_west] {
        agent_took_namespace(&admin, &kube, &org, p).await;
    }
    let (east_id, west_id) = (
        on_east["id"].as_str().unwrap(),
        on_west["id"].as_str().unwrap(),
    );
    for (project_id, name) in [(east_id, "a"), (west_id, "b")] {
        admin
            .expect(
                Method::POST,
                "/api/v1/apps",
                Some(web(project_id, name, 2, "1")),
                202,
            )
            .await;
    }
    let (status, body) = admin.post("/api/v1/apps", web(east_id, "c", 1, "1")).await;
    let refused = rest_refusal(status, &body);
    assert_eq!(
        (
            refused.status,
            refused.code.as_str(),
            refused.field.as_deref()
        ),
        (
            422,
            "budget_exceeded",
            Some("components[0].workload_spec.resources.cpu_request")
        ),
        "{body}"
    );
    assert_eq!(
        refused.reason,
        format!(
            "the budget of organization {org} for cpu is 4: it uses 4 and this change adds 1 \
             (5 in all)"
        )
    );
    // Through kubectl, the same (the organization's admin's Kubernetes user).
    eventually("the admin's RoleBinding", 30, async || {
        common::org_binding_has(&kube, &org, "kubenest-org-admin", &lead_id).await
    })
    .await;
    let apps: Api<App> = Api::namespaced(as_user(&lead_id).await, &format!("org-{org}"));
    let east_name = on_east["name"].as_str().unwrap();
    let kubectl = kube_refusal(
        apps.create(&PostParams::default(), &web_object("c", east_name, 1, "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (
            kubectl.status,
            kubectl.code.as_str(),
            kubectl.field.as_deref(),
            kubectl.reason.as_str()
        ),
        rest_as_kube(&refused)
    );
    let usage = admin
        .expect(Method::GET, &format!("/api/v1/orgs/{org}/usage"), None, 200)
        .await;
    assert_eq!(usage["organization"]["used"]["cpu"], "4", "{usage}");
    assert_eq!(usage["organization"]["budget"]["cpu"], "4", "{usage}");
    let clusters = usage["clusters"].as_array().unwrap();
    assert!(clusters.iter().all(|c| c["used"]["cpu"] == "2"), "{usage}");

    // West's cluster reports 3 CPU in use (its App's 2, and a chart's pods the specs do not
    // show): the organization is past its budget, and even 500m more on east is refused, while
    // lowering east's App still goes through.
    let projects: Api<Project> = Api::namespaced(kube.clone(), &format!("org-{org}"));
    let reported = json!({"status": {"usage": {"requests.cpu": "3"}}});
    projects
        .patch_status(
            on_west["name"].as_str().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&reported),
        )
        .await
        .unwrap();
    // The API server reads projects from its mirror, which sees the report a moment later;
    // until then the same change is refused on the old use (4 + 500m is past 4 as well), so
    // nothing is made while waiting.
    eventually("the refusal counts west's reported use", 30, async || {
        let (status, body) = admin
            .post("/api/v1/apps", web(east_id, "d", 1, "500m"))
            .await;
        let refused = rest_refusal(status, &body);
        assert_eq!(refused.code, "budget_exceeded", "{body}");
        refused
            .reason
            .contains("it uses 5 and this change adds 500m (5500m in all)")
    })
    .await;
    let a = Api::<App>::namespaced(kube.clone(), &format!("org-{org}"))
        .get("a")
        .await
        .unwrap();
    admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/apps/{}", a.uid().unwrap()),
            Some(
                json!({"components": [{"name": "web", "type": "workload", "workload_spec": {
                "image": "shop:1", "replicas": 1, "port": 8080,
                "resources": {"cpu_request": "1"}}}]}),
            ),
            202,
        )
        .await;
    // A cluster's own budget counts only its projects.
    let east_budget = admin
        .expect(
            Method::PUT,
            &format!(
                "/api/v1/clusters/{}/budget",
                east["cluster_id"].as_str().unwrap()
            ),
            Some(json!({"cpu": "1"})),
            200,
        )
        .await;
    assert_eq!(east_budget["cpu"], "1");
    let clusters: Api<Cluster> = Api::namespaced(kube.clone(), &format!("org-{org}"));
    let listed = clusters.list(&Default::default()).await.unwrap().items;
    let east_cluster = listed
        .iter()
        .find(|c| c.uid().as_deref() == east["cluster_id"].as_str())
        .unwrap();
    assert_eq!(
        east_cluster.spec.budget.as_ref().unwrap().cpu.as_deref(),
        Some("1")
    );
    // East holds 1 CPU now: its budget of 1 refuses any more there, naming the cluster.
    let (status, body) = admin
        .post("/api/v1/apps", web(east_id, "e", 1, "100m"))
        .await;
    let refused = rest_refusal(status, &body);
    assert!(
        refused.reason.starts_with(&format!(
            "the budget of cluster {} for cpu is 1:",
            east_cluster.name_any()
        )),
        "{body}"
    );
}
