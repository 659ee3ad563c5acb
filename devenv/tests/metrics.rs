//! Every program's admin endpoint, over the release programs as processes (two hub replicas,
//! two controllers replicas, the API server, an agent per workload cluster): `/healthz`,
//! `/metrics` moved by a deploy of an App, and `/readyz` failing with the name of the
//! dependency that went away — PostgreSQL (reached here through a proxy that can cut it) for
//! the API server and the controllers, the hub for the agents and the leading controllers —
//! and passing again once it is back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

// A System of its own, on a management cluster of its own: a binary of its own (see
// tests/it/main.rs).
#[path = "it/common/mod.rs"]
mod common;
#[path = "metrics/otlp.rs"]
mod otlp;

use common::{CONVERGE, Expect, Fixture, converged, create, eventually, run};
use kubenest_devenv::system::{Options, System};
use kubenest_testkit::{Binaries, LinkMode, TcpProxy};
use serde_json::Value;
use tokio::sync::{Mutex, OnceCell};

/// The system, and the link between its programs and PostgreSQL.
struct Guarded {
    f: Fixture,
    database_link: TcpProxy,
    /// Where every program exports its traces.
    traces: otlp::Receiver,
}

async fn fixture() -> tokio::sync::MutexGuard<'static, Guarded> {
    static FIXTURE: OnceCell<Mutex<Guarded>> = OnceCell::const_new();
    FIXTURE
        .get_or_init(|| async {
            let env = kubenest_testkit::shared().await.unwrap();
            let postgres = env.postgres().unwrap();
            let database = postgres.fresh_database("metrics").await.unwrap();
            let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], postgres.port()));
            let database_link = TcpProxy::start("127.0.0.1:0", vec![upstream])
                .await
                .unwrap();
            let url = database.url.replace(
                &format!("127.0.0.1:{}", postgres.port()),
                &database_link.address().to_string(),
            );
            let dir = tempfile::tempdir().unwrap().keep();
            let traces = otlp::Receiver::start().await;
            let options = Options {
                traces_endpoint: Some(traces.endpoint.clone()),
                heartbeat_seconds: 2,
                backoff_max_seconds: 2,
                reconnect_spread_seconds: 1,
                heartbeat_window_seconds: 30,
                ..Options::default()
            };
            let progress = |line: &str| eprintln!("system: {line}");
            let mut system = System::start(env, &url, &dir, options, &progress)
                .await
                .unwrap();
            system.ensure_org().await.unwrap();
            let bins = Binaries::locate().unwrap();
            for cluster in env.workloads() {
                system.register(cluster, &bins).await.unwrap();
            }
            system.wait_connected(CONVERGE).await.unwrap();
            std::mem::forget(database); // the database lives as long as the system
            Mutex::new(Guarded {
                f: Fixture { env, system },
                database_link,
                traces,
            })
        })
        .await
        .lock()
        .await
}

