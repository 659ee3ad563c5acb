//! A scripted agent: speaks the real protocol to a real hub over a real socket, keeps what it
//! was told in memory and answers like a well-behaved agent — or, when a test says so, drops
//! commands, refuses them, or reports another phase.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kubenest_contracts::{
    self as wire, AppPhase, Envelope, Message, ProjectPhase, RejectReason, Validator,
};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// How the agent behaves; tests change it while it runs.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Ignore the next N `app.deploy` commands entirely (as if lost).
    pub drop_deploys: u32,
    /// The phase reported after applying an unpaused `app.deploy`.
    pub app_phase: AppPhase,
    /// Refuse `app.deploy` with this reason, message and field.
    pub reject_deploys: Option<(RejectReason, String, Option<String>)>,
    /// Answer `app.delete` (false: leave deletions waiting).
    pub confirm_deletes: bool,
    /// The phase reported after accepting an `addon.apply`.
    pub addon_phase: wire::AddonPhase,
    /// Report a namespace `Ready` after accepting `project.ensure` (false: accept, never
    /// confirm).
    pub confirm_projects: bool,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            drop_deploys: 0,
            app_phase: AppPhase::Running,
            reject_deploys: None,
            confirm_deletes: true,
            addon_phase: wire::AddonPhase::Ready,
            confirm_projects: true,
        }
    }
}

#[derive(Debug, Clone)]
struct Held {
    deploy: wire::AppDeploy,
    phase: AppPhase,
}

#[derive(Debug, Default)]
struct State {
    behaviour: Behaviour,
    /// Every command received, in order.
    received: Vec<Envelope>,
    apps: BTreeMap<String, Held>,
    sequence: u64,
}

/// A connected scripted agent.
#[derive(Clone)]
pub struct Agent {
    state: Arc<Mutex<State>>,
    out: mpsc::UnboundedSender<Envelope>,
    closed: Arc<tokio::sync::Notify>,
    close_code: Arc<Mutex<Option<u16>>>,
    stop: tokio_util::sync::CancellationToken,
    cluster_id: wire::Id,
    org_id: wire::Id,
}

/// What the Cluster controller's token Secret holds.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub token: String,
    pub cluster_id: String,
    pub org_id: String,
}

