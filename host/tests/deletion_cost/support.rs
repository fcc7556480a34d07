//! The real servers (kube-apiserver, Prometheus) the tests use, a test
//! exporter Prometheus scrapes, a TCP proxy to switch Prometheus off, and
//! builders for a Deployment, its ReplicaSet and its pods with status.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use wasmsched::deletion_cost::annotation;
use wasmsched::deletion_cost::DeletionCostConfig;

/// Where the servers are (written by `scripts/test-servers start DIR`).
pub struct Env {
    pub kubeconfig: PathBuf,
    pub servers: PathBuf,
    pub prometheus: String,
}

/// The servers' environment; a missing one fails the test with a line
/// that says how to get it.
pub fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: these tests need a real kube-apiserver and Prometheus; run `scripts/test` (or `scripts/test-servers start DIR` and export the variables in DIR/env)"
                )
            })
        };
        Env {
            kubeconfig: var("WASMSCHED_TEST_KUBECONFIG").into(),
            servers: var("WASMSCHED_TEST_SERVERS").into(),
            prometheus: var("WASMSCHED_TEST_PROMETHEUS"),
        }
    })
}

pub async fn client() -> Client {
    let kc = Kubeconfig::read_from(&env().kubeconfig).expect("kubeconfig");
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(cfg).expect("client")
}

/// A fresh namespace `dc-<prefix>-<random>`.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    let name = format!("dc-{prefix}-{:06x}", rand_suffix());
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    name
}

fn rand_suffix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    (h.finish() & 0xff_ffff) as u32
}

/// What a test pod exposes and how it looks.
#[derive(Clone, Debug)]
pub struct TestPod {
    pub name: String,
    pub ip: String,
    pub annotations: BTreeMap<String, String>,
    pub ready: bool,
}

impl TestPod {
    pub fn new(name: &str) -> Self {
        TestPod {
            name: name.to_string(),
            ip: "127.0.0.1".into(),
            annotations: BTreeMap::new(),
            ready: true,
        }
    }

    pub fn ip(mut self, ip: &str) -> Self {
        self.ip = ip.to_string();
        self
    }

    pub fn cost(mut self, value: &str) -> Self {
        self.annotations
            .insert(annotation::COST.to_string(), value.to_string());
        self
    }
}

/// Creates Deployment `name` (labels `deployment_labels`), its
/// ReplicaSet `name-rs` and the pods, bound to `node-1`, Running and
/// Ready, with their IPs: what the Deployment and ReplicaSet controllers
/// and a kubelet would have made.
pub async fn workload(
    client: &Client,
    ns: &str,
    name: &str,
    deployment_labels: &[(&str, &str)],
    pods: &[TestPod],
) {
    let labels: BTreeMap<String, String> = deployment_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let template = json!({"metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]}});
    let dep: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": pods.len(), "selector": {"matchLabels": {"app": name}}, "template": template}
    }))
    .unwrap();
    let dep = Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &dep)
        .await
        .expect("create deployment");
    let rs_name = format!("{name}-rs");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": rs_name, "labels": {"app": name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                "uid": dep.metadata.uid, "controller": true}]},
        "spec": {"replicas": pods.len(), "selector": {"matchLabels": {"app": name}}, "template": template}
    }))
    .unwrap();
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create replicaset");
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    for p in pods {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": p.name, "labels": {"app": name}, "annotations": p.annotations,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                    "uid": rs.metadata.uid, "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app:1"}]}
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        let status = json!({"status": {
            "phase": "Running",
            "podIP": p.ip,
            "conditions": [{"type": "Ready", "status": if p.ready { "True" } else { "False" },
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}],
            "containerStatuses": [{"name": "app", "ready": p.ready, "restartCount": 0,
                "image": "app:1", "imageID": "", "state": {"running": {}}}]
        }});
        api.patch_status(&p.name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("pod status");
    }
}

/// (deletion-cost annotation, resourceVersion) of a pod.
pub async fn cost_and_version(client: &Client, ns: &str, pod: &str) -> (Option<String>, String) {
    let p = Api::<Pod>::namespaced(client.clone(), ns)
        .get(pod)
        .await
        .expect("get pod");
    (
        p.metadata
            .annotations
            .unwrap_or_default()
            .get(annotation::COST)
            .cloned(),
        p.metadata.resource_version.unwrap_or_default(),
    )
}