async fn get(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The sum of the samples of `metric` whose labels include every `labels` pair (`k="v"`).
fn sample(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, rest) = series.split_once('{').unwrap_or((series, ""));
            (name == metric && labels.iter().all(|l| rest.contains(l)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Every program's `/metrics`, by program name (`hub-0`, `controllers-1`, `apiserver`,
/// `agent-east`).
async fn scrape(system: &System) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, url) in system.admin_urls() {
        let (status, text) = get(&format!("{url}/metrics")).await;
        assert_eq!(status, 200, "{name} /metrics: {text}");
        out.push((name, text));
    }
    out
}

/// `metric` summed over every program whose name starts with `program`.
fn total(scraped: &[(String, String)], program: &str, metric: &str, labels: &[&str]) -> f64 {
    scraped
        .iter()
        .filter(|(name, _)| name.starts_with(program))
        .map(|(_, text)| sample(text, metric, labels))
        .sum()
}

/// `/readyz` of `program`: its status and body.
async fn readyz(system: &System, program: &str) -> (u16, Value) {
    let url = system
        .admin_urls()
        .into_iter()
        .find(|(name, _)| name == program)
        .map(|(_, url)| url)
        .unwrap_or_else(|| panic!("no admin endpoint for {program}"));
    let (status, body) = get(&format!("{url}/readyz")).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// Whether `/readyz` of `program` fails naming `dependency`.
async fn fails_on(system: &System, program: &str, dependency: &str) -> bool {
    let (status, body) = readyz(system, program).await;
    status == 503
        && body["failing"]
            .as_array()
            .is_some_and(|f| f.iter().any(|d| d["dependency"] == dependency))
}

async fn ready(system: &System, program: &str) -> bool {
    readyz(system, program).await.0 == 200
}

#[test]
fn every_program_serves_health_and_a_deploy_moves_its_metrics() {
    run(async {
        let mut guard = fixture().await;
        let f = &mut guard.f;
        let programs = f.system.admin_urls();
        assert_eq!(programs.len(), 2 + 2 + 1 + 2, "{programs:?}");
        for (name, url) in &programs {
            assert_eq!(get(&format!("{url}/healthz")).await.0, 200, "{name}");
            eventually(&format!("{name} ready"), CONVERGE, async || {
                ready(&f.system, name).await
            })
            .await;
        }
        let before = scrape(&f.system).await;
        for (name, text) in &before {
            let prefix = match name.split('-').next().unwrap() {
                "agent" => "kubenest_agent_",
                other => &format!("kubenest_{other}_"),
            };
            assert!(text.contains(prefix), "{name} has no {prefix} metrics");
            assert!(text.ends_with("# EOF\n"), "{name}: not OpenMetrics");
        }

        let (project_id, namespace) = f.project("east", "metrics").await;
        let mut admin = f.admin().await;
        let app_id = create(&mut admin, &project_id, "web", "nginx:1.27").await;
        let expect = Expect {
            app_id: &app_id,
            name: "web",
            image: "nginx:1.27",
            operations: &["create"],
        };
        converged(f, "east", &namespace, &[expect]).await;

        // The outcome is recorded a moment after the App shows Running.
        let confirmed = r#"outcome="succeeded""#;
        let count = "kubenest_controllers_revision_confirmation_seconds_count";
        let mut after = Vec::new();
        eventually(
            "the revision's confirmation measured",
            CONVERGE,
            async || {
                after = scrape(&f.system).await;
                total(&after, "controllers", count, &[confirmed])
                    > total(&before, "controllers", count, &[confirmed])
            },
        )
        .await;
        let moved = |program: &str, metric: &str, labels: &[&str]| {
            let delta =
                total(&after, program, metric, labels) - total(&before, program, metric, labels);
            assert!(delta > 0.0, "{program} {metric}{labels:?} did not move");
            delta
        };
        let created = [
            r#"method="POST""#,
            r#"route="/api/v1/apps""#,
            r#"status="202""#,
        ];
        assert_eq!(
            moved(
                "apiserver",
                "kubenest_apiserver_http_requests_total",
                &created
            ),
            1.0
        );
        let app = [r#"controller="app""#];
        moved("controllers", "kubenest_controllers_reconciles_total", &app);
        moved(
            "controllers",
            "kubenest_controllers_reconcile_duration_seconds_count",
            &app,
        );
        let deploy = [r#"type="app.deploy""#];
        moved(
            "controllers",
            "kubenest_controllers_commands_sent_total",
            &deploy,
        );
        moved(
            "controllers",
            "kubenest_controllers_commands_acked_total",
            &deploy,
        );
        moved(
            "controllers",
            "kubenest_controllers_command_answers_total",
            &[r#"answer="accepted""#],
        );
        moved("hub", "kubenest_hub_frames_in_total", &deploy);
        moved(
            "agent-east",
            "kubenest_agent_commands_handled_total",
            &[r#"type="app.deploy""#, r#"outcome="accepted""#],
        );
        moved(
            "agent-east",
            "kubenest_agent_reconciles_total",
            &[r#"controller="stack""#],
        );
        moved(
            "agent-east",
            "kubenest_agent_apply_duration_seconds_count",
            &[],
        );
        // The Events the deploy told count under the same reasons the objects show.
        moved(
            "controllers",
            "kubenest_controllers_events_total",
            &[r#"reason="RevisionRecorded""#, r#"type="Normal""#],
        );
        moved(
            "agent-east",
            "kubenest_agent_events_total",
            &[r#"reason="RevisionAccepted""#],
        );
        // Gauges read live: the pool, the hub sessions, the agent's session.
        let busy_or_idle = total(
            &after,
            "apiserver",
            "kubenest_apiserver_db_connections",
            &[],
        );
        assert!(
            busy_or_idle > 0.0,
            "the API server's pool shows no connection"
        );
        assert_eq!(
            total(&after, "hub", "kubenest_hub_sessions", &[r#"kind="agent""#]),
            2.0
        );
        assert_eq!(
            total(&after, "agent-", "kubenest_agent_hub_connected", &[]),
            2.0
        );
        // No object names in any label.
        for (name, text) in &after {
            assert!(
                !text.contains(&app_id),
                "{name} labels a metric with the App's id"
            );
            assert!(
                !text.contains(&namespace),
                "{name} labels a metric with a namespace"
            );
        }
    });
}

#[test]
fn readiness_names_postgres_while_it_is_cut_off_and_recovers() {
    run(async {
        let guard = fixture().await;
        let system = &guard.f.system;
        for program in ["apiserver", "controllers-0", "controllers-1"] {
            eventually(&format!("{program} ready"), CONVERGE, async || {
                ready(system, program).await
            })
            .await;
        }
        guard.database_link.set_mode(LinkMode::Drop);
        for program in ["apiserver", "controllers-0", "controllers-1"] {
            eventually(
                &format!("{program} unready naming postgres"),
                CONVERGE,
                async || fails_on(system, program, "postgres").await,
            )
            .await;
        }
        // The management cluster is still reachable, and says so.
        let (_, body) = readyz(system, "apiserver").await;
        assert_eq!(body["checks"]["management_cluster"], "ok", "{body}");
        guard.database_link.set_mode(LinkMode::Pass);
        for program in ["apiserver", "controllers-0", "controllers-1"] {
            eventually(&format!("{program} ready again"), CONVERGE, async || {
                ready(system, program).await
            })
            .await;
        }
    });
}

#[test]
fn readiness_names_the_hub_while_an_agents_link_is_cut_and_recovers() {
    run(async {
        let mut guard = fixture().await;
        let system = &mut guard.f.system;
        eventually("agent-west ready", CONVERGE, async || {
            ready(system, "agent-west").await
        })
        .await;
        system.set_link("west", LinkMode::Drop).unwrap();
        eventually("agent-west unready naming the hub", CONVERGE, async || {
            fails_on(system, "agent-west", "hub").await
        })
        .await;
        let (_, body) = readyz(system, "agent-west").await;
        assert_eq!(body["checks"]["cluster"], "ok", "{body}");
        // The other agent's session is untouched.
        assert!(ready(system, "agent-east").await);
        system.set_link("west", LinkMode::Pass).unwrap();
        eventually("agent-west ready again", CONVERGE, async || {
            ready(system, "agent-west").await
        })
        .await;
    });
}

/// One App's create is one trace: the API request, the controllers' reconcile, the hub's route
/// and the agent's apply are spans of it, each exported by its own program.
#[test]
fn one_app_create_is_one_trace_across_the_api_the_controllers_the_hub_and_the_agent() {
    run(async {
        let guard = fixture().await;
        let f = &guard.f;
        let (project_id, _) = f.project("east", "traced").await;
        let mut admin = f.admin().await;
        let app_id = create(&mut admin, &project_id, "traced", "nginx:1.27").await;
        let programs = [
            "kubenest-apiserver",
            "kubenest-controllers",
            "kubenest-hub",
            "kubenest-agent",
        ];
        // The trace of the create: the one the API server's request span for it began.
        let whole = async || {
            let spans = guard.traces.spans();
            spans
                .iter()
                .filter(|s| s.service == "kubenest-apiserver" && s.name == "request")
                .map(|s| s.trace_id.clone())
                .find(|trace| {
                    programs.iter().all(|program| {
                        spans
                            .iter()
                            .any(|s| &s.trace_id == trace && s.service == *program)
                    })
                })
        };
        eventually(
            &format!("one trace with spans of all four programs for App {app_id}"),
            CONVERGE,
            async || whole().await.is_some(),
        )
        .await;
        let trace = whole().await.unwrap();
        let names: Vec<(String, String)> = guard
            .traces
            .spans()
            .into_iter()
            .filter(|s| s.trace_id == trace)
            .map(|s| (s.service, s.name))
            .collect();
        for (service, name) in [
            ("kubenest-controllers", "reconcile"),
            ("kubenest-hub", "route"),
            ("kubenest-agent", "command"),
        ] {
            assert!(
                names.iter().any(|(s, n)| s == service && n == name),
                "no {name} span of {service} in the trace: {names:?}"
            );
        }
    });
}
