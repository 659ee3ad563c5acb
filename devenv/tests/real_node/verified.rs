//! Verified deployments through the whole system on a real node, after the tour's step (a bad
//! change rolled back by kubenest, the rollback passing): what the rollback needs breaks too.
//! The demo's Postgres table refuses new rows (outside kubenest, as a bad migration would), so
//! every request to the web app answers 503. A person's next change fails its window, the
//! automatic rollback to the revision that passed fails its own, and kubenest stops there: the
//! App says `automation stopped`, a critical `verification_failed` alert is open (listed and
//! streamed), and no third deployment is made. Run by `install.rs` on the system it installed.

use std::time::{Duration, Instant};

use crate::common::kubectl_exec;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kubenest_cli::api::Client;
use kubenest_cli::cmd::text;
use kubenest_devenv::tour::EventStream;
use kubenest_devenv::tour::verified::with_error_ratio;
use kubenest_testkit::Cluster;
use serde_json::json;

/// How long the alerts list may lag the stream: one pass of the controllers' alert rules.
const ALERTED: Duration = Duration::from_secs(60);

/// The demo App `app_id` in `namespace` on `edge`, whose last revision passed; `org` its
/// organization.
pub struct Verified<'a> {
    pub admin: &'a mut Client,
    pub api_url: String,
    pub org: String,
    pub app_id: String,
    pub edge: &'a Cluster,
    pub namespace: String,
}

pub async fn a_broken_rollback_stops_the_automation(v: Verified<'_>) {
    let Verified {
        admin,
        api_url,
        org,
        app_id,
        edge,
        namespace,
    } = v;
    let path = format!("/api/v1/apps/{app_id}");
    let before = admin
        .get(&format!("{path}/deployments"))
        .await
        .unwrap()
        .as_array()
        .map_or(0, Vec::len);

    // The break: the demo writes a row on every request; its table now refuses any.
    let pods: Api<Pod> = Api::namespaced(edge.client().await.unwrap(), &namespace);
    let selector = ListParams::default().labels("app.kubernetes.io/name=postgres");
    let db = pods.list(&selector).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    kubectl_exec(
        edge,
        &namespace,
        &db,
        "psql -U app -d app -v ON_ERROR_STOP=1 -c \
         'ALTER TABLE demo_visits ADD CONSTRAINT refuse_rows CHECK (false) NOT VALID'",
    );

    let mut stream = EventStream::open(&api_url, admin, &app_id).await.unwrap();
    let app = admin.get(&path).await.unwrap();
    let mut components = app["components"].clone();
    with_error_ratio(&mut components, "0.1").unwrap();
    let started = Instant::now();
    admin
        .patch(&path, &json!({"components": components}))
        .await
        .unwrap();

    // The person's change fails; kubenest rolls back; the rollback fails; the automation stops.
    let change = until(&mut stream, "the change's deployment", |e| {
        e.kind == "deployment"
    })
    .await;
    let changed = text(&change.data["revision"]);
    let failed = until(&mut stream, "the change's verdict", |e| {
        e.kind == "app.verification" && e.data["revision"] == changed.as_str()
    })
    .await;
    assert_eq!(failed.data["verdict"], "Failed", "{}", failed.data);
    let ratio = failed.data["signals"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "error_ratio"))
        .and_then(|s| s["value"].as_f64());
    assert!(
        ratio.is_some_and(|r| r > 0.9),
        "every request fails: {}",
        failed.data
    );
    let rollback = until(&mut stream, "the automatic rollback", |e| {
        e.kind == "deployment" && e.data["revision"] != changed.as_str()
    })
    .await;
    let restored = text(&rollback.data["revision"]);
    let stopped = until(&mut stream, "the automation stopped", |e| {
        e.kind == "app.verification"
            && e.data["revision"] == restored.as_str()
            && text(&e.data["action"]).starts_with("automation stopped")
    })
    .await;
    assert_eq!(stopped.data["verdict"], "Failed", "{}", stopped.data);
    let alert = until(&mut stream, "the alert", |e| {
        e.kind == "alert" && e.data["alert"] == "verification_failed"
    })
    .await;
    assert_eq!(
        (&alert.data["state"], &alert.data["severity"]),
        (&json!("open"), &json!("critical")),
        "{}",
        alert.data
    );
    eprintln!(
        "a broken rollback: the automation stopped {:.1}s after the change",
        started.elapsed().as_secs_f64()
    );

    // The App says why; the alert is listed; one automatic action only.
    let app = admin.get(&path).await.unwrap();
    assert!(
        text(&app["verdict"]["action"]).contains("failed its verification too"),
        "{app}"
    );
    // The alert's row is opened by the controllers' alert pass, which follows the status.
    let listed = Instant::now();
    let open = loop {
        let alerts = admin
            .get(&format!("/api/v1/orgs/{org}/alerts?state=open"))
            .await
            .unwrap();
        let open = alerts
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["kind"] == "verification_failed" && a["subject_id"] == app_id.as_str());
        if let Some(open) = open {
            break open.clone();
        }
        assert!(
            listed.elapsed() < ALERTED,
            "no open verification_failed alert: {alerts}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(open["severity"], "critical", "{open}");
    // Nothing more is done by itself.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let history = admin.get(&format!("{path}/deployments")).await.unwrap();
    let rows = history.as_array().unwrap();
    assert_eq!(
        rows.len(),
        before + 2,
        "the change and one rollback: {history}"
    );
    assert_eq!(
        (&rows[0]["actor"], &rows[0]["verification"]["verdict"]),
        (&json!("kubenest"), &json!("Failed")),
        "{history}"
    );
}

async fn until(
    stream: &mut EventStream,
    what: &str,
    want: impl Fn(&kubenest_devenv::tour::Event) -> bool,
) -> kubenest_devenv::tour::Event {
    stream
        .until(want)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e:#}"))
}
