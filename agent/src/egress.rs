//! helm's way out: a chart pull for a project reaches public addresses, or a source the
//! cluster's installer allowed (`--chart-sources`), never the cluster's own network.
//!
//! The first URL is decided before helm runs ([`Egress::check_source`], the rules of
//! [`kubenest_domain::sources`], the API server's too). Then helm runs with a proxy of its own
//! ([`Egress::open`], one per render, on loopback) as its HTTPS proxy, so every connection it
//! opens afterwards — each redirect, an index's chart URL, a registry's token realm — is an
//! HTTP `CONNECT host:port` decided here: the name is resolved here and the tunnel goes to the
//! address checked, so a name that resolves elsewhere a moment later gains nothing. Plain HTTP
//! is refused. A refusal is remembered, and the render fails with it rather than with helm's
//! text.
//!
//! What a proxy cannot see: Go's HTTP client connects to `localhost` and loopback addresses
//! itself. The first URL is checked for both; a redirect or an index's URL to loopback reaches
//! only the agent's own loopback.
//!
//! Written on hyper (its CONNECT upgrade): no proxy crate decides per tunnel with a resolver of
//! its own, and the part that decides is a few lines.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kubenest_domain::sources::{AllowList, decide, parse_source, reach};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// How long a tunnel's connection to its target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The chart sources the cluster's installer allowed on its own network.
#[derive(Debug, Clone, Default)]
pub struct Egress {
    allow: Arc<AllowList>,
}

/// One render's proxy: its URL for helm, and what it refused. Stops when dropped.
#[derive(Debug)]
pub struct Gate {
    pub url: String,
    refused: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Gate {
    fn drop(&mut self) {
        // The tunnels live in the task's JoinSet and end with it.
        self.task.abort();
    }
}

impl Gate {
    /// Why the first refused connection was refused, if one was.
    pub fn refused(&self) -> Option<String> {
        self.refused.lock().ok()?.clone()
    }
}

/// Why a host may not be reached.
fn on_own_network(target: &str) -> String {
    format!(
        "the chart cannot be read from {target}: it is on the cluster's own network and not one \
         of the cluster's chart sources"
    )
}

impl Egress {
    /// Chart pulls reach public addresses, and `allow`'s sources wherever they are.
    pub fn new(allow: AllowList) -> Self {
        Self {
            allow: Arc::new(allow),
        }
    }

    /// Whether helm may start from `repository` (an `https://` or `oci://` source): refused
    /// when it is written as an address on the cluster's own network or as `localhost` (both
    /// of which helm would reach without its proxy), unless it is an allowed source.
    pub fn check_source(&self, repository: &str) -> Result<(), String> {
        let source = parse_source(repository).map_err(|e| e.to_string())?;
        let url = source.url();
        let target = match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            _ => return Err("a URL without a host".into()),
        };
        let local_name = url
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case("localhost") || h.ends_with(".localhost"));
        if local_name && !self.allow.allows(url) {
            return Err(on_own_network(&target));
        }
        decide(&self.allow, url)
            .map(|_| ())
            .map_err(|_| on_own_network(&target))
    }

    /// Starts a proxy for one render on a free loopback port.
    pub async fn open(&self) -> std::io::Result<Gate> {
        let listener = TcpListener::bind((IpAddr::from([127, 0, 0, 1]), 0)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let refused = Arc::new(Mutex::new(None));
        let (allow, told) = (self.allow.clone(), refused.clone());
        let task = tokio::spawn(async move {
            let mut tunnels = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (allow, told) = (allow.clone(), told.clone());
                tunnels.spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        answer(request, allow.clone(), told.clone())
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        Ok(Gate { url, refused, task })
    }
}

/// Answers one request to the proxy: a `CONNECT` to a reachable target opens the tunnel;
/// anything else is refused (and remembered).
async fn answer(
    request: Request<Incoming>,
    allow: Arc<AllowList>,
    told: Arc<Mutex<Option<String>>>,
) -> Result<Response<Empty<Bytes>>, std::convert::Infallible> {
    let refuse = |why: String| {
        tracing::warn!(%why, "a chart pull was refused its connection");
        if let Ok(mut told) = told.lock() {
            told.get_or_insert(why);
        }
        let mut response = Response::new(Empty::new());
        *response.status_mut() = StatusCode::FORBIDDEN;
        Ok(response)
    };
    if request.method() != Method::CONNECT {
        return refuse("the chart cannot be read: only https is allowed".into());
    }
    let Some((host, port)) = request
        .uri()
        .authority()
        .and_then(|a| Some((a.host().to_owned(), a.port_u16()?)))
    else {
        return refuse("the chart cannot be read: a connection without host and port".into());
    };
    let addresses = match addresses(&allow, &host, port).await {
        Ok(addresses) => addresses,
        Err(why) => return refuse(why),
    };
    let Some(target) = connect(&addresses).await else {
        // Not a refusal: helm says the connection failed, as it would without a proxy.
        let mut response = Response::new(Empty::new());
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        return Ok(response);
    };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(request).await {
            let mut target = target;
            let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(upgraded), &mut target).await;
        }
    });
    Ok(Response::new(Empty::new()))
}