impl Agent {
    /// Connects with the cluster's credentials, sends `hello` and a snapshot, and starts answering.
    pub async fn connect(url: &str, credentials: &Credentials) -> Result<Self, u16> {
        let token = &credentials.token;
        let mut request = url.into_client_request().unwrap();
        let headers = request.headers_mut();
        headers.insert(
            "Sec-WebSocket-Protocol",
            "kubenest.agent.v1".parse().unwrap(),
        );
        headers.insert("Authorization", format!("Bearer {token}").parse().unwrap());
        let socket = match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => socket,
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                return Err(response.status().as_u16());
            }
            Err(other) => panic!("agent connect: {other}"),
        };
        let (out, mut outgoing) = mpsc::unbounded_channel::<Envelope>();
        let agent = Self {
            state: Arc::default(),
            out,
            closed: Arc::default(),
            close_code: Arc::default(),
            stop: tokio_util::sync::CancellationToken::new(),
            cluster_id: wire::Id::new(&credentials.cluster_id),
            org_id: wire::Id::new(&credentials.org_id),
        };
        let (mut sink, mut stream) = socket.split();
        let me = agent.clone();
        tokio::spawn(async move {
            let validator = Validator::shared().unwrap();
            loop {
                tokio::select! {
                    _ = me.stop.cancelled() => {
                        let _ = sink.send(Ws::Close(None)).await;
                        break;
                    }
                    frame = outgoing.recv() => {
                        let Some(frame) = frame else { break };
                        let text = validator.encode(&frame).unwrap_or_else(|e| panic!("{e:?}: {frame:?}"));
                        if sink.send(Ws::text(text)).await.is_err() { break }
                    }
                    incoming = stream.next() => match incoming {
                        Some(Ok(Ws::Text(text))) => {
                            let envelope = validator.decode(text.as_bytes()).unwrap();
                            me.on_command(envelope);
                        }
                        Some(Ok(Ws::Close(frame))) => {
                            *me.close_code.lock().unwrap() = frame.map(|f| u16::from(f.code));
                            break;
                        }
                        Some(Ok(_)) => {}
                        _ => break,
                    }
                }
            }
            me.closed.notify_waiters();
            me.closed.notify_one();
        });
        agent.send(wire::Hello {
            agent_version: "scripted-0.1".into(),
            capabilities: vec![],
            kubernetes_version: "v1.35.4".into(),
        });
        agent.send_snapshot();
        Ok(agent)
    }

    /// Connects, retrying while the hub has no floors for the cluster yet (503).
    pub async fn connect_eventually(url: &str, credentials: &Credentials) -> Self {
        for _ in 0..100 {
            match Self::connect(url, credentials).await {
                Ok(agent) => return agent,
                // 503: the hub has no floors yet; 403: not yet for this new cluster.
                Err(503 | 403) => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(code) => panic!("agent refused with {code}"),
            }
        }
        panic!("agent never admitted");
    }

    /// Closes the session, as an agent that goes away does.
    pub fn disconnect(&self) {
        self.stop.cancel();
    }

    pub fn behave(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.state.lock().unwrap().behaviour);
    }

    /// Sends a status event.
    pub fn send(&self, payload: impl Into<Message>) {
        self.emit(Envelope::new(payload));
    }

    fn emit(&self, envelope: Envelope) {
        let _ = self
            .out
            .send(envelope.for_cluster(self.cluster_id.clone(), self.org_id.clone()));
    }

    /// Every command received so far.
    pub fn received(&self) -> Vec<Envelope> {
        self.state.lock().unwrap().received.clone()
    }

    /// How many commands of `kind` were received.
    pub fn count(&self, kind: &str) -> usize {
        self.received()
            .iter()
            .filter(|e| e.message.message_type().to_string() == kind)
            .count()
    }

    /// Sends a snapshot of what it holds; `tamper` may change it first.
    pub fn send_snapshot_with(&self, tamper: impl FnOnce(&mut Vec<wire::SnapshotEntry>)) {
        let mut entries: Vec<wire::SnapshotEntry> = {
            let state = self.state.lock().unwrap();
            state
                .apps
                .values()
                .map(|held| wire::SnapshotEntry {
                    app_id: held.deploy.app.app_id.clone(),
                    revision: held.deploy.revision.clone(),
                    checksum: held.deploy.checksum(),
                    phase: held.phase,
                })
                .collect()
        };
        tamper(&mut entries);
        self.send(wire::Snapshot {
            stack_deploys: entries,
            taken_at: chrono::Utc::now(),
        });
    }

    pub fn send_snapshot(&self) {
        self.send_snapshot_with(|_| {});
    }

    /// Forgets an App (as if its StackDeploy were lost on the cluster).
    pub fn forget(&self, app_id: &str) {
        self.state.lock().unwrap().apps.remove(app_id);
    }

    /// Waits until the hub closes the session; returns the close code.
    pub async fn closed(&self, within: Duration) -> Option<u16> {
        tokio::time::timeout(within, self.closed.notified())
            .await
            .ok()?;
        *self.close_code.lock().unwrap()
    }

    fn app_status(
        &self,
        state: &mut State,
        app_id: &wire::Id,
        revision: &str,
        phase: AppPhase,
        deploy: Option<&wire::AppDeploy>,
    ) {
        state.sequence += 1;
        let components = deploy
            .map(|d| {
                d.components
                    .iter()
                    .map(|c| {
                        let (kind, replicas) = match c {
                            wire::Component::Workload(w) => {
                                ("workload", if d.paused { 0 } else { w.replicas })
                            }
                            wire::Component::Addon(_) => ("addon", 1),
                        };
                        wire::ComponentStatus {
                            name: c.name().clone(),
                            kind: kind.into(),
                            ready_replicas: if phase == AppPhase::Running
                                || phase == AppPhase::Paused
                            {
                                replicas
                            } else {
                                0
                            },
                            desired_replicas: replicas,
                            ready: phase == AppPhase::Running,
                            message: String::new(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.emit(Envelope::new(wire::AppStatus {
            app_id: app_id.clone(),
            observed_revision: revision.to_owned(),
            phase,
            components,
            ingress_address: None,
            exports: vec![],
            conditions: vec![],
            observed_at: chrono::Utc::now(),
            sequence: state.sequence,
        }));
    }

    fn on_command(&self, envelope: Envelope) {
        let mut state = self.state.lock().unwrap();
        state.received.push(envelope.clone());
        let accepted = wire::CommandAccepted {
            command_id: envelope.id,
        };
        match envelope.message {
            Message::ProjectEnsure(p) => {
                self.emit(Envelope::new(accepted));
                if !state.behaviour.confirm_projects {
                    return;
                }
                self.emit(Envelope::new(wire::ProjectStatus {
                    project_id: p.project_id,
                    namespace: p.namespace,
                    phase: ProjectPhase::Ready,
                    message: String::new(),
                    observed_at: chrono::Utc::now(),
                    usage: Default::default(),
                    healed: vec![],
                }));
            }
            Message::ProjectDelete(p) => {
                self.emit(Envelope::new(accepted));
                self.emit(Envelope::new(wire::ProjectStatus {
                    project_id: p.project_id,
                    namespace: p.namespace,
                    phase: ProjectPhase::Deleted,
                    message: String::new(),
                    observed_at: chrono::Utc::now(),
                    usage: Default::default(),
                    healed: vec![],
                }));
            }
            Message::AppDeploy(deploy) => {
                if state.behaviour.drop_deploys > 0 {
                    state.behaviour.drop_deploys -= 1;
                    return;
                }
                if let Some((reason, message, field)) = state.behaviour.reject_deploys.clone() {
                    self.emit(Envelope::new(wire::CommandRejected {
                        command_id: envelope.id,
                        reason,
                        message,
                        field,
                    }));
                    return;
                }
                self.emit(Envelope::new(accepted));
                let phase = if deploy.paused {
                    AppPhase::Paused
                } else {
                    state.behaviour.app_phase
                };
                let app_id = deploy.app.app_id.clone();
                let revision = deploy.revision.clone();
                state.apps.insert(
                    app_id.to_string(),
                    Held {
                        deploy: deploy.clone(),
                        phase,
                    },
                );
                self.app_status(&mut state, &app_id, &revision, phase, Some(&deploy));
            }
            Message::AppRedeploy(_) => {
                self.emit(Envelope::new(accepted));
            }
            Message::AppDelete(delete) => {
                if !state.behaviour.confirm_deletes {
                    return;
                }
                self.emit(Envelope::new(accepted));
                let app_id = delete.app.app_id.clone();
                let held = state.apps.remove(app_id.as_str());
                let revision = held.map_or_else(|| "0".to_owned(), |h| h.deploy.revision);
                self.app_status(&mut state, &app_id, &revision, AppPhase::Deleted, None);
            }
            Message::AddonApply(apply) => {
                self.emit(Envelope::new(accepted));
                self.emit(Envelope::new(wire::AddonStatus {
                    addon_id: apply.addon.addon_id,
                    observed_revision: apply.revision,
                    phase: state.behaviour.addon_phase,
                    message: String::new(),
                    export: None,
                    git_commit: None,
                    gitops_error: None,
                    drift: Vec::new(),
                    observed_at: chrono::Utc::now(),
                }));
            }
            Message::AddonDelete(delete) => {
                self.emit(Envelope::new(accepted));
                self.emit(Envelope::new(wire::AddonStatus {
                    addon_id: delete.addon.addon_id,
                    observed_revision: 1,
                    phase: wire::AddonPhase::Deleted,
                    message: String::new(),
                    export: None,
                    git_commit: None,
                    gitops_error: None,
                    drift: Vec::new(),
                    observed_at: chrono::Utc::now(),
                }));
            }
            Message::ResyncRequest(_) => {
                drop(state);
                self.send_snapshot();
            }
            _ => {
                self.emit(Envelope::new(accepted));
            }
        }
    }
}
