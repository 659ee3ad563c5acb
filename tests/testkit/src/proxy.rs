//! A TCP proxy on loopback that stands between a client and one or more upstreams.
//!
//! The local environment puts one in front of the hub replicas (what a load balancer does in a
//! real installation: each new connection goes to the next replica that accepts it), and the
//! fault-injection tests use it to cut or stall an agent's link without touching either end.
//!
//! Modes ([`LinkMode`]): `Pass` forwards bytes; `Drop` closes every open connection at once and
//! closes new ones as soon as they are accepted (a link that is down: both ends see resets);
//! `Stall` keeps connections open but forwards nothing (a black hole: neither end learns
//! anything until its own timeouts fire), and new connections are accepted but never connected
//! upstream.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::Error;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    Pass,
    Drop,
    Stall,
}

#[derive(Debug)]
struct Shared {
    upstreams: Vec<SocketAddr>,
    next: AtomicUsize,
    mode: watch::Sender<LinkMode>,
    /// When each connection reached an upstream, for connection-rate figures.
    connected_at: Mutex<Vec<Instant>>,
    open: AtomicUsize,
}

/// A running proxy; stops (and closes its connections) when dropped.
#[derive(Debug)]
pub struct TcpProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on `listen` (`127.0.0.1:0` for any free port) and forwards to `upstreams`,
    /// round-robin, skipping those that refuse the connection. Must run inside a Tokio runtime.
    pub async fn start(listen: &str, upstreams: Vec<SocketAddr>) -> Result<Self, Error> {
        if upstreams.is_empty() {
            return Err(Error::Process("a proxy needs at least one upstream".into()));
        }
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| Error::io(format!("bind proxy on {listen}"), e))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::io("proxy address", e))?;
        let (mode, _) = watch::channel(LinkMode::Pass);
        let shared = Arc::new(Shared {
            upstreams,
            next: AtomicUsize::new(0),
            mode,
            connected_at: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
        });
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self {
            address,
            shared,
            task,
        })
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Changes what happens to traffic, for open and new connections alike.
    pub fn set_mode(&self, mode: LinkMode) {
        self.shared.mode.send_replace(mode);
    }

    pub fn mode(&self) -> LinkMode {
        *self.shared.mode.borrow()
    }

    /// Connections currently forwarded.
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::Relaxed)
    }

    /// When each forwarded connection reached its upstream, oldest first.
    pub fn connection_times(&self) -> Vec<Instant> {
        self.shared
            .connected_at
            .lock()
            .map(|times| times.clone())
            .unwrap_or_default()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.mode.send_replace(LinkMode::Drop);
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut mode = shared.mode.subscribe();
            // A stalled link connects nowhere until it passes again.
            if !passable(&mut mode).await {
                return;
            }
            let Some(upstream) = connect_upstream(&shared).await else {
                return;
            };
            shared.open.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut times) = shared.connected_at.lock() {
                times.push(Instant::now());
            }
            forward(client, upstream, mode).await;
            shared.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn connect_upstream(shared: &Shared) -> Option<TcpStream> {
    let count = shared.upstreams.len();
    let first = shared.next.fetch_add(1, Ordering::Relaxed);
    for i in 0..count {
        let address = shared.upstreams[(first + i) % count];
        if let Ok(stream) = TcpStream::connect(address).await {
            let _ = stream.set_nodelay(true);
            return Some(stream);
        }
    }
    None
}

/// Copies both ways until either side closes or the mode turns to `Drop`; holds bytes while
/// the mode is `Stall`.
async fn forward(client: TcpStream, upstream: TcpStream, mode: watch::Receiver<LinkMode>) {
    let _ = client.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let up = pump(client_read, upstream_write, mode.clone());
    let down = pump(upstream_read, client_write, mode);
    // Either direction ending ends the connection (dropping the halves closes both sockets).
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<LinkMode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !passable(&mut mode).await {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            changed = mode.changed() => {
                if changed.is_err() { return; }
                continue;
            }
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Bytes already read are delivered after a stall, as a real network would.
        if !passable(&mut mode).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Waits while the link is stalled; true once it passes, false when it drops.
async fn passable(mode: &mut watch::Receiver<LinkMode>) -> bool {
    loop {
        let current = *mode.borrow_and_update();
        match current {
            LinkMode::Pass => return true,
            LinkMode::Drop => return false,
            LinkMode::Stall => {
                if mode.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}