/// The addresses a tunnel to `host:port` may go to: any of an allowed source's, else only the
/// public ones (none: refused, saying why).
async fn addresses(allow: &AllowList, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let found: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|_| format!("the chart cannot be read: {host} has no address"))?
            .collect(),
    };
    if allow.allows_host(bare, port) {
        return Ok(found);
    }
    let public: Vec<SocketAddr> = found
        .into_iter()
        .filter(|a| !reach(a.ip()).is_internal())
        .collect();
    if public.is_empty() {
        return Err(on_own_network(&format!("{host}:{port}")));
    }
    Ok(public)
}

/// A connection to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr]) -> Option<TcpStream> {
    for address in addresses {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await
        {
            return Some(stream);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Sends `request` to the gate; returns the status line of its answer and the stream.
    async fn ask(gate: &Gate, request: &str) -> (String, TcpStream) {
        let address = gate.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        (head.lines().next().unwrap_or_default().to_owned(), stream)
    }

    #[tokio::test]
    async fn a_tunnel_to_the_clusters_own_network_is_refused_and_remembered() {
        let gate = Egress::default().open().await.unwrap();
        for target in [
            "10.0.0.1:443",
            "169.254.169.254:80",
            "[::1]:443",
            "localhost:443",
        ] {
            let (status, _) = ask(&gate, &format!("CONNECT {target} HTTP/1.1\r\n\r\n")).await;
            assert!(status.contains("403"), "{target}: {status}");
        }
        let why = gate.refused().unwrap();
        assert!(
            why.contains("10.0.0.1:443") && why.contains("own network"),
            "{why}"
        );
    }

    #[tokio::test]
    async fn plain_http_through_the_gate_is_refused() {
        let gate = Egress::default().open().await.unwrap();
        let (status, _) = ask(
            &gate,
            "GET http://192.0.2.10/index.yaml HTTP/1.1\r\nHost: 192.0.2.10\r\n\r\n",
        )
        .await;
        assert!(status.contains("403"), "{status}");
        assert!(gate.refused().unwrap().contains("only https"));
    }

    #[tokio::test]
    async fn an_allowed_source_on_the_own_network_is_tunnelled_to() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = server.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut peer, _) = server.accept().await.unwrap();
            peer.write_all(b"hello through the tunnel").await.unwrap();
        });
        let allow = AllowList::parse(&[format!("https://127.0.0.1:{port}")]).unwrap();
        let gate = Egress::new(allow).open().await.unwrap();
        let (status, mut stream) =
            ask(&gate, &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(status.contains("200"), "{status}");
        let mut greeting = String::new();
        stream.read_to_string(&mut greeting).await.unwrap();
        assert_eq!(greeting, "hello through the tunnel");
        assert_eq!(gate.refused(), None);
    }

    #[test]
    fn the_first_url_is_refused_on_the_own_network_or_as_localhost_unless_allowed() {
        let egress = Egress::default();
        for source in [
            "https://127.0.0.1:8443",
            "oci://10.1.2.3/charts",
            "https://localhost/charts",
            "https://registry.localhost",
            "https://[::ffff:127.0.0.1]",
        ] {
            let why = egress.check_source(source).unwrap_err();
            assert!(why.contains("own network"), "{source}: {why}");
        }
        assert_eq!(egress.check_source("https://charts.example.com"), Ok(()));
        let allowed = Egress::new(AllowList::parse(&["https://127.0.0.1:8443"]).unwrap());
        assert_eq!(
            allowed.check_source("https://127.0.0.1:8443/stable"),
            Ok(())
        );
        assert!(allowed.check_source("https://127.0.0.1:9443").is_err());
    }
}
