//! Fences and budgets are the organization's admins' to set, at REST and through kubectl.

use super::*;
use crate::common::unique;
use kubenest_crds::cluster::Cluster;

/// Fences hold a project's members in, so they are the organization's admins' to set: a member
/// and a project's own admin are refused at REST and at kubectl (the admission policy, past
/// the RBAC that lets a project admin change the project), and so is a cluster admin setting
/// the cluster's budget; the organization's admin sets them by either path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_are_the_organizations_admins_to_set_at_both_doors() {
    let (org, project, session, member_id) = setting("fenceset").await;
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let namespace = format!("org-{org}");
    let project_id = project["id"].as_str().unwrap();
    let project_name = project["name"].as_str().unwrap();
    let path = format!("/api/v1/projects/{project_id}/fences");
    let open = json!({"network": {"isolation": "open"}});

    // A member of the organization: REST and kubectl refuse, and so does a project of their
    // own made open.
    let (status, body) = session.call(Method::PUT, &path, Some(open.clone())).await;
    assert_eq!(status, 403, "{body}");
    let cluster_id = project["cluster_id"].as_str().unwrap();
    let (status, body) = session
        .post(
            &format!("/api/v1/orgs/{org}/projects"),
            json!({"name": unique("p"), "cluster_id": cluster_id, "fences": open}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (403, Some("fences")),
        "{body}"
    );
    let as_member: Api<Project> = Api::namespaced(as_user(&member_id).await, &namespace);
    let quota = json!({"spec": {"quota": {"cpu": "64"}}});
    let refused = as_member
        .patch(project_name, &PatchParams::default(), &Patch::Merge(&quota))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );

    // The project's own admin may change the project, but not its fences.
    let boss = user(&admin, "boss").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": boss, "role": "admin"})),
            200,
        )
        .await;
    let boss_session = Client::login(0, &boss, PASSWORD).await;
    let (status, body) = boss_session.call(Method::PUT, &path, Some(open)).await;
    assert_eq!(status, 403, "{body}");
    let boss_id = boss_session.my_id().await;
    let as_boss: Api<Project> = Api::namespaced(as_user(&boss_id).await, &namespace);
    let deadline = json!({"spec": {"progressDeadlineSeconds": 900}});
    eventually("the project admin's Role", 30, async || {
        as_boss
            .patch(
                project_name,
                &PatchParams::default(),
                &Patch::Merge(&deadline),
            )
            .await
            .is_ok()
    })
    .await;
    for change in [
        quota.clone(),
        json!({"spec": {"network": {"isolation": "Open"}}}),
        json!({"spec": {"defaults": {"cpuRequest": "1m"}}}),
    ] {
        let refused = as_boss
            .patch(
                project_name,
                &PatchParams::default(),
                &Patch::Merge(&change),
            )
            .await
            .unwrap_err();
        let kube::Error::Api(status) = &refused else {
            panic!("{refused}");
        };
        assert_eq!(status.code, 403, "{change}: {refused}");
        assert!(
            status.message.contains(&format!(
                "setting the fences of project {project_name} needs the admin role in its \
                 organization"
            )),
            "{change}: {refused}"
        );
    }

    // A cluster's admin may not set its budget either.
    let clusters: Api<Cluster> = Api::namespaced(kube.clone(), &namespace);
    let listed = clusters.list(&Default::default()).await.unwrap().items;
    let cluster = listed
        .iter()
        .find(|c| c.uid().as_deref() == Some(cluster_id))
        .unwrap();
    let keeper = user(&admin, "keeper").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/clusters/{cluster_id}/members"),
            Some(json!({"user": keeper, "role": "admin"})),
            200,
        )
        .await;
    let keeper_session = Client::login(0, &keeper, PASSWORD).await;
    let (status, body) = keeper_session
        .call(
            Method::PUT,
            &format!("/api/v1/clusters/{cluster_id}/budget"),
            Some(json!({"cpu": "100"})),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    let keeper_id = keeper_session.my_id().await;
    let as_keeper: Api<Cluster> = Api::namespaced(as_user(&keeper_id).await, &namespace);
    let budget = json!({"spec": {"budget": {"cpu": "100"}}});
    let mut last = String::new();
    eventually(
        "the cluster admin's budget refused by the policy",
        30,
        async || match as_keeper
            .patch(
                &cluster.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&budget),
            )
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 403 => {
                last = s.message.clone();
                s.message
                    .contains("spec.budget: setting the budget of cluster")
            }
            other => panic!("a cluster admin set its budget: {other:?}"),
        },
    )
    .await;
    assert!(
        last.contains("needs the admin role in its organization"),
        "{last}"
    );

    // The organization's admin sets them, by kubectl too.
    let as_admin: Api<Project> = Api::namespaced(kube.clone(), &namespace);
    let fenced = as_admin
        .patch(project_name, &PatchParams::default(), &Patch::Merge(&quota))
        .await
        .unwrap();
    assert_eq!(fenced.spec.quota.unwrap().cpu.as_deref(), Some("64"));
}
