//! Who may do what: roles at each scope, the shared role matrix against every resource, pod security.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_at_each_scope_allow_exactly_their_operations_and_other_orgs_do_not_exist() {
    let admin = Client::admin().await;
    let names: Vec<String> = futures::future::join_all(
        [
            "oadmin", "omember", "oviewer", "padmin", "pviewer", "cmember", "outsider",
        ]
        .iter()
        .map(|p| user(&admin, p)),
    )
    .await;
    let [oadmin, omember, oviewer, padmin, pviewer, cmember, outsider] =
        <[String; 7]>::try_from(names).unwrap();
    let acme = org(
        &admin,
        "acme",
        json!([
        {"user": oadmin, "role": "admin"}, {"user": omember, "role": "member"},
        {"user": oviewer, "role": "viewer"}]),
    )
    .await;
    let globex = org(
        &admin,
        "globex",
        json!([{"user": outsider, "role": "admin"}]),
    )
    .await;
    let c = cluster(&admin, &acme).await;
    let cluster_id = c["cluster_id"].as_str().unwrap().to_owned();
    let p = project(&admin, &acme, &cluster_id).await;
    let project_id = p["id"].as_str().unwrap().to_owned();
    let other_project = project(&admin, &acme, &cluster_id).await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": padmin, "role": "admin"})),
            200,
        )
        .await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": pviewer, "role": "viewer"})),
            200,
        )
        .await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/clusters/{cluster_id}/members"),
            Some(json!({"user": cmember, "role": "member"})),
            200,
        )
        .await;
    let app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(&project_id, "site", "site:1")),
            202,
        )
        .await;
    let app_id = app["id"].as_str().unwrap().to_owned();
    let g_cluster = cluster(&admin, &globex).await;
    let g_project = project(&admin, &globex, g_cluster["cluster_id"].as_str().unwrap()).await;
    let g_app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(g_project["id"].as_str().unwrap(), "rival", "r:1")),
            202,
        )
        .await;

    let mut clients = std::collections::HashMap::new();
    for (who, name) in [
        ("oadmin", &oadmin),
        ("omember", &omember),
        ("oviewer", &oviewer),
        ("padmin", &padmin),
        ("pviewer", &pviewer),
        ("cmember", &cmember),
        ("outsider", &outsider),
    ] {
        clients.insert(who, Client::login(0, name, PASSWORD).await);
    }
    let case = |who, method, path: String, body, want| Case {
        who,
        method,
        path,
        body,
        want,
    };
    let app_path = format!("/api/v1/apps/{app_id}");
    let patch = Some(json!({"progress_deadline_seconds": 120}));
    let mut cases = vec![
        // Reading the app: every role that reaches its project; outsiders and people of another
        // project do not see it at all.
        case("oadmin", Method::GET, app_path.clone(), None, 200),
        case("oviewer", Method::GET, app_path.clone(), None, 200),
        case("pviewer", Method::GET, app_path.clone(), None, 200),
        case("cmember", Method::GET, app_path.clone(), None, 200),
        case("outsider", Method::GET, app_path.clone(), None, 404),
        // Changing it: members and up.
        case(
            "oviewer",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            403,
        ),
        case(
            "pviewer",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            403,
        ),
        case(
            "omember",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            202,
        ),
        case(
            "cmember",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            202,
        ),
        case(
            "padmin",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            202,
        ),
        case(
            "outsider",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            404,
        ),
        // The other project of the same organization: only organization and cluster roles.
        case(
            "padmin",
            Method::GET,
            format!("/api/v1/projects/{}", other_project["id"].as_str().unwrap()),
            None,
            404,
        ),
        case(
            "cmember",
            Method::GET,
            format!("/api/v1/projects/{}", other_project["id"].as_str().unwrap()),
            None,
            200,
        ),
        // Destructive operations: admins only.
        case(
            "omember",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/rotate-token"),
            None,
            403,
        ),
        case(
            "cmember",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/rotate-token"),
            None,
            403,
        ),
        case(
            "padmin",
            Method::GET,
            format!("/api/v1/clusters/{cluster_id}"),
            None,
            404,
        ),
        case(
            "omember",
            Method::DELETE,
            format!("/api/v1/projects/{project_id}"),
            None,
            403,
        ),
        case(
            "cmember",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/scale"),
            Some(json!({"desired_node_count": 2})),
            403,
        ),
        case(
            "oadmin",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/scale"),
            Some(json!({"desired_node_count": 2})),
            409,
        ),
        case(
            "omember",
            Method::POST,
            format!("/api/v1/orgs/{acme}/clusters"),
            Some(json!({"name": "more"})),
            403,
        ),
        // Another organization's objects do not exist, by any path.
        case(
            "oadmin",
            Method::GET,
            format!("/api/v1/apps/{}", g_app["id"].as_str().unwrap()),
            None,
            404,
        ),
        case(
            "oadmin",
            Method::GET,
            format!("/api/v1/orgs/{globex}"),
            None,
            404,
        ),
        case(
            "oadmin",
            Method::GET,
            format!(
                "/api/v1/clusters/{}",
                g_cluster["cluster_id"].as_str().unwrap()
            ),
            None,
            404,
        ),
        case(
            "oadmin",
            Method::POST,
            "/api/v1/apps".into(),
            Some(web_app(g_project["id"].as_str().unwrap(), "sneak", "x:1")),
            404,
        ),
        case(
            "outsider",
            Method::GET,
            format!("/api/v1/apps/{app_id}/deployments"),
            None,
            404,
        ),
        case(
            "outsider",
            Method::GET,
            format!("/api/v1/orgs/{acme}/projects"),
            None,
            404,
        ),
        // Membership changes: admins of the scope.
        case(
            "omember",
            Method::PUT,
            format!("/api/v1/orgs/{acme}/members"),
            Some(json!({"user": outsider, "role": "viewer"})),
            403,
        ),
        case(
            "padmin",
            Method::PUT,
            format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": omember, "role": "viewer"})),
            200,
        ),
    ];
    // Creating in the project: members and up.
    for (who, want) in [("pviewer", 403), ("padmin", 202), ("oviewer", 403)] {
        cases.push(case(
            who,
            Method::POST,
            "/api/v1/apps".into(),
            Some(web_app(&project_id, &unique(who), "x:1")),
            want,
        ));
    }
    for case in cases {
        let client = &clients[case.who];
        let (status, body) = client
            .call(case.method.clone(), &case.path, case.body)
            .await;
        assert_eq!(
            status.as_u16(),
            case.want,
            "{} {} {}: {body}",
            case.who,
            case.method,
            case.path
        );
    }
    // Lists show exactly what each may see.
    let seen = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let outsider_apps = clients["outsider"]
        .expect(Method::GET, "/api/v1/apps", None, 200)
        .await;
    assert_eq!(seen(&outsider_apps), ["rival"]);
    let orgs = clients["pviewer"]
        .expect(Method::GET, "/api/v1/orgs", None, 200)
        .await;
    assert_eq!(orgs.as_array().unwrap().len(), 1);
}

