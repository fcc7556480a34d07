//! The accept loop: TLS, HTTP/1.1, and the bounds that keep a flood of
//! idle or slow connections from starving the probes.
//!
//! - At most [`Limits::max_connections`] connections are served at once;
//!   a connection over the limit is closed as soon as it is accepted (the
//!   kernel's backlog never fills up behind it).
//! - The TLS handshake and then each request's headers (including the
//!   wait for the next request on a kept-alive connection) must arrive
//!   within [`Limits::header_timeout`]; a connection that sends nothing is
//!   closed after that.
//! - A write that makes no progress for [`Limits::write_timeout`] (a
//!   client that stopped reading) closes the connection.
//! - Request headers are limited to [`MAX_HEADER_BYTES`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;

/// The connection bounds (see the module docs).
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// Largest request head (request line and headers); a service account
/// token is about 1 KiB.
pub const MAX_HEADER_BYTES: usize = 32 << 10;

/// Serves `app` on `listener` until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let full = AtomicBool::new(false);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors, typically: wait, do not spin.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if !full.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    max = limits.max_connections,
                    "connection limit reached; closing new connections until some end"
                );
            }
            drop(tcp);
            continue;
        };
        full.store(false, Ordering::Relaxed);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let limits = limits.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            connection(tcp, acceptor, app, &limits, watcher).await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(super::SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("HTTP connections still open at shutdown; dropping them");
    }
}

/// One connection: handshake within the header timeout, then HTTP/1.1.
async fn connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    app: axum::Router,
    limits: &Limits,
    watcher: Watcher,
) {
    let _ = tcp.set_nodelay(true);
    let mut io = TimeoutStream::new(tcp);
    io.set_write_timeout(Some(limits.write_timeout));
    let handshake = acceptor.accept(Box::pin(io));
    let tls = match tokio::time::timeout(limits.header_timeout, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            return;
        }
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "HTTP connection ended");
    }
}
