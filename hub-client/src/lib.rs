//! `kubenest-hub-client`: the backend side of the hub, used by the controllers and by the REST
//! facade's fail-closed secret writes. It keeps a backend session to every hub replica, pushes
//! the revocation floors to each (and re-sends them periodically, so replicas never go stale),
//! sends each command to the replica whose Lease holds the cluster, and hands every status event
//! to the caller.
//!
//! A dispatch succeeds only on the hub's `route.ack`, which proves routing and nothing more; the
//! caller keeps its durable intent until the agent reports the revision observed.
//!
//! The replica of a cluster is read from a watch of the session Leases (a kube-runtime
//! reflector), not from the API server on every command: that was one to two Lease reads of
//! the management cluster per App (`make bench BENCH=e2e`). A cache a moment behind a session
//! that moved sends the command to the replica it left, which answers `no_session`; the Lease
//! is then read from the API server and the command sent once more where it says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubenest_contracts::{
    Direction, Envelope, Floor, FloorsSnapshot, FloorsUpdate, Id, Message, NackReason, TokenSigner,
    Validator,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

mod replica;
use replica::session_loop;

/// Floors per snapshot part (the hub accepts up to 5,000).
const FLOORS_PER_PART: usize = 5000;
/// How often floors are re-sent to every replica.
const FLOORS_REFRESH: Duration = Duration::from_secs(30);
/// How long a dispatch waits for the hub's route.ack.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a command was not routed. Each maps to a named condition reason on the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// No replica holds a session of the cluster (`ClusterUnreachable`).
    #[error("cluster has no hub session")]
    NoSession,
    /// The replica holding the cluster is not connected to us (yet).
    #[error("not connected to the hub replica at {0}")]
    NotConnected(String),
    /// The hub refused to route it.
    #[error("hub refused to route: {0:?}")]
    Nacked(NackReason),
    /// No answer from the hub in time.
    #[error("no route acknowledgement in time")]
    Timeout,
    #[error("invalid command: {0}")]
    Invalid(String),
    #[error("kubernetes: {0}")]
    Kube(String),
}

/// Which replicas confirmed a raise of floors ([`HubClient::raise_floors`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FloorsRaised {
    /// Replicas that applied the floors: they refuse the old tokens from now on.
    pub confirmed: Vec<String>,
    /// Replicas not reached, or that did not confirm in time.
    pub unconfirmed: Vec<String>,
}

/// Where the replicas are and how to find a cluster's replica.
pub struct HubClientConfig {
    /// `ws(s)://host:port/v1/connect` of every replica.
    pub urls: Vec<String>,
    /// Mints the backend tokens.
    pub signer: Arc<TokenSigner>,
    /// The session Leases, to find the replica of a cluster.
    pub leases: Api<Lease>,
}

impl std::fmt::Debug for HubClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubClientConfig")
            .field("urls", &self.urls)
            .finish_non_exhaustive()
    }
}

/// A handle to the hub sessions; cheap to clone.
#[derive(Clone)]
pub struct HubClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for HubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubClient").finish_non_exhaustive()
    }
}

struct Inner {
    /// Every replica this client keeps a session to.
    urls: Vec<String>,
    sessions: Mutex<HashMap<String, mpsc::Sender<String>>>,
    pending: Mutex<HashMap<Uuid, oneshot::Sender<Message>>>,
    /// `None` until the controllers have computed the floors once: an empty snapshot would tell
    /// the hub that no cluster is registered, and agents would be refused (403) instead of asked
    /// to retry (503).
    floors: Mutex<Option<Vec<Floor>>>,
    leases: Api<Lease>,
    /// The session Leases as the watch last saw them.
    routes: Store<Lease>,
    validator: &'static Validator,
    /// Counts successful connections to any replica.
    connects: tokio::sync::watch::Sender<u64>,
}

impl Inner {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<String>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, oneshot::Sender<Message>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The floors as snapshot frames (none before the floors are known).
    fn floor_frames(&self) -> Vec<String> {
        let Some(floors) = self
            .floors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        else {
            return Vec::new();
        };
        let snapshot_id = Uuid::new_v4();
        let chunks: Vec<Vec<Floor>> = if floors.is_empty() {
            vec![Vec::new()]
        } else {
            floors
                .chunks(FLOORS_PER_PART)
                .map(<[Floor]>::to_vec)
                .collect()
        };
        let parts = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
        chunks
            .into_iter()
            .enumerate()
            .filter_map(|(i, floors)| {
                let part = u32::try_from(i + 1).ok()?;
                let frame = Envelope::new(FloorsSnapshot {
                    snapshot_id,
                    part,
                    parts,
                    floors,
                });
                self.validator.encode(&frame).ok()
            })
            .collect()
    }
}