/// Every row of the shared role matrix ([`common::matrix`]) through the REST API: 404 where
/// the role does not reach the object, 403 where it reaches it with too weak a role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_at_every_scope_against_every_resource_and_verb_in_two_organizations() {
    use crate::common::matrix::{Door, Place, rows};
    redis_definition().await;
    let admin = Client::admin().await;
    let roles = [
        ("admin", Needs::Admin),
        ("member", Needs::Member),
        ("viewer", Needs::Viewer),
    ];
    let levels = [Level::Org, Level::Cluster, Level::Project];
    let spare = user(&admin, "spare").await;
    // Organization A, where the roles are bound; organization B, which none of them belongs to.
    let a = org(&admin, "matrix-a", json!([])).await;
    let b = org(&admin, "matrix-b", json!([])).await;
    let cluster_of = async |org: &str| {
        cluster(&admin, org).await["cluster_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let cluster_a = cluster_of(&a).await;
    let cluster_b = cluster_of(&b).await;
    let mut ids = std::collections::HashMap::new();
    ids.insert(
        Place::OwnProject,
        matrix_place(&admin, &a, &cluster_a, "m", "mdb").await,
    );
    // Its addon is named like the own project's App.
    ids.insert(
        Place::OtherProject,
        matrix_place(&admin, &a, &cluster_a, "m2", "m").await,
    );
    ids.insert(
        Place::OtherOrg,
        matrix_place(&admin, &b, &cluster_b, "m", "mdb").await,
    );
    let project_a = ids[&Place::OwnProject].1.clone();
    let mut users = Vec::new();
    for (role, needs) in roles {
        for level in levels {
            let name = user(&admin, &format!("{role}-{level:?}").to_lowercase()).await;
            let binding = json!({"user": name, "role": role});
            let path = match level {
                Level::Org => format!("/api/v1/orgs/{a}/members"),
                Level::Cluster => format!("/api/v1/clusters/{cluster_a}/members"),
                Level::Project => format!("/api/v1/projects/{project_a}/members"),
            };
            admin.expect(Method::PUT, &path, Some(binding), 200).await;
            users.push((Client::login(0, &name, PASSWORD).await, needs, level));
        }
    }

    let mut checked = 0;
    let mut wrong = Vec::new();
    for (client, holds, bound) in &users {
        for place in Place::ALL {
            let org = if place == Place::OtherOrg { &b } else { &a };
            for row in rows(Door::Rest) {
                let (method, path, body, success) =
                    rest_request(row.what, org, &ids[&place], &spare);
                let want = if !row.reaches(*bound, place) {
                    404
                } else if *holds >= row.needs {
                    success
                } else {
                    403
                };
                let (status, answer) = client.call(method.clone(), &path, body).await;
                checked += 1;
                if status.as_u16() != want {
                    wrong.push(format!(
                        "{} ({holds:?} at {bound:?}) {} at {place:?}: {status}, want {want}: {answer}",
                        client.user, row.what,
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
    assert_eq!(checked, users.len() * 3 * rows(Door::Rest).count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_pod_security_level_is_chosen_by_organization_admins_only() {
    let admin = Client::admin().await;
    let (oadmin, omember) = (
        user(&admin, "psa-admin").await,
        user(&admin, "psa-member").await,
    );
    let org = org(
        &admin,
        "psa",
        json!([{"user": oadmin, "role": "admin"}, {"user": omember, "role": "member"}]),
    )
    .await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let projects = format!("/api/v1/orgs/{org}/projects");
    let body = |name: &str, level: &str| json!({"name": name, "cluster_id": cluster_id, "pod_security": level});
    // A member may create a project at the default level, not choose another.
    let member = Client::login(0, &omember, PASSWORD).await;
    let (status, answer) = member.post(&projects, body("loose", "restricted")).await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (403, Some("pod_security")),
        "{answer}"
    );
    let plain = member
        .expect(
            Method::POST,
            &projects,
            Some(body("plain", "baseline")),
            201,
        )
        .await;
    assert_eq!(plain["pod_security"], "baseline", "{plain}");
    // A level the platform does not have is refused for everyone.
    let (status, answer) = admin.post(&projects, body("open", "privileged")).await;
    assert_eq!(
        (status.as_u16(), answer["field"].as_str()),
        (400, Some("pod_security")),
        "{answer}"
    );
    // The organization's admin chooses `restricted`.
    let org_admin = Client::login(0, &oadmin, PASSWORD).await;
    let strict = org_admin
        .expect(
            Method::POST,
            &projects,
            Some(body("strict", "restricted")),
            201,
        )
        .await;
    assert_eq!(strict["pod_security"], "restricted", "{strict}");
}