/// What a person does with `kubectl annotate --overwrite`.
pub async fn user_sets_cost(client: &Client, ns: &str, pod: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {annotation::COST: value}}});
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
}

/// An HTTP server on loopback serving `/metrics` with text the test sets.
pub struct Exporter {
    pub addr: SocketAddr,
    body: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    pub async fn start(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let body = Arc::new(Mutex::new(String::new()));
        let served = body.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let served = served.clone();
                async move { served.lock().unwrap().clone() }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Exporter { addr, body, task })
    }

    pub fn set(&self, text: String) {
        *self.body.lock().unwrap() = text;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The metrics of the test exporter for pods of one namespace:
/// (pod, [(series, value)]).
pub fn exposition(ns: &str, pods: &[(&str, &[(&str, f64)])]) -> String {
    let mut out = String::new();
    for (pod, series) in pods {
        for (name, v) in *series {
            let v = if v.is_nan() {
                "NaN".to_string()
            } else {
                v.to_string()
            };
            out.push_str(&format!("{name}{{namespace=\"{ns}\",pod=\"{pod}\"}} {v}\n"));
        }
    }
    out
}

/// Makes Prometheus scrape `addr` (file_sd), until dropped.
pub struct ScrapeTarget(PathBuf);

impl ScrapeTarget {
    pub fn add(name: &str, addr: SocketAddr) -> Self {
        let dir = env().servers.join("prometheus-targets");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.json"));
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, json!([{"targets": [addr.to_string()]}]).to_string()).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        ScrapeTarget(path)
    }
}

impl Drop for ScrapeTarget {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The value of an instant query (`None`: no series), from `prometheus`.
pub async fn query(prometheus: &str, q: &str) -> Option<String> {
    let v: Value = reqwest::Client::new()
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", q)])
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["data"]["result"][0]["value"][1]
        .as_str()
        .map(str::to_string)
}

/// Waits (up to 60 s) until Prometheus answers `q` with `expected`
/// (`None`: no series): the scrape and the file_sd refresh take seconds.
pub async fn until_prometheus(q: &str, expected: Option<&str>) {
    let prometheus = &env().prometheus;
    for _ in 0..600 {
        if query(prometheus, q).await.as_deref() == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "Prometheus never answered {q} with {expected:?} (last: {:?})",
        query(prometheus, q).await
    );
}

/// A TCP proxy on loopback to `upstream`, to make a server unreachable
/// (stop) and reachable again (start on the same address).
pub struct Proxy {
    pub addr: SocketAddr,
    tasks: JoinSet<()>,
}

impl Proxy {
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .expect("proxy bind");
        let addr = listener.local_addr().unwrap();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                conns.spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
            }
        });
        Proxy { addr, tasks }
    }

    /// Closes the listener and every connection.
    pub async fn stop(mut self) {
        self.tasks.shutdown().await;
    }
}

/// A `deletionCost` configuration: `yaml` is the section's body
/// (indented by two spaces).
pub fn config(yaml: &str) -> DeletionCostConfig {
    let text = format!("deletionCost:\n{yaml}");
    let file = wasmsched::config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    DeletionCostConfig::from_file(&file, Path::new("."))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .expect("section")
}

/// The Prometheus queries of the test exporter's series.
pub fn prometheus_queries(url: &str) -> String {
    format!(
        r#"  prometheus:
    url: {url}
    queries:
      active_requests: 'app_active_requests{{namespace="{{namespace}}",pod="{{pod}}"}}'
      cache_hit_rate: 'app_cache_hit_ratio{{namespace="{{namespace}}",pod="{{pod}}"}}'
      avg_response_time_seconds: 'app_response_seconds_avg{{namespace="{{namespace}}",pod="{{pod}}"}}'
      active_connections: 'app_active_connections{{namespace="{{namespace}}",pod="{{pod}}"}}'
"#
    )
}
