//! The hub over real sockets: admission, routing, floors, replacement, slow consumers, malformed
//! frames and shutdown.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::*;
use kubenest_contracts::{ErrorCode, Message, NackReason};

/// A hub with floors for c1 (acme, version ≥ 1) and c2 (globex), a backend and an agent of c1.
struct Setup {
    keys: Keys,
    hub: TestHub,
    backend: Client,
    agent: Client,
}

async fn setup(extra: &[&str]) -> Setup {
    let keys = keys();
    let hub = start_hub(&keys, extra).await;
    let mut backend = connect(&hub.url, BACKEND, &keys.backend()).await;
    backend
        .send(&floors_snapshot(vec![
            floor("c1", "acme", 1),
            floor("c2", "globex", 1),
        ]))
        .await;
    let agent = eventually_connect(&hub.url, &keys.cluster("c1", "acme", 1)).await;
    Setup {
        keys,
        hub,
        backend,
        agent,
    }
}

/// Floors are applied asynchronously to the backend's send: retry the 503 briefly.
async fn eventually_connect(url: &str, token: &str) -> Client {
    for _ in 0..50 {
        match try_connect(url, Some(AGENT), Some(token)).await {
            Ok(client) => return client,
            Err(refused) if refused.status == 503 => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(refused) => panic!("agent refused: {refused:?}"),
        }
    }
    panic!("agent still refused with 503");
}

#[tokio::test]
async fn agents_get_503_with_retry_after_until_floors_arrive() {
    let keys = keys();
    let hub = start_hub(&keys, &[]).await;
    let token = keys.cluster("c1", "acme", 1);
    let refused = try_connect(&hub.url, Some(AGENT), Some(&token))
        .await
        .err()
        .unwrap();
    assert_eq!(refused.status, 503);
    assert_eq!(refused.retry_after.as_deref(), Some("5"));

    // Backends are admitted without floors: they are the ones who bring them.
    let mut backend = connect(&hub.url, BACKEND, &keys.backend()).await;
    backend
        .send(&floors_snapshot(vec![floor("c1", "acme", 1)]))
        .await;
    eventually_connect(&hub.url, &token).await;
}

