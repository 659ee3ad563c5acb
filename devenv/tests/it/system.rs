//! kubenest end to end, as `make dev` runs it: the release programs as processes (two hub
//! replicas, two controllers replicas, the API server, one agent per workload cluster
//! registered through the API) on real clusters and PostgreSQL. The tour runs on it, and then
//! faults are injected one at a time: a hub replica killed mid-deploy, an agent's link stalled
//! and cut for 30 s while changes are made, the active controllers killed during a rollout,
//! an agent restarted, PostgreSQL frozen for 30 s in the middle of a deployment. After each, the system converges: every change runs on its cluster, each
//! change is one deployment in the history (none lost, none applied twice: the workloads'
//! `metadata.generation` counts the specs applied), and the history agrees with the cluster.
//!
//! The system lives on one runtime shared by the tests of this binary (its proxies run there),
//! and the tests take turns: a fault in one must not be blamed on another.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{
    CONVERGE, Expect, change_image, converged, create, eventually, fixture, gone, run,
};
use kube::api::Api;
use kubenest_devenv::tour::{self, DevEnv, Printer};
use kubenest_testkit::LinkMode;

#[test]
fn the_tour_runs_on_the_whole_system() {
    run(async {
        let f = fixture().await;
        let options = f.system.options();
        let env = DevEnv {
            api: f.system.api_url(),
            ca_file: f.system.api_ca().map(Into::into),
            // The whole system here runs on kwok nodes; install.rs runs the demo on a real one.
            real_node: None,
            builds: None,
            admin_user: options.admin_user.clone(),
            admin_password: options.admin_password.clone(),
            org: options.org.clone(),
            clusters: f
                .system
                .agents
                .values()
                .map(|a| {
                    let kubeconfig = f.env.cluster(&a.cluster).unwrap().kubeconfig_path();
                    (
                        a.cluster.clone(),
                        (a.cluster_id.clone(), kubeconfig.to_path_buf()),
                    )
                })
                .collect(),
        };
        let mut out = Printer::quiet();
        let outcome = tour::run(&env, &mut out).await;
        eprintln!("{}", out.lines.join("\n"));
        outcome.unwrap();
        for step in ["== 1.", "== 3.", "== 7.", "== 9.", "tour finished"] {
            assert!(
                out.lines.iter().any(|l| l.starts_with(step)),
                "the tour printed no {step:?}"
            );
        }
        assert!(
            out.lines
                .iter()
                .any(|l| l.contains("spec.replicas desired 2 observed 5 (by kubectl-scale)")),
            "the drift event names field, values and manager"
        );
    });
}

#[test]
fn a_hub_replica_killed_mid_deploy_loses_and_repeats_nothing() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "hubkill").await;
        let index = f.hub_holding("east").await;

        let mut admin = f.admin().await;
        let names = ["h0", "h1", "h2", "h3", "h4"];
        let mut ids = Vec::new();
        for name in names {
            ids.push(create(&mut admin, &project, name, "nginx:1.27").await);
        }
        // The replica carrying east's session dies while those deployments are in flight.
        f.system.hubs[index].service.kill();
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.system.hubs[index].service.start().unwrap();

        let expected: Vec<Expect> = names
            .iter()
            .zip(&ids)
            .map(|(name, id)| Expect {
                app_id: id,
                name,
                image: "nginx:1.27",
                operations: &["create"],
            })
            .collect();
        converged(&mut f, "east", &namespace, &expected).await;
    });
}

