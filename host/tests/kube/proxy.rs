//! A fault proxy between `wasmsched run` and the API server, in the test
//! process (an equivalent of Shopify's toxiproxy for what these tests
//! need, without another server to build).
//!
//! It terminates TLS with the API server's own serving certificate (so a
//! kubeconfig that trusts the test CA trusts it) and opens a TLS
//! connection of its own to the API server for each client connection.
//! Between the two it forwards bytes, to which faults apply:
//!
//! - latency: each chunk is delivered `latency` after it arrived, in both
//!   directions (toxiproxy's `latency` toxic);
//! - bandwidth: each direction of each connection is limited to so many
//!   bytes per second (`bandwidth`);
//! - black hole: data is read and discarded in both directions, the
//!   connections stay open, new ones hang before their TLS handshake
//!   (toxiproxy's `timeout` with 0). When it ends, every connection that
//!   lived through it is reset: through toxiproxy the TLS records lost
//!   would break those connections; here, where TLS ends at the proxy, a
//!   watch would otherwise go on with events silently missing;
//! - refuse: new connections are reset as they are accepted;
//! - reset: every open connection is closed with a TCP RST (`reset_peer`);
//! - hold: requests whose request line contains a pattern wait (the rest
//!   of their connection with them) until the hold ends — the proxy reads
//!   HTTP/1.1 request heads, so it can hold back, say, the Node watch's
//!   list while the Pod watch's goes through.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

/// The faults in force.
#[derive(Debug, Clone, Default)]
struct Faults {
    latency: Duration,
    /// Bytes per second, per direction and connection.
    bandwidth: Option<u64>,
    blackhole: bool,
    refuse: bool,
    /// (pattern in the request line, until when).
    holds: Vec<(String, Instant)>,
}

struct State {
    faults: Mutex<Faults>,
    /// Signalled when the faults change.
    changed: Notify,
    /// A token per open connection (reset cancels them all).
    conns: Mutex<Vec<CancellationToken>>,
    upstream: std::net::SocketAddr,
    client_tls: Arc<rustls::ClientConfig>,
    /// Requests seen, and how many of them were held.
    requests: AtomicU64,
    held: AtomicU64,
    /// Request lines seen (the last 10000), for assertions and failures.
    log: Mutex<Vec<String>>,
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    pub addr: std::net::SocketAddr,
    state: Arc<State>,
    stop: CancellationToken,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl FaultProxy {
    /// A proxy to the API server at `upstream` (`https://127.0.0.1:PORT`),
    /// with the certificates of the test servers in `servers`.
    pub async fn start(servers: &Path, upstream: &str) -> Self {
        let pki = servers.join("pki");
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(pki.join("serving.crt"))
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
        let key = PrivateKeyDer::from_pem_file(pki.join("serving.key")).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(pki.join("ca.crt")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let upstream = upstream
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .parse()
            .expect("upstream host:port");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            faults: Mutex::new(Faults::default()),
            changed: Notify::new(),
            conns: Mutex::new(Vec::new()),
            upstream,
            client_tls: Arc::new(client),
            requests: AtomicU64::new(0),
            held: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
        });
        let stop = CancellationToken::new();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        tokio::spawn(accept_loop(listener, acceptor, state.clone(), stop.clone()));
        Self { addr, state, stop }
    }

