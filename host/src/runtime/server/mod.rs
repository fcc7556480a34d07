//! The one port, served as kube-scheduler serves 10259: HTTPS, `/metrics`
//! (Prometheus text format) behind delegated authentication and
//! authorization, `/healthz` (the process serves) and `/readyz` (caches
//! synced and, on the leader, the scheduling loop turning) open to anyone
//! (the kubelet's probes carry no token).
//!
//! - [`tls`]: the certificate, from files or self-signed at start;
//! - [`auth`]: TokenReview and SubjectAccessReview against the API server,
//!   with a small cache ([`ttl`]);
//! - [`conn`]: the accept loop, with a connection limit and timeouts for
//!   the TLS handshake, the request headers and writes.

pub mod auth;
pub mod conn;
pub mod tls;
pub mod ttl;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;

use super::Shared;

/// How the port is served (`wasmsched run`'s flags, named after
/// kube-scheduler's).
#[derive(Debug, Clone)]
pub struct ServingOptions {
    /// PEM certificate chain; with `tls_private_key_file`. Neither: a
    /// self-signed certificate is generated at start.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// Where TokenReviews go (default: the scheduler's own API client).
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Where SubjectAccessReviews go (default: the scheduler's own client).
    pub authorization_kubeconfig: Option<PathBuf>,
    /// Paths served without authentication or authorization (`/path`, or
    /// a prefix `/path/*`).
    pub always_allow_paths: Vec<String>,
    pub limits: conn::Limits,
}

impl Default for ServingOptions {
    fn default() -> Self {
        Self {
            tls_cert_file: None,
            tls_private_key_file: None,
            authentication_kubeconfig: None,
            authorization_kubeconfig: None,
            always_allow_paths: DEFAULT_ALWAYS_ALLOW.iter().map(|p| p.to_string()).collect(),
            limits: conn::Limits::default(),
        }
    }
}

/// The probes: the kubelet sends no token.
pub const DEFAULT_ALWAYS_ALLOW: &[&str] = &["/healthz", "/readyz"];

/// Everything the port needs, prepared before the scheduler starts so
/// that a taken port, a bad certificate or an unusable kubeconfig fails
/// at start with its cause.
pub struct Prepared {
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    auth: Arc<auth::Guard>,
    limits: conn::Limits,
}

impl Prepared {
    /// Binds the port (a taken port fails here, with its address).
    pub async fn new(
        listen: SocketAddr,
        opts: &ServingOptions,
        tls: Arc<rustls::ServerConfig>,
        auth: auth::Guard,
    ) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("--listen {listen}: {e}"))?;
        tracing::info!(
            %listen,
            certificate = %tls::describe(opts.tls_cert_file.as_deref()),
            metrics = auth.describe("/metrics"),
            "serving HTTPS"
        );
        Ok(Self {
            listener,
            tls,
            auth: Arc::new(auth),
            limits: opts.limits.clone(),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Serves until `shutdown` turns true; connections in flight get a few
/// seconds to finish.
pub async fn serve(prepared: Prepared, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/explain/{namespace}/{pod}", get(super::explain::handler))
        .with_state(shared)
        .layer(axum::middleware::from_fn_with_state(
            prepared.auth.clone(),
            auth::guard,
        ));
    conn::serve(
        prepared.listener,
        prepared.tls,
        app,
        prepared.limits,
        shutdown,
    )
    .await;
}

/// How long a stopping server waits for requests in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

async fn metrics() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::Metrics::global().encode(),
    )
}

async fn readyz(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    match shared.readiness() {
        Ok(()) => (StatusCode::OK, "ok".to_string()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}
