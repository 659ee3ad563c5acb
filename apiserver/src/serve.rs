//! Serving the application: plain HTTP ([`serve`]), HTTPS ([`serve_tls`], with [`Tls`]), and
//! the admission webhooks on a listener of their own ([`serve_admission`]); each with
//! TCP_NODELAY and a graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use tower_http::trace::TraceLayer;

use crate::state::AppState;
use crate::{MAX_BODY_BYTES, admission, app};

/// Trims the request limiters' tables every minute, for as long as the server runs.
fn shrink_limits(state: &AppState) {
    let limits_state = state.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tick.tick().await;
            limits_state.limits().shrink();
        }
    });
}

/// Serves `app` on `listener` over plain HTTP until `shutdown` resolves (loopback, or behind a
/// proxy that terminates TLS; see `--insecure-plaintext`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    shrink_limits(&state);
    // Responses and event frames go out at once: with Nagle's algorithm a write that follows
    // another (an SSE frame after the last, a body after its headers) waits for the client's
    // delayed acknowledgement.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
    });
    axum::serve(
        listener,
        app(state).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// The HTTPS certificate and key the API serves with (rustls, TLS 1.2 and 1.3).
#[derive(Clone)]
pub struct Tls(axum_server::tls_rustls::RustlsConfig);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// Reads a PEM certificate chain and its private key.
    pub async fn from_pem_files(
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> std::io::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self(
            axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await?,
        ))
    }

    /// Like [`Tls::from_pem_files`], and every caller must present a client certificate signed
    /// by `client_ca` (PEM): a connection without one is refused in the TLS handshake, before a
    /// request is read. For the admission webhooks, whose only caller is the kube-apiserver.
    pub async fn from_pem_files_verifying_clients(
        cert: &std::path::Path,
        key: &std::path::Path,
        client_ca: &std::path::Path,
    ) -> std::io::Result<Self> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let invalid = |e: &dyn std::fmt::Display| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
        };
        let pems = |bytes: &[u8]| -> std::io::Result<Vec<CertificateDer<'static>>> {
            CertificateDer::pem_slice_iter(bytes)
                .collect::<Result<_, _>>()
                .map_err(|e| invalid(&e))
        };
        let chain = pems(&tokio::fs::read(cert).await?)?;
        let key =
            PrivateKeyDer::from_pem_slice(&tokio::fs::read(key).await?).map_err(|e| invalid(&e))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in pems(&tokio::fs::read(client_ca).await?)? {
            roots.add(ca).map_err(|e| invalid(&e))?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|e| invalid(&e))?;
        let mut config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| invalid(&e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self(axum_server::tls_rustls::RustlsConfig::from_config(
            Arc::new(config),
        )))
    }
}

/// Serves `app` on `listener` over HTTPS until `shutdown` resolves; in-flight requests (and
/// event streams) get 10 s to finish.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    state: AppState,
    tls: Tls,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    shrink_limits(&state);
    serve_router_tls(listener, app(state), tls, shutdown).await
}

/// Serves the admission webhooks ([`admission`]) on `listener` over HTTPS (the kube-apiserver
/// calls webhooks only so).
pub async fn serve_admission(
    listener: tokio::net::TcpListener,
    admission: admission::Admission,
    tls: Tls,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = admission::router(admission)
        .layer(DefaultBodyLimit::max(4 * MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http());
    serve_router_tls(listener, router, tls, shutdown).await
}

async fn serve_router_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Tls,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let handle = axum_server::Handle::new();
    tokio::spawn({
        let handle = handle.clone();
        async move {
            shutdown.await;
            handle.graceful_shutdown(Some(Duration::from_secs(10)));
        }
    });
    let listener = listener.into_std()?;
    // Each response goes out at once, as in `serve` (no Nagle delay).
    let no_delay = axum_server::accept::TcpConfigAcceptor::new(
        axum_server::accept::TcpSocketConfig::new().nodelay(true),
    );
    axum_server::tls_rustls::from_tcp_rustls(listener, tls.0)?
        .map(|tls| tls.acceptor(no_delay))
        .handle(handle)
        .serve(router.into_make_service_with_connect_info::<SocketAddr>())
        .await
}
