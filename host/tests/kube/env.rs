//! The real API server the tests talk to (started by `scripts/test-servers`
//! through `scripts/test`), a client for it, and the `wasmsched run`
//! processes under test.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::Value;

/// The servers' environment, or a failure that says how to get one.
pub struct Env {
    pub kubeconfig: PathBuf,
    pub servers: PathBuf,
}

pub fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: these tests need a real kube-apiserver; run `scripts/test` \
                     (or `scripts/test-servers start DIR` and export the variables in DIR/env)"
                )
            })
        };
        Env {
            kubeconfig: var("WASMSCHED_TEST_KUBECONFIG").into(),
            servers: var("WASMSCHED_TEST_SERVERS").into(),
        }
    })
}

/// The tests share one API server and nodes are cluster-wide: they run
/// one at a time.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(cfg).expect("client")
}

pub async fn client() -> Client {
    client_for(&env().kubeconfig).await
}

/// Removes every node and every pod in the test namespaces, and creates
/// the namespaces afresh (well, keeps them).
pub async fn reset(client: &Client, namespaces: &[&str]) {
    let nodes: Api<Node> = Api::all(client.clone());
    let _ = nodes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let pods: Api<Pod> = Api::all(client.clone());
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for p in pods.list(&ListParams::default()).await.expect("list pods") {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let _ = api
            .delete(p.metadata.name.as_deref().unwrap(), &force)
            .await;
    }
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let mut deleted_events = HashSet::new();
    for ns in namespaces {
        let n: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": ns}
        }))
        .unwrap();
        let _ = ns_api.create(&PostParams::default(), &n).await;
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        deleted_events.extend(event_uids(&events).await.unwrap_or_default());
        let _ = events
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
    }
    let one = ListParams::default().limit(1);
    wait_until("cleanup", Duration::from_secs(60), || async {
        listed_none(pods.list(&one).await) && listed_none(nodes.list(&one).await)
    })
    .await;
    // The API server goes on deleting a collection after the request has
    // timed out (thousands of a benchmark's Events take longer than its
    // minute): wait for the deleted Events too, so that the next test (and
    // the next scheduler a benchmark measures) starts on a quiet server.
    // Only for those: kube-controller-manager goes on reporting Events
    // about objects a test deletes after this (a volume test's claims).
    if deleted_events.is_empty() {
        return;
    }
    for ns in namespaces {
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        wait_until("the Events' cleanup", Duration::from_secs(300), || async {
            let gone = event_uids(&events)
                .await
                .is_some_and(|left| left.is_disjoint(&deleted_events));
            if !gone {
                // A full list of thousands of Events is not cheap for the
                // server that is deleting them.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            gone
        })
        .await;
    }
}

/// The UIDs of every Event in `events`' namespace, listed 500 at a time;
/// None when a list fails.
async fn event_uids(events: &Api<Event>) -> Option<HashSet<String>> {
    let mut uids = HashSet::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = events.list(&params).await.ok()?;
        uids.extend(page.items.into_iter().filter_map(|e| e.metadata.uid));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Some(uids),
        }
    }
}

/// A list that succeeded and is empty.
fn listed_none<K: Clone>(list: kube::Result<kube::api::ObjectList<K>>) -> bool {
    list.is_ok_and(|l| l.items.is_empty())
}

