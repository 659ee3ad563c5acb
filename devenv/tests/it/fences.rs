//! Fences through the CLI on the whole system (kwok nodes): `kubenest projects fences` sets a
//! project's quota, which its cluster's agent keeps and whose count comes back through the hub
//! to `kubenest projects usage`; an App past the quota, then past the organization's budget
//! (`kubenest orgs budget`), is refused with the numbers; `kubenest orgs usage` shows it all.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use serde_json::{Value, json};

use crate::common::{self, fixture, run};

/// Runs the CLI for the fixture's organization; its output, or a panic naming the command.
fn cli(session: &Path, org: &str, args: &[&str]) -> (bool, String) {
    let mut all = vec!["--org", org];
    all.extend_from_slice(args);
    let out = common::kubenest(session, &all, "");
    (out.status.success(), common::text(&out))
}

fn app(project: &str, name: &str, replicas: u32, cpu: &str) -> Value {
    json!({
        "name": name, "project": project,
        "components": [{"name": "web", "type": "workload", "workload_spec": {
            "image": "nginx:1.27", "replicas": replicas, "port": 8080,
            "resources": {"cpu_request": cpu}}}],
    })
}

#[test]
fn a_project_fenced_through_the_cli_is_held_by_its_cluster_and_its_use_comes_back() {
    run(async {
        let f = fixture().await;
        let (_, project) = f.project("east", "fenced").await;
        let options = f.system.options();
        let org = options.org.clone();
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session.json");
        common::admin_login(&f.system, &session);

        let (ok, out) = cli(
            &session,
            &org,
            &[
                "projects",
                "fences",
                &project,
                "--cpu",
                "2",
                "--pods",
                "10",
                "--default-cpu-request",
                "100m",
            ],
        );
        assert!(ok, "{out}");
        assert!(
            out.lines().any(|l| l.starts_with("cpu") && l.contains('2')),
            "{out}"
        );
        // The agent keeps the quota in the project's namespace.
        let quotas: Api<ResourceQuota> = Api::namespaced(f.workload("east").await, &project);
        let deadline = Instant::now() + Duration::from_secs(60);
        while quotas.get_opt("kubenest-quota").await.unwrap().is_none() {
            assert!(Instant::now() < deadline, "no ResourceQuota in {project}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // An App of 1.5 CPU runs; its pods are counted by the cluster and come back as use.
        let file = dir.path().join("app.json");
        std::fs::write(&file, app(&project, "web", 3, "500m").to_string()).unwrap();
        let (ok, out) = cli(
            &session,
            &org,
            &["apps", "apply", "-f", file.to_str().unwrap()],
        );
        assert!(ok, "{out}");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let (ok, out) = cli(
                &session,
                &org,
                &["projects", "usage", &project, "-o", "json"],
            );
            assert!(ok, "{out}");
            let usage: Value = serde_json::from_str(&out).unwrap();
            if usage["reported"]["cpu"] == "1500m" && usage["reported"]["pods"] == "3" {
                assert_eq!(usage["used"]["cpu"], "1500m", "{usage}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster's count never came back: {usage}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // One more CPU does not fit the quota of 2.
        std::fs::write(&file, app(&project, "more", 2, "500m").to_string()).unwrap();
        let (ok, out) = cli(
            &session,
            &org,
            &["apps", "apply", "-f", file.to_str().unwrap()],
        );
        assert!(!ok, "{out}");
        assert!(
            out.contains(&format!(
                "project {project}'s quota of cpu is 2: it uses 1500m and this change adds 1 (2500m in all)"
            )),
            "{out}"
        );

        // The organization's budget of 1.6 CPU leaves 100m: 200m more is refused by it.
        let (ok, out) = cli(&session, &org, &["orgs", "budget", "--cpu", "1600m"]);
        assert!(ok, "{out}");
        std::fs::write(&file, app(&project, "more", 1, "200m").to_string()).unwrap();
        let (ok, out) = cli(
            &session,
            &org,
            &["apps", "apply", "-f", file.to_str().unwrap()],
        );
        let (_, usage) = cli(&session, &org, &["orgs", "usage"]);
        // No budget again, for the other tests of the organization.
        let (cleared, cleared_out) = cli(&session, &org, &["orgs", "budget"]);
        assert!(cleared, "{cleared_out}");
        assert!(!ok, "{out}");
        assert!(
            out.contains(&format!(
                "the budget of organization {org} for cpu is 1600m"
            )),
            "{out}"
        );
        assert!(
            usage.lines().any(|l| l.starts_with("organization")
                && l.contains("1500m")
                && l.contains("1600m")),
            "{usage}"
        );
    });
}