#[test]
fn changes_made_while_an_agents_link_is_stalled_and_cut_arrive_once() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("west", "link").await;
        let mut admin = f.admin().await;
        let changed = create(&mut admin, &project, "l-changed", "nginx:1.27").await;
        let removed = create(&mut admin, &project, "l-removed", "nginx:1.27").await;
        converged(
            &mut f,
            "west",
            &namespace,
            &[
                Expect {
                    app_id: &changed,
                    name: "l-changed",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
                Expect {
                    app_id: &removed,
                    name: "l-removed",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
            ],
        )
        .await;

        // 15 s of a black hole (neither end notices at once), then 15 s of a dead link.
        f.system.set_link("west", LinkMode::Stall).unwrap();
        change_image(&mut admin, &changed, "nginx:1.28").await;
        let added = create(&mut admin, &project, "l-added", "nginx:1.27").await;
        tokio::time::sleep(Duration::from_secs(15)).await;
        f.system.set_link("west", LinkMode::Drop).unwrap();
        admin
            .delete(&format!("/api/v1/apps/{removed}"))
            .await
            .unwrap();
        f.cluster_state("west", "disconnected", Duration::from_secs(60))
            .await;
        tokio::time::sleep(Duration::from_secs(15)).await;
        f.system.set_link("west", LinkMode::Pass).unwrap();

        converged(
            &mut f,
            "west",
            &namespace,
            &[
                Expect {
                    app_id: &changed,
                    name: "l-changed",
                    image: "nginx:1.28",
                    operations: &["update", "create"],
                },
                Expect {
                    app_id: &added,
                    name: "l-added",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
            ],
        )
        .await;
        gone(&f, "west", &namespace, &removed, "l-removed").await;
        f.cluster_state("west", "connected", CONVERGE).await;
    });
}

/// Thaws a frozen process when dropped, so a failed test does not leave the shared system
/// without its database.
struct Thaw<'a>(&'a kubenest_testkit::process::ManagedProcess);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.thaw();
    }
}

#[test]
fn postgres_frozen_for_30s_mid_deployment_loses_and_doubles_no_row() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "pgdown").await;
        let mut admin = f.admin().await;
        let id = create(&mut admin, &project, "pg-web", "nginx:1.27").await;
        let created = Expect {
            app_id: &id,
            name: "pg-web",
            image: "nginx:1.27",
            operations: &["create"],
        };
        converged(&mut f, "east", &namespace, &[created]).await;

        change_image(&mut admin, &id, "nginx:1.28").await;
        let postgres = f.env.postgres().unwrap().process();
        postgres.freeze();
        let thaw = Thaw(postgres);
        let frozen = Instant::now();
        tokio::time::sleep(Duration::from_secs(30)).await;
        f.check_running();
        drop(thaw);

        // Once the database answers again the deployment finishes: one row for the change,
        // its result the cluster's, the Deployment given exactly two specs.
        let updated = Expect {
            app_id: &id,
            name: "pg-web",
            image: "nginx:1.28",
            operations: &["update", "create"],
        };
        converged(&mut f, "east", &namespace, &[updated]).await;
        eprintln!(
            "converged {:.1}s after PostgreSQL was frozen",
            frozen.elapsed().as_secs_f64()
        );
    });
}

#[test]
fn the_active_controllers_killed_during_a_rollout_hand_over_without_repeating_it() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "failover").await;
        let mut admin = f.admin().await;
        let first = create(&mut admin, &project, "c-first", "nginx:1.27").await;
        converged(
            &mut f,
            "east",
            &namespace,
            &[Expect {
                app_id: &first,
                name: "c-first",
                image: "nginx:1.27",
                operations: &["create"],
            }],
        )
        .await;

        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let leader = f.system.leader(&mgmt).await.unwrap().expect("a leader");
        let names = ["c0", "c1", "c2", "c3"];
        let mut ids = Vec::new();
        for name in names {
            ids.push(create(&mut admin, &project, name, "nginx:1.27").await);
        }
        change_image(&mut admin, &first, "nginx:1.28").await;
        f.system.controllers[leader].kill();
        let killed = Instant::now();
        // The standby takes over once the dead leader's Lease runs out; then the killed
        // replica comes back and stands by.
        eventually("the standby leads", Duration::from_secs(30), async || {
            f.system
                .leader(&mgmt)
                .await
                .unwrap()
                .is_some_and(|l| l != leader)
        })
        .await;
        eprintln!(
            "the standby took over {:.1}s after the leader was killed",
            killed.elapsed().as_secs_f64()
        );
        f.system.controllers[leader].start().unwrap();

        let mut expected: Vec<Expect> = names
            .iter()
            .zip(&ids)
            .map(|(name, id)| Expect {
                app_id: id,
                name,
                image: "nginx:1.27",
                operations: &["create"],
            })
            .collect();
        expected.push(Expect {
            app_id: &first,
            name: "c-first",
            image: "nginx:1.28",
            operations: &["update", "create"],
        });
        converged(&mut f, "east", &namespace, &expected).await;
        eprintln!(
            "converged {:.1}s after the leader was killed",
            killed.elapsed().as_secs_f64()
        );
        assert_ne!(
            f.system.leader(&mgmt).await.unwrap(),
            Some(leader),
            "the standby keeps leading"
        );
    });
}

