//! Clusters: registration, token rotation, scaling refusals and deletion once empty.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_registered_rotated_refused_scaling_and_deleted_once_empty() {
    let admin = Client::admin().await;
    let org = org(&admin, "reg", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let id = registration["cluster_id"].as_str().unwrap().to_owned();
    let token = registration["connection_token"].as_str().unwrap();
    let identity = plane()
        .cluster_verifier
        .verify(token, kubenest_contracts::ClientType::Cluster)
        .unwrap();
    assert!(format!("{identity:?}").contains(&id), "{identity:?}");
    let command = registration["helm_install_command"].as_str().unwrap();
    assert!(command.starts_with("helm install kubenest-agent charts/kubenest-agent"));
    let (line, stdin) = command.split_once("<<").unwrap();
    assert!(
        line.contains("--set hub.url=wss://hub.example.test") && !line.contains(token),
        "the token stays off the command line: {command}"
    );
    assert!(stdin.contains(token), "{command}");
    // Run as printed by a shell, with `helm template` rendering instead of installing: the token
    // reaches the release's Secret through the values on standard input.
    let helm = kubenest_testkit::Binaries::locate().unwrap().helm;
    let dry = command.replacen("helm install", &format!("{} template", helm.display()), 1);
    let rendered = std::process::Command::new("sh")
        .arg("-c")
        .arg(&dry)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    let manifest = String::from_utf8_lossy(&rendered.stdout);
    assert!(
        rendered.status.success(),
        "{manifest}{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(token);
    assert!(
        manifest.contains(&encoded) || manifest.contains(token),
        "the token is in the rendered Secret: {manifest}"
    );

    let got = admin
        .expect(Method::GET, &format!("/api/v1/clusters/{id}"), None, 200)
        .await;
    assert_eq!(got["state"], "pending");
    for field in [
        "cpu_total",
        "cpu_used",
        "mem_total",
        "mem_used",
        "node_count",
    ] {
        assert!(got[field].is_number(), "{field}: {got}");
    }

    let rotated = admin
        .expect(
            Method::POST,
            &format!("/api/v1/clusters/{id}/rotate-token"),
            None,
            200,
        )
        .await;
    assert_eq!(rotated["token_version"], 2);
    assert_ne!(
        rotated["connection_token"],
        registration["connection_token"]
    );

    let (status, body) = admin
        .post(
            &format!("/api/v1/clusters/{id}/scale"),
            json!({"desired_node_count": 3}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "not_provisioned");
    let (status, body) = admin
        .post(
            &format!("/api/v1/clusters/{id}/scale"),
            json!({"desired_node_count": 0}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "desired_node_count");

    // Validation names the field; unknown fields are refused.
    let (status, body) = admin
        .post(
            &format!("/api/v1/orgs/{org}/clusters"),
            json!({"name": "Not_A_Name"}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (422, Some("name"))
    );
    let (status, body) = admin
        .post(
            &format!("/api/v1/orgs/{org}/clusters"),
            json!({"name": "x", "colour": "red"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("colour"),
        "{body}"
    );

    let project = project(&admin, &org, &id).await;
    let (status, body) = admin
        .call(Method::DELETE, &format!("/api/v1/clusters/{id}"), None)
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "has_projects");
    admin
        .expect(
            Method::DELETE,
            &format!("/api/v1/projects/{}", project["id"].as_str().unwrap()),
            None,
            202,
        )
        .await;
    common::eventually("the project is gone", 30, async || {
        admin
            .get(&format!(
                "/api/v1/projects/{}",
                project["id"].as_str().unwrap()
            ))
            .await
            .0
            == 404
    })
    .await;
    admin
        .expect(Method::DELETE, &format!("/api/v1/clusters/{id}"), None, 202)
        .await;
}
