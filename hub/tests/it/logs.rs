//! Log streams through the hub over real sockets: `log.lines` and `log.end` go only to the
//! backend session that subscribed; a subscriber that leaves makes the agent stop, and an agent
//! session that ends tells the subscriber why.

use crate::common::*;
use kubenest_contracts::{
    AppRef, Envelope, Id, LogEnd, LogEndReason, LogLine, LogLines, LogsSubscribe, Message, Name,
};

fn subscribe(id: &str) -> Envelope {
    Envelope::new(LogsSubscribe {
        subscription_id: Id::new(id),
        app: AppRef {
            app_id: Id::new("0d9a4c1e-2b3f-4a5b-9c8d-7e6f5a4b3c2d"),
            name: Name::new("shop"),
            project_id: Id::new("storefront"),
            namespace: Name::new("storefront"),
        },
        component: Name::new("web"),
        follow: true,
        tail_lines: None,
        since_seconds: None,
        previous: false,
    })
    .for_cluster(Id::from("c1"), Id::from("acme"))
}

fn lines(id: &str) -> Envelope {
    Envelope::new(LogLines {
        subscription_id: Id::new(id),
        lines: vec![LogLine {
            timestamp: chrono::Utc::now(),
            pod: "shop-web-1".into(),
            container: "web".into(),
            line: "listening".into(),
        }],
    })
    .for_cluster(Id::from("c1"), Id::from("acme"))
}

/// A hub with floors for c1, two backends and c1's agent.
async fn setup() -> (TestHub, Client, Client, Client, Keys) {
    let keys = keys();
    let hub = start_hub(&keys, &[]).await;
    let mut subscriber = connect(&hub.url, BACKEND, &keys.backend()).await;
    let snapshot = floors_snapshot(vec![floor("c1", "acme", 1)]);
    subscriber.send(&snapshot).await;
    subscriber.applied(&snapshot).await;
    let other = connect(&hub.url, BACKEND, &keys.backend()).await;
    let agent = connect(&hub.url, AGENT, &keys.cluster("c1", "acme", 1)).await;
    (hub, subscriber, other, agent, keys)
}

/// The subscriber's next frame other than route acknowledgements.
async fn next_status(client: &mut Client) -> Envelope {
    loop {
        let frame = client.frame().await;
        if !matches!(frame.message, Message::RouteAck(_) | Message::RouteNack(_)) {
            return frame;
        }
    }
}

#[tokio::test]
async fn log_frames_reach_only_the_backend_that_subscribed() {
    let (_hub, mut subscriber, mut other, mut agent, _keys) = setup().await;
    let command = subscribe("s1");
    subscriber.send(&command).await;
    assert_eq!(agent.frame().await, command);
    assert!(matches!(
        route_reply(&mut subscriber, &command).await,
        Message::RouteAck(_)
    ));

    let batch = lines("s1");
    agent.send(&batch).await;
    assert_eq!(next_status(&mut subscriber).await, batch);
    let end = Envelope::new(LogEnd {
        subscription_id: Id::new("s1"),
        reason: LogEndReason::PodEnded,
        message: String::new(),
    })
    .for_cluster(Id::from("c1"), Id::from("acme"));
    agent.send(&end).await;
    assert_eq!(next_status(&mut subscriber).await, end);
    other.expect_silence().await;

    // The route is closed: later lines of it reach nobody, and the agent is told to stop.
    agent.send(&lines("s1")).await;
    let stop = agent.frame().await;
    assert!(
        matches!(&stop.message, Message::LogsUnsubscribe(u) if u.subscription_id.as_str() == "s1"),
        "{stop:?}"
    );
    subscriber.expect_silence().await;
    other.expect_silence().await;
}

#[tokio::test]
async fn a_subscriber_that_leaves_stops_the_agent_and_a_dropped_agent_ends_the_stream() {
    let (_hub, mut subscriber, other, mut agent, _keys) = setup().await;
    let command = subscribe("s2");
    subscriber.send(&command).await;
    agent.frame().await;
    route_reply(&mut subscriber, &command).await;
    drop(subscriber);
    let stop = agent.frame().await;
    assert!(
        matches!(&stop.message, Message::LogsUnsubscribe(u) if u.subscription_id.as_str() == "s2"),
        "{stop:?}"
    );

    let mut reader = other;
    let command = subscribe("s3");
    reader.send(&command).await;
    agent.frame().await;
    route_reply(&mut reader, &command).await;
    drop(agent);
    let end = next_status(&mut reader).await;
    let Message::LogEnd(end) = end.message else {
        panic!("expected log.end, got {end:?}")
    };
    assert_eq!(
        (end.subscription_id.as_str(), end.reason),
        ("s3", LogEndReason::SessionDropped)
    );

    // Without the agent a subscribe is refused at once, never queued.
    let command = subscribe("s4");
    reader.send(&command).await;
    assert!(matches!(
        route_reply(&mut reader, &command).await,
        Message::RouteNack(_)
    ));
}

fn objects_request(id: &str) -> Envelope {
    Envelope::new(kubenest_contracts::ObjectsRequest {
        request_id: Id::new(id),
        app_id: Id::new("0d9a4c1e-2b3f-4a5b-9c8d-7e6f5a4b3c2d"),
    })
    .for_cluster(Id::from("c1"), Id::from("acme"))
}

fn objects_snapshot(id: &str) -> Envelope {
    Envelope::new(kubenest_contracts::ObjectsSnapshot {
        request_id: Id::new(id),
        objects: vec![],
        truncated: false,
        refused: None,
        taken_at: chrono::Utc::now(),
    })
    .for_cluster(Id::from("c1"), Id::from("acme"))
}

#[tokio::test]
async fn an_objects_snapshot_reaches_only_the_backend_that_asked_and_only_once() {
    let (_hub, mut asker, mut other, mut agent, _keys) = setup().await;
    let command = objects_request("r1");
    asker.send(&command).await;
    assert_eq!(agent.frame().await, command);
    assert!(matches!(
        route_reply(&mut asker, &command).await,
        Message::RouteAck(_)
    ));
    let answer = objects_snapshot("r1");
    agent.send(&answer).await;
    assert_eq!(next_status(&mut asker).await, answer);
    other.expect_silence().await;

    // The answer closed the route: a second one reaches nobody, and nothing is sent back.
    agent.send(&objects_snapshot("r1")).await;
    asker.expect_silence().await;
    other.expect_silence().await;
    agent.expect_silence().await;

    // An answer nobody asked for reaches nobody either.
    agent.send(&objects_snapshot("r-unasked")).await;
    asker.expect_silence().await;
    other.expect_silence().await;

    // An asker that leaves sends the agent nothing (there is no stream to stop).
    let command = objects_request("r2");
    other.send(&command).await;
    agent.frame().await;
    route_reply(&mut other, &command).await;
    drop(other);
    agent.expect_silence().await;
}