/// Polls `f` every 100 ms until it is true; panics after `limit` (a bound
/// on a hang, not a performance assertion).
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if f().await {
            return;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `wasmsched run` process, killed on drop.
pub struct Scheduler {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

/// The label every cluster-scoped DRA object a test creates carries
/// (classes, slices, taint rules), so that any DRA test's cleanup removes
/// what an earlier test left: their names (`gpu`, `fpga`) are shared.
pub const DRA_LABEL: &str = "wasmsched.io/dra-test";

/// Deletes every ResourceClaim `claims` lists, finalizers first (a
/// scheduler protects the claims it allocated).
pub async fn delete_claims(claims: &Api<kube::api::DynamicObject>) {
    for c in claims
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = c.metadata.name.unwrap_or_default();
        let patch = serde_json::json!({"metadata": {"finalizers": null}});
        let _ = claims
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await;
        let _ = claims.delete(&name, &DeleteParams::default()).await;
    }
}

/// The pod has a node.
pub fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some()
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Scheduler {
    /// Starts `wasmsched run` with exactly `args` (a command line as a
    /// user writes it; `port` is the HTTPS port those args name), its
    /// stderr into a file in `dir`.
    pub fn start_as_given(dir: &Path, name: &str, port: u16, args: &[String]) -> Self {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .arg("run")
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn wasmsched");
        Self { child, port, log }
    }

    /// Starts `wasmsched run` with `args` (plus kubeconfig, listen port,
    /// and info logs into a file in `dir`).
    pub fn start(dir: &Path, name: &str, kubeconfig: &Path, args: &[&str]) -> Self {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--identity", name])
            .args(args)
            // The binder's debug lines name each pod it bound (the
            // fault tests attribute bindings to replicas with them).
            .env(
                "WASMSCHED_LOG",
                "info,kube=warn,wasmsched::runtime::binder=debug",
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn wasmsched");
        Self { child, port, log }
    }

    /// Waits (up to a minute) until `/readyz` answers 200; the probes need
    /// no token.
    pub async fn wait_ready(&self) {
        wait_until("/readyz", Duration::from_secs(60), || async {
            self.get_as("/readyz", None)
                .await
                .is_some_and(|(s, _)| s == 200)
        })
        .await;
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// GET with the admin token (system:masters may read /metrics).
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        self.get_as(path, Some(&admin_token())).await
    }

    /// GET with `token` as bearer token, or none; the port's certificate
    /// is self-signed, so it is not verified.
    pub async fn get_as(&self, path: &str, token: Option<&str>) -> Option<(u16, String)> {
        let mut req = insecure_https().get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().await.ok()?))
    }

    /// A metric's value (the sum over series whose labels contain every
    /// `labels` pair).
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let Some((_, text)) = self.get("/metrics").await else {
            return f64::NAN;
        };
        metric_value(&text, name, labels)
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "wasmsched did not stop on SIGTERM; log:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Scheduler {
    /// Kills the process; when the test failed (or
    /// `WASMSCHED_TEST_SHOW_LOGS` is set) prints the end of its log.
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() || std::env::var_os("WASMSCHED_TEST_SHOW_LOGS").is_some() {
            let logs = self.logs();
            let lines: Vec<&str> = logs.lines().collect();
            let tail = &lines[lines.len().saturating_sub(150)..];
            eprintln!(
                "--- {} (last {} lines) ---\n{}",
                self.log.display(),
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// Starts kube-scheduler (the version `scripts/test-servers` built, in
/// `WASMSCHED_TEST_KUBE_BIN`) with the KubeSchedulerConfiguration
/// `config` (`kubescheduler.config.k8s.io/v1`), logging into `log` at
/// klog level `verbosity` (10 prints every plugin's scores); serving
/// healthz and metrics on a free secure port only, authenticating against
/// the test API server.
pub fn kube_scheduler(config: &Path, log: &Path, verbosity: u8) -> Child {
    let bin = std::env::var("WASMSCHED_TEST_KUBE_BIN").expect("WASMSCHED_TEST_KUBE_BIN");
    Command::new(format!("{bin}/kube-scheduler"))
        .arg(format!("--config={}", config.display()))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()))
        .arg(format!(
            "--authentication-kubeconfig={}",
            env().kubeconfig.display()
        ))
        .arg(format!(
            "--authorization-kubeconfig={}",
            env().kubeconfig.display()
        ))
        .arg(format!("-v={verbosity}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn kube-scheduler")
}

/// The API server's admin token (group system:masters).
pub fn admin_token() -> String {
    let path = env().servers.join("pki/admin-token");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// An HTTPS client that accepts any certificate (the scheduler's port
/// serves a self-signed one, as kube-scheduler's does).
pub fn insecure_https() -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTPS client")
}

/// Sums the samples of `name` whose labels include `labels`.
pub fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut total = 0.0;
    let mut found = false;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (label_part, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once("} ") {
                Some((l, v)) => (l, v),
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(v) => ("", v),
                None => continue,
            },
        };
        if labels
            .iter()
            .all(|(k, v)| label_part.contains(&format!("{k}=\"{v}\"")))
        {
            if let Ok(v) = value.trim().parse::<f64>() {
                total += v;
                found = true;
            }
        }
    }
    if found {
        total
    } else {
        0.0
    }
}

/// Objects of a manifest file (a List, single objects, or several
/// documents).
pub fn manifest_objects(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for v in serde_saphyr::from_multiple::<Value>(&text).unwrap() {
        if v["kind"] == "List" {
            out.extend(v["items"].as_array().cloned().unwrap_or_default());
        } else {
            out.push(v);
        }
    }
    out
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Events about a pod, by reason.
pub async fn events_for(client: &Client, ns: &str, pod: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(pod) && e.reason.as_deref() == Some(reason)
        })
        .collect()
}
