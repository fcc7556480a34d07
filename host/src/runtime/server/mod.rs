//! The one port, served as kube-scheduler serves 10259: HTTPS, `/metrics`
//! (Prometheus text format) and `/configz` (the configuration in force)
//! behind delegated authentication and authorization, `/healthz` and
//! `/livez` (the process serves) and `/readyz` (caches synced and, on the
//! leader, the scheduling loop turning) open to anyone (the kubelet's
//! probes carry no token). The probes answer `ok`, or with `?verbose`
//! one `[+]check ok` / `[-]check failed: why` line per check, as
//! kube-scheduler's do.
//!
//! - [`configz`]: the `/configz` document;
//! - [`tls`]: the certificate, from files or self-signed at start;
//! - [`auth`]: TokenReview and SubjectAccessReview against the API server,
//!   with a small cache ([`ttl`]);
//! - [`conn`]: the accept loop, with a connection limit and timeouts for
//!   the TLS handshake, the request headers and writes.

pub mod auth;
pub mod configz;
pub mod conn;
pub mod tls;
pub mod ttl;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
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

/// The probes: the kubelet sends no token (kube-scheduler's default
/// `--authorization-always-allow-paths`).
pub const DEFAULT_ALWAYS_ALLOW: &[&str] = &["/healthz", "/readyz", "/livez"];

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
            .map_err(|e| anyhow::anyhow!("--bind-address/--secure-port {listen}: {e}"))?;
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
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/configz", get(configz))
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

/// Whether a probe was asked `?verbose` (alone or among other
/// parameters).
fn verbose(uri: &Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    })
}

/// A probe's answer from its checks, as kube-scheduler's (the apiserver
/// library's) writes it: `ok`, or with `?verbose` a line per check and
/// `<probe> check passed`; a failed check makes it 503 with the lines.
fn probe(name: &str, checks: &[(&str, Result<(), String>)], verbose: bool) -> (StatusCode, String) {
    let failed = checks.iter().any(|(_, r)| r.is_err());
    if !failed && !verbose {
        return (StatusCode::OK, "ok".into());
    }
    let mut body = String::new();
    for (check, result) in checks {
        match result {
            Ok(()) => body.push_str(&format!("[+]{check} ok\n")),
            Err(why) => body.push_str(&format!("[-]{check} failed: {why}\n")),
        }
    }
    if failed {
        body.push_str(&format!("{name} check failed\n"));
        (StatusCode::SERVICE_UNAVAILABLE, body)
    } else {
        body.push_str(&format!("{name} check passed\n"));
        (StatusCode::OK, body)
    }
}

async fn healthz(uri: Uri) -> impl IntoResponse {
    probe("healthz", &[("ping", Ok(()))], verbose(&uri))
}

async fn livez(uri: Uri) -> impl IntoResponse {
    probe("livez", &[("ping", Ok(()))], verbose(&uri))
}

async fn readyz(State(shared): State<Arc<Shared>>, uri: Uri) -> impl IntoResponse {
    let checks = shared.readiness_checks();
    let verbose = verbose(&uri);
    let (status, body) = probe("readyz", &checks, verbose);
    if status == StatusCode::OK || verbose {
        return (status, body);
    }
    // Without ?verbose a failure says why in one line (what /readyz
    // always said here): the first failed check.
    let why = checks
        .into_iter()
        .find_map(|(_, r)| r.err())
        .unwrap_or_default();
    (status, why)
}

async fn configz(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        shared.configz.get().cloned().unwrap_or_default(),
    )
}
