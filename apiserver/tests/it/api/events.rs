//! The live event stream: what a caller sees, resuming, catching up, and alerts.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_subscriber_that_falls_behind_catches_up_from_the_log_and_misses_nothing() {
    let admin = Client::admin().await;
    let org = org(&admin, "lag", json!([])).await;
    let app_id = app_in_new_project(&admin, &org, "burst").await;
    // The second replica's live channel holds one event: a burst leaves its subscribers behind.
    let reader = Client::login(1, common::ADMIN, common::ADMIN_PASSWORD).await;
    let mut stream = Box::pin(app_stream(&reader, &app_id, None).await);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Forty versions at once, each with a deployment of its own: forty events in a burst.
    let apps: Api<App> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    const BURST: usize = 40;
    futures::future::join_all((0..BURST).map(|i| {
        let apps = apps.clone();
        async move {
            let patch = json!({"status": {"deploymentId": format!("burst-{i}")}});
            apps.patch_status("burst", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }))
    .await;

    let mut buffer = String::new();
    let mut seen = std::collections::HashSet::new();
    let mut last_id = 0;
    while seen.len() < BURST {
        let (id, event) = next_event(&mut stream, &mut buffer).await;
        let id = id.parse::<i64>().unwrap();
        assert!(
            id > last_id,
            "each event once, in order: {id} after {last_id}"
        );
        last_id = id;
        if let Some(deployment) = event["deployment_id"].as_str()
            && deployment.starts_with("burst-")
        {
            seen.insert(deployment.to_owned());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_delivers_what_the_caller_sees_and_resumes_from_last_event_id() {
    let admin = Client::admin().await;
    let viewer = user(&admin, "watcher").await;
    let org = org(
        &admin,
        "events",
        json!([{"user": viewer, "role": "viewer"}]),
    )
    .await;
    let app_id = app_in_new_project(&admin, &org, "feed").await;
    let watcher = Client::login(1, &viewer, PASSWORD).await;
    let kube = plane().kube().await;
    let apps: Api<App> = Api::namespaced(kube, &format!("org-{org}"));
    let phase = async |phase: &str| {
        let patch = json!({"status": {"phase": phase}});
        apps.patch_status("feed", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    };

    let mut stream = Box::pin(app_stream(&watcher, &app_id, None).await);
    let mut buffer = String::new();
    // Give the subscription a moment to exist before the change.
    tokio::time::sleep(Duration::from_millis(300)).await;
    phase("Deploying").await;
    let (first_id, first) = loop {
        let (id, event) = next_event(&mut stream, &mut buffer).await;
        if event["kind"] == "app.phase" && event["phase"] == "Deploying" {
            break (id, event);
        }
    };
    assert_eq!(first["app_id"], app_id);
    assert_eq!(first["org"], org);
    drop(stream);

    // While disconnected: two changes. Resuming on the other replica replays them in order.
    phase("Running").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    phase("Failed").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut resumed = Box::pin(app_stream(&watcher, &app_id, Some(&first_id)).await);
    let mut buffer = String::new();
    // (The App controller writes phases of its own in between; ours come in order.)
    let mut phases = Vec::new();
    let mut last_id = first_id.parse::<i64>().unwrap();
    while !phases.iter().any(|p| p == "Failed") {
        let (id, event) = next_event(&mut resumed, &mut buffer).await;
        let id = id.parse::<i64>().unwrap();
        assert!(id > last_id, "ids rise: {id} after {last_id}");
        last_id = id;
        if event["kind"] == "app.phase" {
            phases.push(event["phase"].as_str().unwrap().to_owned());
        }
    }
    let running = phases
        .iter()
        .position(|p| p == "Running")
        .expect("Running replayed");
    assert!(running < phases.len() - 1, "{phases:?}");

    // Someone with no role in the organization sees nothing of it.
    let stranger = Client::login(0, &user(&admin, "stranger").await, PASSWORD).await;
    let (status, _) = stranger
        .get(&format!("/api/v1/events/stream?org={org}"))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_past_its_deadline_is_an_alert_event_on_the_organizations_stream() {
    let admin = Client::admin().await;
    let org = org(&admin, "alerting", json!([])).await;
    let app_id = app_in_new_project(&admin, &org, "late").await;
    let response = admin
        .http
        .get(format!("{}/api/v1/events/stream?org={org}", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .send()
        .await
        .unwrap();
    let mut stream = Box::pin(response.bytes_stream());
    let mut buffer = String::new();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // What the controllers write for an App whose rollout missed its deadline.
    let apps: Api<App> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let failed = json!({"status": {"phase": "Failed", "conditions": [{
        "type": "Ready", "status": "False", "reason": "ProgressDeadlineExceeded",
        "message": "revision r1 was not running within 10s",
        "lastTransitionTime": "2026-12-01T00:00:00Z"}]}});
    apps.patch_status("late", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
    let alert = loop {
        let (_, event) = next_event(&mut stream, &mut buffer).await;
        if event["kind"] == "alert" {
            break event;
        }
    };
    assert_eq!(
        (alert["app_id"].as_str(), alert["state"].as_str()),
        (Some(app_id.as_str()), Some("open")),
        "{alert}"
    );
    assert_eq!(alert["org"], org.as_str(), "{alert}");
}
