//! What the fault tests check after every fault: an audit of bindings (a
//! watch of the test's own, straight to the API server, that records each
//! pod's `spec.nodeName` as it first appears, in the API server's order),
//! no pod bound twice or reported scheduled twice, no pod lost, no node
//! over its allocatable; and helpers for the control plane's faults
//! (etcd compaction, the servers stopped, frozen, restarted).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::runtime::WatchStreamExt;
use kube::Client;
use parking_lot::Mutex;

use crate::env::*;

/// A pod's binding as the audit saw it.
#[derive(Debug, Clone)]
pub struct Bound {
    pub name: String,
    pub node: String,
    /// When the audit's watch saw it (the test's clock).
    pub at: Instant,
    /// The pod's resourceVersion at that point: the API server's order.
    pub rv: u64,
}

#[derive(Default)]
struct Log {
    /// First binding per pod uid.
    bound: HashMap<String, Bound>,
    /// Pods seen on a second, different node (must stay empty).
    rebound: Vec<String>,
    synced: bool,
}

/// A watch on the pods of a namespace recording every binding.
pub struct BindingAudit {
    log: Arc<Mutex<Log>>,
    task: tokio::task::JoinHandle<()>,
}

impl BindingAudit {
    /// Starts the audit and waits for its first list.
    pub async fn start(client: &Client, namespace: &str) -> Self {
        let log = Arc::new(Mutex::new(Log::default()));
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let task = {
            let log = log.clone();
            tokio::spawn(async move {
                let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
                futures::pin_mut!(stream);
                while let Some(e) = stream.next().await {
                    match e {
                        Ok(WatchEvent::Apply(p)) | Ok(WatchEvent::InitApply(p)) => record(&log, &p),
                        Ok(WatchEvent::InitDone) => log.lock().synced = true,
                        _ => {}
                    }
                }
            })
        };
        let audit = Self { log, task };
        wait_until(
            "the binding audit's list",
            Duration::from_secs(30),
            || async { audit.log.lock().synced },
        )
        .await;
        audit
    }

    /// Every binding seen, in the API server's order.
    pub fn bindings(&self) -> Vec<Bound> {
        let mut v: Vec<Bound> = self.log.lock().bound.values().cloned().collect();
        v.sort_by_key(|b| b.rv);
        v
    }

    pub fn bound_count(&self) -> usize {
        self.log.lock().bound.len()
    }

    /// The binding of the pod named `name`.
    pub fn of(&self, name: &str) -> Option<Bound> {
        self.log
            .lock()
            .bound
            .values()
            .find(|b| b.name == name)
            .cloned()
    }

    /// Pods bound to one of `nodes`.
    pub fn bound_to(&self, nodes: &[&str]) -> Vec<Bound> {
        self.bindings()
            .into_iter()
            .filter(|b| nodes.contains(&b.node.as_str()))
            .collect()
    }

    /// Panics if a pod was ever seen on two nodes.
    pub fn assert_no_rebinding(&self) {
        let log = self.log.lock();
        assert!(
            log.rebound.is_empty(),
            "pods bound twice: {:?}",
            log.rebound
        );
    }
}

impl Drop for BindingAudit {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(log: &Mutex<Log>, p: &Pod) {
    let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
        return;
    };
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let mut log = log.lock();
    if let Some(b) = log.bound.get(&uid) {
        if b.node != node {
            let line = format!("{} on {} then {node}", b.name, b.node);
            log.rebound.push(line);
        }
        return;
    }
    let rv = p
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    log.bound.insert(
        uid,
        Bound {
            name: p.metadata.name.clone().unwrap_or_default(),
            node,
            at: Instant::now(),
            rv,
        },
    );
}

/// A quantity in thousandths ("500m" = 500, "2" = 2000, "1Gi" in
/// thousandths of a byte: only compared with amounts of the same kind).
pub fn milli(q: &str) -> i128 {
    let q = q.trim();
    let units: [(&str, i128); 10] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("m", 0),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("", 1),
    ];
    for (suffix, factor) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            if let Ok(v) = n.parse::<f64>() {
                return if factor == 0 {
                    v as i128
                } else {
                    (v * 1000.0) as i128 * factor
                };
            }
        }
    }
    panic!("quantity {q:?}");
}

/// The requests of a pod that count on its node, by resource (the sum of
/// its containers, as the test pods have no init containers or overhead).
pub fn pod_requests(p: &Pod) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    for c in p
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
    {
        let reqs = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        for (k, v) in reqs.into_iter().flatten() {
            *out.entry(k.clone()).or_default() += milli(&v.0);
        }
    }
    *out.entry("pods".into()).or_default() += 1000;
    out
}

