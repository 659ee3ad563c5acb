//! What the hub does with each valid frame: route commands, fan status out, apply floors, and
//! answer everything else with an `error` frame.

use std::time::Instant;

use axum::extract::ws::Utf8Bytes;
use kubenest_contracts::{
    Checked, Direction, Envelope, ErrorCode, ErrorFrame, FloorsApplied, FrameError, Id, Identity,
    LogEnd, LogEndReason, LogsUnsubscribe, Message, MessageType, NackReason, RouteAck, RouteNack,
};
use uuid::Uuid;

use crate::Hub;
use crate::logs::{LogRoute, RouteKind};
use crate::metrics::TypeLabel;
use crate::sessions::{Outbound, Outbox, PendingAck, QueueError, close};

/// The session a frame came from.
#[derive(Debug)]
pub(crate) struct Peer {
    pub session_id: u64,
    pub identity: Identity,
    pub outbox: Outbox,
    pub malformed: u32,
}

/// Handles one text frame from `peer`. Commands and status are forwarded as the bytes that
/// arrived: the checks read only the header, and the frame needs no rewriting because an
/// agent's status must already name its own cluster.
pub(crate) fn handle_text(hub: &Hub, peer: &mut Peer, text: Utf8Bytes) {
    let frame = match hub.validator.check(text.as_bytes()) {
        Ok(frame) => frame,
        Err(error) => return malformed(hub, peer, &error),
    };
    let kind = frame.message_type.as_str();
    hub.metrics
        .frames_in
        .get_or_create(&TypeLabel { r#type: kind })
        .inc();
    match (&peer.identity, frame.direction) {
        (Identity::Backend { .. }, Direction::Command) => route_command(hub, peer, &frame, text),
        (Identity::Backend { .. }, Direction::Control) => match frame.into_envelope() {
            Ok(envelope) => apply_control(hub, peer, envelope),
            Err(error) => malformed(hub, peer, &error),
        },
        (
            Identity::Cluster {
                cluster_id, org_id, ..
            },
            Direction::Status,
        ) => {
            if frame.cluster_id.as_ref() != Some(cluster_id)
                || frame.org_id.as_ref() != Some(org_id)
            {
                hub.metrics.reject("foreign_cluster");
                let message = "an agent may only send status for its own cluster and organization";
                return forbid(hub, peer, frame.id, "/cluster_id", message);
            }
            match frame.message_type {
                MessageType::LogLines | MessageType::LogEnd | MessageType::ObjectsSnapshot => {
                    route_log_frame(hub, peer, &frame, cluster_id, text)
                }
                _ => fan_out_status(hub, kind, text),
            }
        }
        (Identity::Cluster { .. }, _) => {
            hub.metrics.reject("wrong_direction");
            forbid(
                hub,
                peer,
                frame.id,
                "/direction",
                "agents send only status frames",
            );
        }
        (Identity::Backend { .. }, Direction::Status) => {
            hub.metrics.reject("wrong_direction");
            forbid(
                hub,
                peer,
                frame.id,
                "/direction",
                "backends send only commands and floors",
            );
        }
    }
}

fn malformed(hub: &Hub, peer: &mut Peer, error: &FrameError) {
    peer.malformed += 1;
    hub.metrics.reject(match error.code {
        ErrorCode::TooLarge => "too_large",
        ErrorCode::MalformedJson => "malformed_json",
        ErrorCode::TooDeep => "too_deep",
        ErrorCode::UnknownType => "unknown_type",
        ErrorCode::UnsupportedVersion => "unsupported_version",
        ErrorCode::Forbidden => "forbidden",
        ErrorCode::Invalid => "invalid",
    });
    tracing::debug!(code = ?error.code, path = %error.path, "malformed frame");
    reply(
        hub,
        &peer.outbox,
        error_frame(error.to_error_frame(), error.frame_id),
    );
    if peer.malformed > hub.settings.max_malformed {
        peer.outbox
            .close(close::POLICY, "too many malformed frames");
    }
}

fn forbid(hub: &Hub, peer: &Peer, frame_id: Uuid, path: &str, message: &str) {
    let frame = ErrorFrame {
        code: ErrorCode::Forbidden,
        message: message.to_owned(),
        path: path.to_owned(),
        frame_id: Some(frame_id),
    };
    reply(hub, &peer.outbox, error_frame(frame, Some(frame_id)));
}

fn error_frame(frame: ErrorFrame, reply_to: Option<Uuid>) -> Envelope {
    let envelope = Envelope::new(frame);
    match reply_to {
        Some(id) => envelope.replying_to(id),
        None => envelope,
    }
}

/// Queues a frame the hub itself produced.
pub(crate) fn reply(hub: &Hub, outbox: &Outbox, envelope: Envelope) {
    let kind = envelope.message_type().as_str();
    match hub.validator.encode(&envelope) {
        Ok(text) => {
            let _ = outbox.send(Outbound {
                text: text.into(),
                kind,
                ack: None,
            });
        }
        Err(error) => tracing::error!(%error, kind, "the hub built an invalid frame"),
    }
}

fn route_command(hub: &Hub, peer: &Peer, command: &Checked, text: Utf8Bytes) {
    let started = Instant::now();
    // A span of the sender's trace: the route between the reconcile and the agent's apply.
    let span = tracing::info_span!(
        "route",
        command_id = %command.id,
        kind = command.message_type.as_str()
    );
    if let Some(parent) = &command.traceparent {
        kubenest_runtime::traces::continue_from(&span, parent);
    }
    let _in_span = span.enter();
    // The validator guarantees both on commands.
    let (Some(cluster_id), Some(org_id)) = (&command.cluster_id, &command.org_id) else {
        return nack(
            hub,
            peer,
            command,
            NackReason::Invalid,
            "command without cluster_id or org_id",
        );
    };
    let registered = hub.floors.org_of(cluster_id);
    let agent = hub.sessions.agent(cluster_id);
    // The session's own org is checked too: a floor may move a cluster between organizations
    // while its session is being cut.
    let refusal = match (&registered, &agent) {
        (None, _) => Some((NackReason::NoSession, "cluster is not registered")),
        (Some(org), _) if org != org_id => Some((
            NackReason::OrgMismatch,
            "cluster belongs to another organization",
        )),
        (_, Some(session)) if &session.org_id != org_id => Some((
            NackReason::OrgMismatch,
            "cluster belongs to another organization",
        )),
        (_, None) => Some((
            NackReason::NoSession,
            "no session of this cluster on this replica",
        )),
        _ => None,
    };
    if let Some((reason, message)) = refusal {
        tracing::debug!(command_id = %command.id, %cluster_id, ?reason, "command not routed");
        if reason == NackReason::OrgMismatch {
            hub.metrics.reject("org_mismatch");
        }
        return nack(hub, peer, command, reason, message);
    }
    let Some(agent) = agent else { return };
    let ack = PendingAck {
        command_id: command.id,
        reply_to: peer.outbox.clone(),
        started,
    };
    let kind = command.message_type.as_str();
    // A log stream's frames (an objects request's answer) will go to this backend only; opened
    // before the command leaves, so that no frame can arrive before its route.
    let subscription = match command.message_type {
        MessageType::LogsSubscribe | MessageType::LogsUnsubscribe => {
            command.payload_str("subscription_id").map(str::to_owned)
        }
        MessageType::ObjectsRequest => command.payload_str("request_id").map(str::to_owned),
        _ => None,
    };
    let opens = match command.message_type {
        MessageType::LogsSubscribe => Some(RouteKind::Logs),
        MessageType::ObjectsRequest => Some(RouteKind::Objects),
        _ => None,
    };
    match (opens, &subscription) {
        (Some(kind), Some(id)) => {
            let route = LogRoute {
                kind,
                backend_session: peer.session_id,
                backend: peer.outbox.clone(),
                agent_session: agent.session_id,
                org_id: org_id.clone(),
            };
            hub.logs.open(cluster_id, id, route);
        }
        (None, Some(id)) => {
            hub.logs.close(cluster_id, id);
        }
        _ => {}
    }
    hub.metrics.log_routes.set(gauge(hub.logs.len()));
    // The payload (and its revision) is opaque here: the command id links this line to the
    // controllers' `command sent` and the agent's `command` span, which name the revision.
    tracing::debug!(command_id = %command.id, %cluster_id, kind, "command routed");
    match agent.outbox.send(Outbound {
        text,
        kind,
        ack: Some(ack),
    }) {
        Ok(()) => {}
        Err(error) if opens.is_some() => {
            if let Some(id) = &subscription {
                hub.logs.close(cluster_id, id);
            }
            let reason = match error {
                QueueError::Full => NackReason::QueueFull,
                QueueError::Closed => NackReason::NoSession,
            };
            nack(
                hub,
                peer,
                command,
                reason,
                "the agent's session is not taking frames",
            )
        }
        Err(QueueError::Full) => {
            hub.metrics.reject("queue_full");
            let message = "the agent is not keeping up and was disconnected";
            nack(hub, peer, command, NackReason::QueueFull, message)
        }
        Err(QueueError::Closed) => nack(
            hub,
            peer,
            command,
            NackReason::NoSession,
            "the agent's session has ended",
        ),
    }
}

fn nack(hub: &Hub, peer: &Peer, command: &Checked, reason: NackReason, message: &str) {
    let payload = RouteNack {
        command_id: command.id,
        reason,
        message: message.to_owned(),
    };
    reply(
        hub,
        &peer.outbox,
        with_route(Envelope::new(payload).replying_to(command.id), command),
    );
}

/// The route.ack for a command now written to its agent's socket.
pub(crate) fn ack(hub: &Hub, pending: &PendingAck, cluster_id: &Id, org_id: &Id) {
    hub.metrics
        .route_latency
        .observe(pending.started.elapsed().as_secs_f64());
    let envelope = Envelope::new(RouteAck {
        command_id: pending.command_id,
    })
    .replying_to(pending.command_id)
    .for_cluster(cluster_id.clone(), org_id.clone());
    reply(hub, &pending.reply_to, envelope);
}

fn with_route(envelope: Envelope, command: &Checked) -> Envelope {
    match (&command.cluster_id, &command.org_id) {
        (Some(c), Some(o)) => envelope.for_cluster(c.clone(), o.clone()),
        _ => envelope,
    }
}

fn fan_out_status(hub: &Hub, kind: &'static str, text: Utf8Bytes) {
    for backend in hub.sessions.backend_outboxes() {
        // Frames are reference-counted: fanning out copies no bytes.
        if backend.send(Outbound {
            text: text.clone(),
            kind,
            ack: None,
        }) == Err(QueueError::Full)
        {
            hub.metrics.reject("queue_full");
        }
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A `log.lines`, `log.end` or `objects.snapshot` goes to its subscriber only. Lines nobody
/// reads any more make the agent stop the stream.
fn route_log_frame(hub: &Hub, peer: &Peer, frame: &Checked, cluster_id: &Id, text: Utf8Bytes) {
    let key = match frame.message_type {
        MessageType::ObjectsSnapshot => "request_id",
        _ => "subscription_id",
    };
    let Some(id) = frame.payload_str(key) else {
        return;
    };
    let subscriber = match frame.message_type {
        MessageType::LogEnd | MessageType::ObjectsSnapshot => hub.logs.close(cluster_id, id),
        _ => hub.logs.subscriber(cluster_id, id),
    };
    hub.metrics.log_routes.set(gauge(hub.logs.len()));
    let kind = frame.message_type.as_str();
    let sent = subscriber.map(|backend| {
        backend.send(Outbound {
            text,
            kind,
            ack: None,
        })
    });
    match sent {
        Some(Err(QueueError::Full)) => hub.metrics.reject("queue_full"),
        Some(_) => {}
        None if frame.message_type == MessageType::LogLines => {
            let Some(org_id) = &frame.org_id else { return };
            let stop = Envelope::new(LogsUnsubscribe {
                subscription_id: Id::new(id),
            })
            .for_cluster(cluster_id.clone(), org_id.clone());
            reply(hub, &peer.outbox, stop);
        }
        None => {}
    }
}

/// An agent session ended: each of its streams' subscribers is told why no more lines come.
pub(crate) fn agent_gone(hub: &Hub, cluster_id: &Id, agent_session: u64) {
    for (id, route) in hub.logs.agent_gone(cluster_id, agent_session) {
        if route.kind == RouteKind::Objects {
            // Its asker stops waiting at its own deadline.
            continue;
        }
        let end = Envelope::new(LogEnd {
            subscription_id: Id::new(id),
            reason: LogEndReason::SessionDropped,
            message: "the cluster's agent session with the hub ended".into(),
        })
        .for_cluster(cluster_id.clone(), route.org_id);
        reply(hub, &route.backend, end);
    }
    hub.metrics.log_routes.set(gauge(hub.logs.len()));
}

/// A backend session ended: the agents stop the streams it was reading.
pub(crate) fn backend_gone(hub: &Hub, backend_session: u64) {
    for (cluster_id, id, org_id, kind) in hub.logs.backend_gone(backend_session) {
        if kind == RouteKind::Logs
            && let Some(agent) = hub.sessions.agent(&cluster_id)
        {
            let stop = Envelope::new(LogsUnsubscribe {
                subscription_id: Id::new(id),
            })
            .for_cluster(cluster_id, org_id);
            reply(hub, &agent.outbox, stop);
        }
    }
    hub.metrics.log_routes.set(gauge(hub.logs.len()));
}

fn apply_control(hub: &Hub, peer: &Peer, envelope: Envelope) {
    let affected = match envelope.message {
        Message::FloorsSnapshot(snapshot) => match hub.floors.apply_snapshot(snapshot) {
            Ok(affected) => affected,
            Err(message) => return forbid(hub, peer, envelope.id, "/payload/part", &message),
        },
        Message::FloorsUpdate(update) => hub.floors.apply_update(update),
        _ => {
            hub.metrics.reject("wrong_direction");
            return forbid(
                hub,
                peer,
                envelope.id,
                "/type",
                "backends send only floors control frames",
            );
        }
    };
    let mut cut = 0u32;
    for cluster_id in affected {
        if let Some(agent) = hub.sessions.agent(&cluster_id)
            && !hub
                .floors
                .permits(&cluster_id, &agent.org_id, agent.token_version)
        {
            tracing::info!(%cluster_id, "cutting session: token revoked");
            agent.outbox.close(close::REVOKED, "cluster token revoked");
            cut = cut.saturating_add(1);
        }
    }
    // Admission reads the floors just written, and the revoked sessions' close is queued: the
    // backend may tell its caller the old token is dead on this replica.
    let applied = FloorsApplied {
        frame_id: envelope.id,
        sessions_cut: cut,
    };
    reply(
        hub,
        &peer.outbox,
        Envelope::new(applied).replying_to(envelope.id),
    );
}