#[test]
fn an_agent_restarted_while_changes_wait_applies_each_once() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "agent").await;
        let mut admin = f.admin().await;
        let kept = create(&mut admin, &project, "a-kept", "nginx:1.27").await;
        converged(
            &mut f,
            "east",
            &namespace,
            &[Expect {
                app_id: &kept,
                name: "a-kept",
                image: "nginx:1.27",
                operations: &["create"],
            }],
        )
        .await;

        f.system.agent("east").unwrap().service.kill();
        change_image(&mut admin, &kept, "nginx:1.28").await;
        let added = create(&mut admin, &project, "a-added", "nginx:1.27").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.system.agent("east").unwrap().service.start().unwrap();

        converged(
            &mut f,
            "east",
            &namespace,
            &[
                Expect {
                    app_id: &kept,
                    name: "a-kept",
                    image: "nginx:1.28",
                    operations: &["update", "create"],
                },
                Expect {
                    app_id: &added,
                    name: "a-added",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
            ],
        )
        .await;
    });
}

/// The admin kubeconfig `make dev` hands out is a person's kubectl too: its writes meet the
/// REST rules and are stamped with who made them (the programs act as their own identities).
#[test]
fn the_admin_kubeconfig_meets_the_same_rules_and_is_named_in_the_history() {
    run(async {
        let f = fixture().await;
        let (_, project) = f.project("east", "door").await;
        let org = f.system.options().org.clone();
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let apps: Api<kubenest_crds::App> = Api::namespaced(mgmt, &format!("org-{org}"));
        let app = |name: &str, env: serde_json::Value| -> kubenest_crds::App {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
                "metadata": {"name": name},
                "spec": {"project": project, "components": [
                    {"name": "web", "workload": {"image": "nginx:1.27", "env": env}}]},
            }))
            .unwrap()
        };
        let refused = apps
            .create(
                &Default::default(),
                &app(
                    "door-bad",
                    serde_json::json!([{"name": "DB", "exportRef": {"component": "db", "export": "dsn"}}]),
                ),
            )
            .await
            .unwrap_err();
        let kube::Error::Api(status) = refused else {
            panic!("{refused}")
        };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(
            status
                .message
                .contains("spec.components[0].workload.env[0]"),
            "{}",
            status.message
        );
        let created = apps
            .create(&Default::default(), &app("door-ok", serde_json::json!([])))
            .await
            .unwrap();
        let annotations = created.metadata.annotations.unwrap();
        assert_eq!(
            annotations["kubenest.io/actor"],
            "kubernetes:kubenest-admin"
        );
        assert_eq!(annotations["kubenest.io/actor-path"], "kubectl");
        apps.delete("door-ok", &Default::default()).await.unwrap();

        // `kubenest audit` shows both, and the delete, as the admin reads the log.
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session.json");
        common::admin_login(&f.system, &session);
        let audit = common::kubenest(
            &session,
            &[
                "--org", &org, "audit", "--path", "kubectl", "--kind", "App", "-o", "json",
            ],
            "",
        );
        assert!(audit.status.success(), "{}", common::text(&audit));
        let entries: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
        let seen: Vec<(&str, &str, &str)> = entries
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["resource_name"].as_str().unwrap().starts_with("door-"))
            .map(|e| {
                (
                    e["action"].as_str().unwrap(),
                    e["resource_name"].as_str().unwrap(),
                    e["outcome"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("apps.delete", "door-ok", "succeeded"),
                ("apps.create", "door-ok", "succeeded"),
                ("apps.create", "door-bad", "refused"),
            ],
            "{entries}"
        );
        let table = common::kubenest(&session, &["--org", &org, "audit", "--limit", "3"], "");
        assert!(
            common::text(&table).contains("kubernetes:kubenest-admin"),
            "{}",
            common::text(&table)
        );
    });
}
