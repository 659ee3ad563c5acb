//! The same bad object is refused alike at every door (REST, kubectl, the hub), naming its
//! field: what the hub would refuse, the shared bad objects, and generated hostile values.

use super::*;
use kubenest_crds::organization::Organization;

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
    // An ingress without a port (nothing for it to route to) is refused, not dropped.
    let field = "components[0].workload_spec.ingress";
    let ingress = json!({"host": "shop.example.test", "path": "/"});
    let (status, body) = session
        .post(
            "/api/v1/apps",
            json!({"project_id": project_id, "name": "shop", "components": [
                {"name": "web", "type": "workload",
                 "workload_spec": {"image": "shop:1", "ingress": ingress}}]}),
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
        json!([{"name": "web", "workload": {"image": "shop:1", "ingress": ingress}}]),
    );
    let kube = kube_refusal(
        apps.create(&PostParams::default(), &object)
            .await
            .unwrap_err(),
    );
    assert_eq!((kube.status, kube.field.as_deref()), (422, Some(field)));
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
    // The refusal quotes the App's Ready message, which the controllers may rewrite between
    // the two calls; what the refusal itself says is the same on both paths.
    let said = |r: &Refusal| {
        let (state, _) = r.reason.split_once(" (").unwrap_or((&r.reason, ""));
        let (_, ways) = r.reason.rsplit_once("); ").unwrap_or(("", &r.reason));
        (
            r.status,
            r.code.clone(),
            r.field.clone(),
            format!("{state} … {ways}"),
        )
    };
    assert_eq!(said(&kube), said(&rest), "{kube:?}");
    assert!(kube.reason.contains("Deployment/stuck-web"), "{kube:?}");
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

/// A membership written with kubectl (or by a GitOps engine, through the same webhook) without
/// the user's id would grant nothing, silently: it is refused naming the member's `userId`, on
/// an organization and on a project; a member with its id is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_membership_without_a_user_id_is_refused_at_kubectl_naming_the_field() {
    let (org, project, _session, id) = setting("memberid").await;
    // A platform operator with every Kubernetes power: only the admission webhook stands in
    // the way (the plane's own identity is the API server's, which the webhooks trust).
    let kube = impersonating("platform-operator", &["system:masters"]).await;
    let orgs: Api<Organization> = Api::all(kube.clone());
    let projects: Api<Project> = Api::namespaced(kube, &format!("org-{org}"));
    let project_name = project["name"].as_str().unwrap();
    let without_id = json!({"spec": {"members": [
        {"user": "someone", "userId": id, "role": "viewer"},
        {"user": "ghost", "role": "admin"},
    ]}});
    for (what, refused) in [
        (
            "organization",
            orgs.patch(&org, &PatchParams::default(), &Patch::Merge(&without_id))
                .await
                .map(|_| ()),
        ),
        (
            "project",
            projects
                .patch(
                    project_name,
                    &PatchParams::default(),
                    &Patch::Merge(&without_id),
                )
                .await
                .map(|_| ()),
        ),
    ] {
        let refusal = kube_refusal(refused.expect_err(what));
        assert_eq!(
            (refusal.status, refusal.field.as_deref()),
            (422, Some("members[1].user_id")),
            "{what}: {refusal:?}"
        );
        assert!(refusal.reason.contains("ghost"), "{what}: {refusal:?}");
    }
    let created = orgs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "Organization",
                "metadata": {"name": format!("{org}-byhand")},
                "spec": {"displayName": "by hand", "members": [{"user": "ghost", "role": "admin"}]},
            }))
            .unwrap(),
        )
        .await;
    let refusal = kube_refusal(created.expect_err("an organization created by hand"));
    assert_eq!(refusal.field.as_deref(), Some("members[0].user_id"));

    let with_id =
        json!({"spec": {"members": [{"user": "someone", "userId": id, "role": "viewer"}]}});
    projects
        .patch(
            project_name,
            &PatchParams::default(),
            &Patch::Merge(&with_id),
        )
        .await
        .expect("a member with its id is taken");
}