impl HubClient {
    /// Connects to every replica (reconnecting forever, with capped exponential backoff and
    /// full jitter) until `shutdown`. Status events arrive on the returned receiver.
    pub fn start(
        config: HubClientConfig,
        shutdown: CancellationToken,
    ) -> Result<(Self, mpsc::Receiver<Envelope>), DispatchError> {
        let validator = Validator::shared().map_err(|e| DispatchError::Invalid(e.to_string()))?;
        let (routes, writer) = reflector::store();
        let watch = reflector::reflector(
            writer,
            watcher(config.leases.clone(), watcher::Config::default()),
        )
        .default_backoff()
        .applied_objects()
        .for_each(|_| async {});
        let stop_watching = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop_watching.cancelled() => {}
                () = watch => {}
            }
        });
        let inner = Arc::new(Inner {
            urls: config.urls.clone(),
            sessions: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            floors: Mutex::new(None),
            leases: config.leases,
            routes,
            validator,
            connects: tokio::sync::watch::Sender::new(0),
        });
        let (status_tx, status_rx) = mpsc::channel(4096);
        for url in config.urls {
            tokio::spawn(session_loop(
                inner.clone(),
                url,
                config.signer.clone(),
                status_tx.clone(),
                shutdown.clone(),
            ));
        }
        tokio::spawn(refresh_floors(inner.clone(), shutdown));
        Ok((Self { inner }, status_rx))
    }

    /// Replaces the floors and pushes them to every connected replica at once.
    pub fn push_floors(&self, floors: Vec<Floor>) {
        *self.inner.floors.lock().unwrap_or_else(|e| e.into_inner()) = Some(floors);
        let frames = self.inner.floor_frames();
        for sender in self.inner.sessions().values() {
            for frame in &frames {
                let _ = sender.try_send(frame.clone());
            }
        }
    }

    /// Raises floors on every replica at once (a rotated token) and waits until each replica
    /// confirms it applied them: from then on it refuses the old tokens and has closed the
    /// sessions they held. Floors never go down on a replica, so a snapshot the controllers
    /// computed before the change cannot undo it. A replica this client is not connected to
    /// (within [`ACK_TIMEOUT`]) or that does not confirm in time is reported unconfirmed.
    pub async fn raise_floors(&self, floors: Vec<Floor>) -> FloorsRaised {
        let attempts = self.inner.urls.iter().map(|url| {
            let floors = floors.clone();
            async move { (url.clone(), self.raise_on(url, floors).await) }
        });
        let mut raised = FloorsRaised::default();
        for (url, confirmed) in futures::future::join_all(attempts).await {
            if confirmed {
                raised.confirmed.push(url);
            } else {
                raised.unconfirmed.push(url);
            }
        }
        raised
    }

    async fn raise_on(&self, url: &str, floors: Vec<Floor>) -> bool {
        let deadline = tokio::time::Instant::now() + ACK_TIMEOUT;
        let sender = loop {
            if let Some(sender) = self.inner.sessions().get(url).cloned() {
                break sender;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let frame = Envelope::new(FloorsUpdate { floors });
        let Ok(text) = self.inner.validator.encode(&frame) else {
            return false;
        };
        let (tx, rx) = oneshot::channel();
        self.inner.pending().insert(frame.id, tx);
        let confirmed = sender.send(text).await.is_ok()
            && matches!(
                tokio::time::timeout_at(deadline, rx).await,
                Ok(Ok(Message::FloorsApplied(_)))
            );
        self.inner.pending().remove(&frame.id);
        confirmed
    }

    /// Changes after every (re)connection to a replica: whoever keeps state derived from the
    /// agents' reports asks for fresh snapshots then.
    pub fn connections(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.connects.subscribe()
    }

    /// Number of replicas currently connected.
    pub fn connected(&self) -> usize {
        self.inner.sessions().len()
    }

    /// Sends a command to the replica holding its cluster and waits for the route.ack.
    pub async fn dispatch(&self, command: Envelope) -> Result<(), DispatchError> {
        if command.direction != Direction::Command {
            return Err(DispatchError::Invalid("not a command".into()));
        }
        let cluster_id = command
            .cluster_id
            .clone()
            .ok_or_else(|| DispatchError::Invalid("no cluster_id".into()))?;
        let (url, cached) = self.replica_of(&cluster_id).await?;
        match self.send_to(&url, &command).await {
            // The cache may be a moment behind a session that moved: ask the API server.
            // The same error as without a cache when the Lease still names that replica (not
            // connected to it yet is `HubUnavailable`, retried; not `ClusterUnreachable`).
            Err(
                error @ (DispatchError::Nacked(NackReason::NoSession)
                | DispatchError::NotConnected(_)),
            ) if cached => {
                let fresh = self.fresh_replica_of(&cluster_id).await?;
                if fresh == url {
                    return Err(error);
                }
                self.send_to(&fresh, &command).await
            }
            outcome => outcome,
        }
    }

    /// Sends `command` to the replica at `url` and waits for its route.ack.
    async fn send_to(&self, url: &str, command: &Envelope) -> Result<(), DispatchError> {
        let sender = self
            .inner
            .sessions()
            .get(url)
            .cloned()
            .ok_or_else(|| DispatchError::NotConnected(url.to_owned()))?;
        let text = self
            .inner
            .validator
            .encode(command)
            .map_err(|e| DispatchError::Invalid(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        self.inner.pending().insert(command.id, tx);
        let outcome = async {
            sender
                .send(text)
                .await
                .map_err(|_| DispatchError::NotConnected(url.to_owned()))?;
            match tokio::time::timeout(ACK_TIMEOUT, rx).await {
                Ok(Ok(Message::RouteAck(_))) => Ok(()),
                Ok(Ok(Message::RouteNack(nack))) => Err(DispatchError::Nacked(nack.reason)),
                Ok(_) => Err(DispatchError::NotConnected(url.to_owned())),
                Err(_) => Err(DispatchError::Timeout),
            }
        }
        .await;
        self.inner.pending().remove(&command.id);
        outcome
    }

    /// Which session of cluster `cluster_id` is live now, as `replica/epoch` of its session
    /// Lease; `None` when no live session holds the cluster (no Lease, or one whose holder
    /// stopped renewing it: that hub replica is gone). A stream that travels on a session ends
    /// with it, so a reader compares this mark over time to learn that its route is gone.
    pub async fn session_of(&self, cluster_id: &Id) -> Result<Option<String>, DispatchError> {
        use kubenest_contracts::names::lease::{EPOCH_ANNOTATION, name};
        let lease = self
            .inner
            .leases
            .get_opt(&name(cluster_id.as_str()))
            .await
            .map_err(|e| DispatchError::Kube(e.to_string()))?;
        let Some(lease) = lease else {
            return Ok(None);
        };
        let spec = lease.spec.unwrap_or_default();
        let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
        let duration = f64::from(spec.lease_duration_seconds.unwrap_or(0));
        let live = renewed.is_some_and(|at| {
            k8s_openapi::jiff::Timestamp::now()
                .duration_since(at)
                .as_secs_f64()
                < duration
        });
        let epoch = lease
            .metadata
            .annotations
            .and_then(|mut a| a.remove(EPOCH_ANNOTATION));
        Ok(match (live, spec.holder_identity, epoch) {
            (true, Some(holder), Some(epoch)) => Some(format!("{holder}/{epoch}")),
            _ => None,
        })
    }

    /// The connect URL of the replica holding `cluster_id`'s session, and whether it was read
    /// from the watch's cache (else from the API server: the cache has not got the Lease yet).
    async fn replica_of(&self, cluster_id: &Id) -> Result<(String, bool), DispatchError> {
        let name = kubenest_contracts::names::lease::name(cluster_id.as_str());
        let routes = &self.inner.routes;
        let ready = matches!(routes.wait_until_ready().now_or_never(), Some(Ok(())));
        if ready && let Some(lease) = routes.find(|l| l.name_any() == name) {
            return Ok((address_of(Some(&lease))?, true));
        }
        Ok((self.fresh_replica_of(cluster_id).await?, false))
    }

    /// [`Self::replica_of`] from the API server.
    async fn fresh_replica_of(&self, cluster_id: &Id) -> Result<String, DispatchError> {
        let name = kubenest_contracts::names::lease::name(cluster_id.as_str());
        let lease = self
            .inner
            .leases
            .get_opt(&name)
            .await
            .map_err(|e| DispatchError::Kube(e.to_string()))?;
        address_of(lease.as_ref())
    }
}

/// The connect URL of the replica a session Lease names.
fn address_of(lease: Option<&Lease>) -> Result<String, DispatchError> {
    let address = lease
        .and_then(|l| {
            l.metadata
                .annotations
                .as_ref()?
                .get(kubenest_contracts::names::lease::ADDRESS_ANNOTATION)
        })
        .ok_or(DispatchError::NoSession)?;
    Ok(format!("{address}/v1/connect"))
}

async fn refresh_floors(inner: Arc<Inner>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(FLOORS_REFRESH);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let frames = inner.floor_frames();
        let senders: Vec<mpsc::Sender<String>> = inner.sessions().values().cloned().collect();
        for sender in senders {
            for frame in &frames {
                let _ = sender.try_send(frame.clone());
            }
        }
    }
}