#[tokio::test]
async fn bad_tokens_and_wrong_roles_are_refused_before_the_upgrade() {
    let s = setup(&[]).await;
    let url = &s.hub.url;
    let other = keys();
    let cases: Vec<(&str, Option<&str>, Option<String>, u16)> = vec![
        ("no subprotocol", None, Some(s.keys.backend()), 400),
        ("no token", Some(AGENT), None, 401),
        (
            "garbage token",
            Some(AGENT),
            Some("abc.def.ghi".into()),
            401,
        ),
        (
            "signed by another key",
            Some(AGENT),
            Some(other.cluster("c1", "acme", 1)),
            401,
        ),
        (
            "cluster token as backend",
            Some(BACKEND),
            Some(s.keys.cluster("c1", "acme", 1)),
            401,
        ),
        (
            "backend token as agent",
            Some(AGENT),
            Some(s.keys.backend()),
            401,
        ),
        (
            "below the floor",
            Some(AGENT),
            Some(s.keys.cluster("c1", "acme", 0)),
            403,
        ),
        (
            "unregistered cluster",
            Some(AGENT),
            Some(s.keys.cluster("c9", "acme", 1)),
            403,
        ),
        (
            "another org's cluster",
            Some(AGENT),
            Some(s.keys.cluster("c2", "acme", 1)),
            403,
        ),
    ];
    for (name, protocol, token, status) in cases {
        let refused = try_connect(url, protocol, token.as_deref()).await.err();
        let refused = refused.unwrap_or_else(|| panic!("{name}: accepted"));
        assert_eq!(refused.status, status, "{name}: {refused:?}");
        // The API's error shape: an RFC 9457 problem.
        assert!(
            refused
                .body
                .contains("\"type\":\"tag:kubenest.io,2026:problem:"),
            "{name}: body {}",
            refused.body
        );
    }
    let metrics = reqwest::get(format!("{}/metrics", s.hub.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"kubenest_hub_rejections_total{reason="bad_token"} 4"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kubenest_hub_rejections_total{reason="forbidden"} 3"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_command_reaches_its_agent_unchanged_and_is_acknowledged() {
    let mut s = setup(&[]).await;
    let command = command("c1", "acme");
    s.backend.send(&command).await;
    let received = s.agent.frame().await;
    assert_eq!(received, command);
    assert!(
        matches!(route_reply(&mut s.backend, &command).await, Message::RouteAck(a) if a.command_id == command.id)
    );
}

#[tokio::test]
async fn commands_without_a_session_or_for_another_org_are_nacked() {
    let mut s = setup(&[]).await;
    let absent = command("c2", "globex");
    s.backend.send(&absent).await;
    assert!(
        matches!(route_reply(&mut s.backend, &absent).await, Message::RouteNack(n) if n.reason == NackReason::NoSession)
    );

    let cross_org = command("c1", "globex");
    s.backend.send(&cross_org).await;
    assert!(
        matches!(route_reply(&mut s.backend, &cross_org).await, Message::RouteNack(n) if n.reason == NackReason::OrgMismatch)
    );
    s.agent.expect_silence().await;
}

#[tokio::test]
async fn status_reaches_backends_but_an_agent_cannot_speak_for_another_cluster() {
    let mut s = setup(&[]).await;
    let mut second_backend = connect(&s.hub.url, BACKEND, &s.keys.backend()).await;
    let own = heartbeat("c1", "acme");
    s.agent.send(&own).await;
    assert_eq!(s.backend.frame().await, own);
    assert_eq!(second_backend.frame().await, own);

    let foreign = heartbeat("c2", "globex");
    s.agent.send(&foreign).await;
    let Message::Error(error) = s.agent.frame().await.message else {
        panic!("expected an error frame")
    };
    assert_eq!(
        (error.code, error.path.as_str()),
        (ErrorCode::Forbidden, "/cluster_id")
    );
    assert_eq!(error.frame_id, Some(foreign.id));
    s.backend.expect_silence().await;

    // Nor may it send commands.
    s.agent.send(&command("c1", "acme")).await;
    let Message::Error(error) = s.agent.frame().await.message else {
        panic!("expected an error frame")
    };
    assert_eq!(error.code, ErrorCode::Forbidden);
}

#[tokio::test]
async fn raising_a_floor_cuts_the_live_session_within_a_second() {
    let mut s = setup(&[]).await;
    let started = Instant::now();
    s.backend
        .send(&floors_update(vec![floor("c1", "acme", 2)]))
        .await;
    assert_eq!(s.agent.closed(Duration::from_secs(1)).await, Some(4003));
    assert!(started.elapsed() < Duration::from_secs(1));
    let refused = try_connect(
        &s.hub.url,
        Some(AGENT),
        Some(&s.keys.cluster("c1", "acme", 1)),
    )
    .await;
    assert_eq!(refused.err().unwrap().status, 403);
    connect(&s.hub.url, AGENT, &s.keys.cluster("c1", "acme", 2)).await;
}

#[tokio::test]
async fn a_floors_update_is_acknowledged_once_the_old_token_is_refused_and_its_session_cut() {
    let mut s = setup(&[]).await;
    let update = floors_update(vec![floor("c1", "acme", 2)]);
    s.backend.send(&update).await;
    let applied = s.backend.applied(&update).await;
    assert_eq!(applied.sessions_cut, 1);
    // No wait between the acknowledgement and the attempt: the floor is already in force.
    let refused = try_connect(
        &s.hub.url,
        Some(AGENT),
        Some(&s.keys.cluster("c1", "acme", 1)),
    )
    .await;
    assert_eq!(refused.err().unwrap().status, 403);
    assert_eq!(s.agent.closed(Duration::from_secs(5)).await, Some(4003));

    // A snapshot computed before the rotation does not lower the floor again.
    let stale = floors_snapshot(vec![floor("c1", "acme", 1), floor("c2", "globex", 1)]);
    s.backend.send(&stale).await;
    assert_eq!(s.backend.applied(&stale).await.sessions_cut, 0);
    let refused = try_connect(
        &s.hub.url,
        Some(AGENT),
        Some(&s.keys.cluster("c1", "acme", 1)),
    )
    .await;
    assert_eq!(refused.err().unwrap().status, 403);
}

#[tokio::test]
async fn a_second_session_of_a_cluster_replaces_the_first() {
    let mut s = setup(&[]).await;
    let mut newer = connect(&s.hub.url, AGENT, &s.keys.cluster("c1", "acme", 1)).await;
    assert_eq!(s.agent.closed(Duration::from_secs(2)).await, Some(4001));
    let command = command("c1", "acme");
    s.backend.send(&command).await;
    assert_eq!(newer.frame().await, command);
}

#[tokio::test]
async fn a_slow_agent_is_disconnected_and_its_commands_nacked() {
    let mut s = setup(&["--send-queue=4", "--write-timeout=2"]).await;
    // The agent never reads: once the socket buffers fill, the queue fills, and the hub gives up.
    let mut big = command("c1", "acme");
    if let Message::AppDeploy(deploy) = &mut big.message {
        let blob = serde_json::Value::String("x".repeat(200_000));
        let kubenest_contracts::Component::Addon(addon) = &mut deploy.components[0] else {
            panic!()
        };
        addon.values.insert("blob".into(), blob);
    }
    let mut nacked = None;
    for _ in 0..2000 {
        let mut each = big.clone();
        each.id = uuid::Uuid::new_v4();
        s.backend.send(&each).await;
        if let common::Next::Frame(reply) = s.backend.next(Duration::from_millis(1)).await
            && let Message::RouteNack(nack) = reply.message
        {
            nacked = Some(nack.reason);
            break;
        }
    }
    // Drain acks until the nack if the loop ended on an ack.
    while nacked.is_none() {
        if let Message::RouteNack(nack) = s.backend.frame().await.message {
            nacked = Some(nack.reason);
        }
    }
    assert!(
        matches!(nacked, Some(NackReason::QueueFull | NackReason::NoSession)),
        "{nacked:?}"
    );
    // From now on the cluster has no session.
    let probe = command("c1", "acme");
    s.backend.send(&probe).await;
    loop {
        let reply = s.backend.frame().await;
        if reply.correlation_id == Some(probe.id) {
            assert!(
                matches!(reply.message, Message::RouteNack(n) if n.reason == NackReason::NoSession)
            );
            break;
        }
    }
}

#[tokio::test]
async fn malformed_frames_are_answered_never_forwarded_and_repeat_offenders_closed() {
    let mut s = setup(&["--max-malformed=3"]).await;
    s.backend.send_raw("{not json").await;
    let Message::Error(error) = s.backend.frame().await.message else {
        panic!("expected an error frame")
    };
    assert_eq!(error.code, ErrorCode::MalformedJson);

    let mut bad = serde_json::to_value(command("c1", "acme")).unwrap();
    bad["payload"]["components"][1]["replicas"] = serde_json::json!(-5);
    s.backend.send_raw(&bad.to_string()).await;
    let Message::Error(error) = s.backend.frame().await.message else {
        panic!("expected an error frame")
    };
    assert_eq!(
        (error.code, error.path.as_str()),
        (ErrorCode::Invalid, "/payload/components/1/replicas")
    );
    s.agent.expect_silence().await;

    s.backend.send_raw("[]").await;
    s.backend.send_raw("42").await;
    assert_eq!(s.backend.closed(Duration::from_secs(2)).await, Some(1008));
}

#[tokio::test]
async fn shutdown_closes_every_session_with_going_away() {
    let mut s = setup(&[]).await;
    s.hub.shutdown.cancel();
    assert_eq!(s.agent.closed(Duration::from_secs(5)).await, Some(1001));
    assert_eq!(s.backend.closed(Duration::from_secs(5)).await, Some(1001));
    tokio::time::timeout(Duration::from_secs(15), s.hub.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_silent_agent_is_detected_by_its_missing_pongs_and_dropped() {
    let mut s = setup(&["--ping-interval=1", "--idle-timeout=2"]).await;
    // The agent never reads again, so it never answers a ping.
    let started = Instant::now();
    loop {
        let probe = command("c1", "acme");
        s.backend.send(&probe).await;
        match route_reply(&mut s.backend, &probe).await {
            Message::RouteAck(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            Message::RouteNack(nack) => {
                assert_eq!(nack.reason, NackReason::NoSession);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "silent agent never dropped"
        );
    }
    drop(s.agent);
}