    /// A kubeconfig like `base` (the test servers' admin one, or a
    /// ServiceAccount's) whose server is this proxy.
    pub fn kubeconfig(&self, base: &Path, dir: &Path, name: &str) -> PathBuf {
        let text = std::fs::read_to_string(base).unwrap();
        let mut kc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        kc["clusters"][0]["cluster"]["server"] =
            serde_json::Value::String(format!("https://{}", self.addr));
        let path = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&path, serde_saphyr::to_string(&kc).unwrap()).unwrap();
        path
    }

    fn update(&self, f: impl FnOnce(&mut Faults)) {
        f(&mut self.state.faults.lock());
        self.state.changed.notify_waiters();
    }

    pub fn set_latency(&self, latency: Duration) {
        self.update(|f| f.latency = latency);
    }

    pub fn set_bandwidth(&self, bytes_per_second: Option<u64>) {
        self.update(|f| f.bandwidth = bytes_per_second);
    }

    /// Starts or ends the black hole (ending it resets the connections
    /// that lived through it).
    pub fn set_blackhole(&self, on: bool) {
        self.update(|f| f.blackhole = on);
        if !on {
            self.reset_all();
        }
    }

    pub fn set_refuse(&self, on: bool) {
        self.update(|f| f.refuse = on);
    }

    /// Holds requests whose request line contains `pattern` for `d`.
    pub fn hold(&self, pattern: &str, d: Duration) {
        self.update(|f| f.holds.push((pattern.to_string(), Instant::now() + d)));
    }

    /// Every fault off (open connections stay, unless a black hole ends).
    pub fn heal(&self) {
        let blackhole = self.state.faults.lock().blackhole;
        self.update(|f| *f = Faults::default());
        if blackhole {
            self.reset_all();
        }
    }

    /// Closes every open connection with a TCP RST.
    pub fn reset_all(&self) {
        for c in self.state.conns.lock().drain(..) {
            c.cancel();
        }
    }

    /// Requests seen and how many were held.
    pub fn requests(&self) -> (u64, u64) {
        (
            self.state.requests.load(Ordering::Relaxed),
            self.state.held.load(Ordering::Relaxed),
        )
    }

    /// Request lines seen containing `pattern`.
    pub fn seen(&self, pattern: &str) -> Vec<String> {
        self.state
            .log
            .lock()
            .iter()
            .filter(|l| l.contains(pattern))
            .cloned()
            .collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.reset_all();
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<State>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((tcp, _)) = accepted else { continue };
        // Every close by the proxy is a reset: a black-holed or reset
        // connection must not end cleanly.
        let _ = tcp.set_zero_linger();
        let _ = tcp.set_nodelay(true);
        if state.faults.lock().refuse {
            drop(tcp);
            continue;
        }
        let token = stop.child_token();
        state.conns.lock().push(token.clone());
        tokio::spawn(connection(tcp, acceptor.clone(), state.clone(), token));
    }
}

/// Waits while the proxy black-holes (a new connection's handshake hangs).
async fn while_blackholed(state: &State, token: &CancellationToken) -> bool {
    loop {
        let changed = state.changed.notified();
        if !state.faults.lock().blackhole {
            return true;
        }
        tokio::select! {
            () = token.cancelled() => return false,
            () = changed => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

async fn connection(
    tcp: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<State>,
    token: CancellationToken,
) {
    if !while_blackholed(&state, &token).await {
        return;
    }
    let handshake = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp));
    let client = tokio::select! {
        () = token.cancelled() => return,
        r = handshake => match r {
            Ok(Ok(s)) => s,
            _ => return,
        },
    };
    let up = match TcpStream::connect(state.upstream).await {
        Ok(s) => s,
        Err(_) => return,
    };
    let _ = up.set_nodelay(true);
    let connector = tokio_rustls::TlsConnector::from(state.client_tls.clone());
    let name = ServerName::IpAddress(state.upstream.ip().into());
    let upstream = match connector.connect(name, up).await {
        Ok(s) => s,
        Err(_) => return,
    };
    let (cr, cw) = tokio::io::split(client);
    let (ur, uw) = tokio::io::split(upstream);
    let (to_up, from_client) = mpsc::unbounded_channel();
    let (to_client, from_up) = mpsc::unbounded_channel();
    let tasks = [
        tokio::spawn(read_requests(cr, to_up, state.clone())),
        tokio::spawn(write_side(uw, from_client, state.clone())),
        tokio::spawn(read_raw(ur, to_client, state.clone())),
        tokio::spawn(write_side(cw, from_up, state.clone())),
    ];
    // Any side ending ends the connection; a reset ends it at once (the
    // tasks own the streams: aborting them closes the sockets).
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    tokio::select! {
        () = token.cancelled() => {}
        _ = futures::future::select_all(tasks) => {}
    }
    token.cancel();
    for a in aborts {
        a.abort();
    }
}

/// A chunk and when it arrived.
type Chunk = (Instant, Vec<u8>);

/// Whether data is discarded now.
fn blackholed(state: &State) -> bool {
    state.faults.lock().blackhole
}

/// Forwards the server's bytes as they come.
async fn read_raw<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    out: mpsc::UnboundedSender<Chunk>,
    state: Arc<State>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if blackholed(&state) {
            continue;
        }
        if out.send((Instant::now(), buf[..n].to_vec())).is_err() {
            return;
        }
    }
}