/// No node holds more than its allocatable of any resource its pods
/// request (all namespaces, terminal pods excluded); returns how many
/// pods are bound.
pub async fn assert_within_allocatable(client: &Client) -> usize {
    let nodes: Api<Node> = Api::all(client.clone());
    let alloc: HashMap<String, BTreeMap<String, i128>> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let a = n
                .status
                .and_then(|s| s.allocatable)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, milli(&v.0)))
                .collect();
            (name, a)
        })
        .collect();
    let pods: Api<Pod> = Api::all(client.clone());
    let mut used: HashMap<String, BTreeMap<String, i128>> = HashMap::new();
    let mut bound = 0;
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let phase = p.status.as_ref().and_then(|s| s.phase.clone());
        if matches!(phase.as_deref(), Some("Succeeded") | Some("Failed")) {
            continue;
        }
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        bound += 1;
        let u = used.entry(node).or_default();
        for (k, v) in pod_requests(&p) {
            *u.entry(k).or_default() += v;
        }
    }
    for (node, u) in &used {
        let Some(a) = alloc.get(node) else {
            // A node deleted under its pods (the tests delete both).
            continue;
        };
        for (k, v) in u {
            let cap = a.get(k).copied().unwrap_or(0);
            assert!(
                *v <= cap,
                "node {node} holds {v} thousandths of {k}, its allocatable is {cap}"
            );
        }
    }
    bound
}

/// `Scheduled` events per pod name in `namespace`; panics if a pod has
/// more than one.
pub async fn assert_one_scheduled_event_each(client: &Client, namespace: &str) -> usize {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut per_pod: HashMap<String, usize> = HashMap::new();
    for e in api.list(&ListParams::default()).await.unwrap().items {
        if e.reason.as_deref() == Some("Scheduled") {
            let key = e.involved_object.uid.unwrap_or_default();
            *per_pod.entry(key).or_default() += e.count.unwrap_or(1).max(1) as usize;
        }
    }
    let twice: Vec<_> = per_pod.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pods reported scheduled twice: {twice:?}");
    per_pod.len()
}

/// Waits until every pod named in `names` is bound (the audit saw it):
/// "no pod lost".
pub async fn wait_all_bound(audit: &BindingAudit, names: &[String], limit: Duration) {
    let start = Instant::now();
    loop {
        let missing: Vec<&String> = names.iter().filter(|n| audit.of(n).is_none()).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{} pod(s) not bound within {limit:?}: {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// etcd's current revision (the gRPC gateway on the client URL).
pub async fn etcd_revision(etcd: &str) -> i64 {
    let r: serde_json::Value = reqwest::Client::new()
        .post(format!("{etcd}/v3/kv/range"))
        .json(&serde_json::json!({"key": "AA=="}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["header"]["revision"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("etcd revision: {r}"))
}

/// Compacts etcd's history up to its current revision: watches from an
/// older resourceVersion expire (410 Gone once the API server's watch
/// cache no longer has them).
pub async fn compact_etcd(etcd: &str) -> i64 {
    let rev = etcd_revision(etcd).await;
    let r = reqwest::Client::new()
        .post(format!("{etcd}/v3/kv/compaction"))
        .json(&serde_json::json!({"revision": rev.to_string(), "physical": true}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "compaction: {}", r.status());
    rev
}

/// `scripts/test-servers COMMAND DIR`.
pub fn servers(command: &str) {
    let status = std::process::Command::new(repo().join("scripts/test-servers"))
        .arg(command)
        .arg(&env().servers)
        .status()
        .unwrap();
    assert!(status.success(), "scripts/test-servers {command} failed");
}

/// SIGSTOP or SIGCONT to the process whose pid file is `DIR/NAME.pid`.
pub fn signal_server(name: &str, signal: &str) {
    let pid = std::fs::read_to_string(env().servers.join(format!("{name}.pid"))).unwrap();
    signal_pid(pid.trim().parse().unwrap(), signal);
}

pub fn signal_pid(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// The etcd client URL and the API server's URL of the test servers.
pub fn etcd_url() -> String {
    std::env::var("WASMSCHED_TEST_ETCD").expect("WASMSCHED_TEST_ETCD")
}

pub fn apiserver_url() -> String {
    std::env::var("WASMSCHED_TEST_APISERVER").expect("WASMSCHED_TEST_APISERVER")
}

/// Peak resident memory of a process (VmHWM), bytes.
pub fn peak_rss(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:") * 1024
}

/// Resident memory of a process (VmRSS), bytes.
pub fn rss(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:") * 1024
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))
        .unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
