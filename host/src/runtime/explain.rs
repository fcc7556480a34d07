//! "Why is my pod pending?" against a running scheduler: `GET
//! /explain/NAMESPACE/POD` on the HTTPS port (behind the same delegated
//! authentication and authorization as `/metrics`: `get` on the
//! non-resource URL `/explain/*`) moves the pending pod to the active
//! queue and returns the `--explain` view of that attempt, on the live
//! state: every node with each Filter plugin's verdict and each Score
//! plugin's scores. `wasmsched explain NS/POD` asks it.
//!
//! Only the leader's queue runs; a standby answers 503. The attempt is a
//! real one: a pod that fits now is bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;

use super::Shared;
use crate::framework::Explanation;
use crate::model::Pod;
use crate::simulate::ExplainReport;

/// How long a request waits for the pod's attempt.
pub const WAIT: Duration = Duration::from_secs(15);

/// Pods asked about, and their recorded attempts.
#[derive(Default)]
struct Board {
    /// Pod key -> when it was asked about.
    wanted: HashMap<String, Instant>,
    /// Pod key -> its recorded attempt.
    results: HashMap<String, ExplainReport>,
}

fn board() -> &'static Mutex<Board> {
    static B: OnceLock<Mutex<Board>> = OnceLock::new();
    B.get_or_init(Mutex::default)
}

/// Pods asked about (the loop's fast path when none is).
static WANTED: AtomicUsize = AtomicUsize::new(0);

/// Whether the attempt of `pod` is to be recorded.
pub fn wants(pod: &Pod) -> bool {
    WANTED.load(Ordering::Relaxed) > 0 && board().lock().wanted.contains_key(&pod.key())
}

/// The recorded attempt of a pod [`wants`] named.
pub fn record(pod: &Arc<Pod>, profile: &str, node: Option<&str>, explanation: Explanation) {
    let report = ExplainReport {
        namespace: pod.namespace.clone(),
        pod: pod.name.clone(),
        profile: profile.to_string(),
        node: node.map(str::to_string),
        explanation,
        gpus: Vec::new(),
        gpu_devices: Vec::new(),
        node_metrics: Vec::new(),
    };
    let mut b = board().lock();
    if b.wanted.remove(&pod.key()).is_some() {
        WANTED.store(b.wanted.len(), Ordering::Relaxed);
        b.results.insert(pod.key(), report);
    }
}

/// `GET /explain/{namespace}/{pod}`: the text of `simulate --explain`,
/// or with `?output=json` its JSON report.
pub async fn handler(
    State(shared): State<Arc<Shared>>,
    Path((namespace, name)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    let json = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "output=json"));
    let key = format!("{namespace}/{name}");
    if !shared.leadership.leading() {
        let why = "this replica is not the leader: its queue does not run (ask the leader's port)";
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response();
    }
    let uid = {
        let cache = shared.cache.lock();
        let uid = cache
            .queue
            .pods()
            .find(|p| p.key() == key)
            .map(|p| p.uid.clone());
        uid
    };
    let Some(uid) = uid else {
        let msg = format!(
            "pod {key} is not pending in this scheduler's queue (bound, gated, unknown, or for another schedulerName)\n"
        );
        return (StatusCode::NOT_FOUND, msg).into_response();
    };
    {
        let mut b = board().lock();
        b.results.remove(&key);
        let now = Instant::now();
        b.wanted.retain(|_, at| now.duration_since(*at) < 2 * WAIT);
        b.wanted.insert(key.clone(), now);
        WANTED.store(b.wanted.len(), Ordering::Relaxed);
    }
    shared
        .cache
        .lock()
        .queue
        .activate(&std::iter::once(uid).collect());
    shared.wake.notify_all();
    let started = Instant::now();
    let report = loop {
        if let Some(r) = board().lock().results.remove(&key) {
            break Some(r);
        }
        if started.elapsed() > WAIT {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let Some(report) = report else {
        let msg = format!("no attempt of {key} within {}s\n", WAIT.as_secs());
        return (StatusCode::GATEWAY_TIMEOUT, msg).into_response();
    };
    if json {
        let body = serde_json::to_string_pretty(&report).unwrap_or_default();
        return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    }
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        crate::output::explain(&report),
    )
        .into_response()
}

/// Where and how `wasmsched explain` asks.
pub struct AskOptions {
    /// `https://HOST:PORT` of the scheduler's port.
    pub server: String,
    pub token: Option<String>,
    /// PEM CA file of the port's certificate; `None` with `insecure`.
    pub ca: Option<std::path::PathBuf>,
    pub insecure: bool,
    pub json: bool,
}

/// `wasmsched explain NS/POD`: the port's answer, or why there is none.
pub fn ask_blocking(pod: &str, o: &AskOptions) -> anyhow::Result<String> {
    let Some((ns, name)) = pod
        .split_once('/')
        .filter(|(n, p)| !n.is_empty() && !p.is_empty())
    else {
        anyhow::bail!("{pod:?}: give NAMESPACE/POD");
    };
    let mut builder = reqwest::Client::builder().timeout(WAIT + Duration::from_secs(10));
    if let Some(ca) = &o.ca {
        let pem = std::fs::read(ca).map_err(|e| anyhow::anyhow!("{}: {e}", ca.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| anyhow::anyhow!("{}: {e}", ca.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    if o.insecure {
        builder = builder.danger_accept_invalid_certs(true);
    }
    let client = builder.build()?;
    let url = format!(
        "{}/explain/{ns}/{name}{}",
        o.server.trim_end_matches('/'),
        if o.json { "?output=json" } else { "" }
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut req = client.get(&url);
        if let Some(t) = &o.token {
            req = req.bearer_auth(t.trim());
        }
        let r = req
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        if !status.is_success() {
            anyhow::bail!("{url}: {status}: {}", body.trim());
        }
        Ok(body)
    })
}