/// Delivers chunks after the latency, at the bandwidth, in order.
async fn write_side<W: tokio::io::AsyncWrite + Unpin>(
    mut w: W,
    mut rx: mpsc::UnboundedReceiver<Chunk>,
    state: Arc<State>,
) {
    while let Some((arrived, bytes)) = rx.recv().await {
        let (latency, bandwidth) = {
            let f = state.faults.lock();
            (f.latency, f.bandwidth)
        };
        tokio::time::sleep_until((arrived + latency).into()).await;
        if blackholed(&state) {
            continue;
        }
        match bandwidth {
            Some(rate) if rate > 0 => {
                // In slices of a tenth of a second's worth, each delivered
                // when it would have finished arriving at that rate.
                let slice = (rate / 10).max(1) as usize;
                for part in bytes.chunks(slice) {
                    tokio::time::sleep(Duration::from_secs_f64(part.len() as f64 / rate as f64))
                        .await;
                    if w.write_all(part).await.is_err() {
                        return;
                    }
                    let _ = w.flush().await;
                }
            }
            _ => {
                if w.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
}

/// How the client's byte stream is framed.
enum Framing {
    /// Reading a request head.
    Head,
    /// This many body bytes still to come.
    Body(usize),
    /// A chunked body or an upgrade: forwarded as it comes from here on.
    Raw,
}

/// Forwards the client's requests, holding back those a hold names.
async fn read_requests<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    out: mpsc::UnboundedSender<Chunk>,
    state: Arc<State>,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut framing = Framing::Head;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        // Forward what the framing allows of what is buffered.
        loop {
            match framing {
                Framing::Raw | Framing::Body(_) if buf.is_empty() => break,
                Framing::Raw => {
                    let data = std::mem::take(&mut buf);
                    if !send(&out, &state, data) {
                        return;
                    }
                }
                Framing::Body(n) => {
                    let take = n.min(buf.len());
                    let data: Vec<u8> = buf.drain(..take).collect();
                    framing = if n == take {
                        Framing::Head
                    } else {
                        Framing::Body(n - take)
                    };
                    if !send(&out, &state, data) {
                        return;
                    }
                }
                Framing::Head => {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        break;
                    };
                    let head: Vec<u8> = buf.drain(..end + 4).collect();
                    let text = String::from_utf8_lossy(&head).to_string();
                    let line = text.lines().next().unwrap_or_default().to_string();
                    framing = framing_after(&text);
                    state.requests.fetch_add(1, Ordering::Relaxed);
                    {
                        let mut log = state.log.lock();
                        if log.len() >= 10_000 {
                            log.drain(..1000);
                        }
                        log.push(line.clone());
                    }
                    wait_while_held(&state, &line).await;
                    if !send(&out, &state, head) {
                        return;
                    }
                }
            }
        }
        let n = match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn send(out: &mpsc::UnboundedSender<Chunk>, state: &State, data: Vec<u8>) -> bool {
    if blackholed(state) {
        return true;
    }
    out.send((Instant::now(), data)).is_ok()
}

/// The body's framing from a request head.
fn framing_after(head: &str) -> Framing {
    let mut length = 0usize;
    for h in head.lines().skip(1) {
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
            return Framing::Raw;
        }
        if k == "upgrade" {
            return Framing::Raw;
        }
        if k == "content-length" {
            length = v.parse().unwrap_or(0);
        }
    }
    if length == 0 {
        Framing::Head
    } else {
        Framing::Body(length)
    }
}

async fn wait_while_held(state: &State, line: &str) {
    let mut counted = false;
    loop {
        let changed = state.changed.notified();
        let until = {
            let mut f = state.faults.lock();
            let now = Instant::now();
            f.holds.retain(|(_, t)| *t > now);
            f.holds
                .iter()
                .filter(|(p, _)| line.contains(p.as_str()))
                .map(|(_, t)| *t)
                .max()
        };
        let Some(until) = until else { return };
        if !counted {
            counted = true;
            state.held.fetch_add(1, Ordering::Relaxed);
        }
        tokio::select! {
            () = changed => {}
            () = tokio::time::sleep_until(until.into()) => {}
        }
    }
}
