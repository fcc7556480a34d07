//! GPU utilization from DCGM through the real Prometheus: a test exporter
//! serves dcgm-exporter's series for three fake GPU nodes, Prometheus
//! scrapes it (file service discovery, 1 s), and `wasmsched run` polls
//! Prometheus through a proxy the test can stop (`nodeMetrics`,
//! docs/node-metrics.md). GpuTopology's utilization term then decides
//! between nodes with the same free GPUs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::env::*;

const NS: &str = "dcgm";
const NODES: [&str; 3] = ["dcgm-a", "dcgm-b", "dcgm-c"];
const SCHEDULER: &str = "dcgm-scheduler";

fn prometheus_url() -> String {
    std::env::var("WASMSCHED_TEST_PROMETHEUS").expect(
        "WASMSCHED_TEST_PROMETHEUS is not set: run `scripts/test` (or scripts/test-servers)",
    )
}

/// An HTTP server on loopback serving `/metrics` with text the test sets.
struct Exporter {
    addr: SocketAddr,
    body: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
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
        Exporter { addr, body, task }
    }

    /// dcgm-exporter's series for `nodes` (name, utilization of each of
    /// its 4 GPUs).
    fn serve(&self, nodes: &[(&str, u32)]) {
        let mut out = String::from(
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
        );
        for (node, util) in nodes {
            for g in 0..4 {
                out.push_str(&format!(
                    "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{g}\",UUID=\"GPU-{node}-{g}\",device=\"nvidia{g}\",\
                     modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"{node}\"}} {util}\n"
                ));
            }
        }
        out.push_str("# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n# TYPE DCGM_FI_DEV_FB_FREE gauge\n");
        for (node, _) in nodes {
            for g in 0..4 {
                out.push_str(&format!(
                    "DCGM_FI_DEV_FB_FREE{{gpu=\"{g}\",UUID=\"GPU-{node}-{g}\",Hostname=\"{node}\"}} 40000\n"
                ));
            }
        }
        *self.body.lock().unwrap() = out;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Makes Prometheus scrape `addr` (file_sd), until dropped.
struct ScrapeTarget(PathBuf);

impl ScrapeTarget {
    fn add(name: &str, addr: SocketAddr) -> Self {
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

/// A TCP proxy to Prometheus, so the test can make it unreachable.
struct Proxy {
    addr: SocketAddr,
    tasks: JoinSet<()>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
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
    async fn stop(mut self) {
        self.tasks.shutdown().await;
    }
}

/// Prometheus's value of `q` (`None`: no series).
async fn query(q: &str) -> Option<String> {
    let v: Value = reqwest::Client::new()
        .get(format!("{}/api/v1/query", prometheus_url()))
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

/// Waits until Prometheus answers `q` with `expected` (the scrape and the
/// file_sd refresh take seconds).
async fn until_prometheus(q: &str, expected: Option<&str>) {
    wait_until(
        &format!("Prometheus answers {q} with {expected:?}"),
        Duration::from_secs(60),
        || async { query(q).await.as_deref() == expected },
    )
    .await;
}

fn write_config(dir: &Path, prometheus: SocketAddr) -> PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "leaderElection:\n  leaderElect: false\n\
             profiles:\n- schedulerName: {SCHEDULER}\n  plugins:\n    score:\n      disabled:\n\
             \x20     - {{name: NodeResourcesFit}}\n      - {{name: NodeResourcesBalancedAllocation}}\n\
             nodeMetrics:\n  prometheus:\n    url: http://{prometheus}\n    timeout: 1s\n    \
             queries:\n      DCGM_FI_DEV_GPU_UTIL: DCGM_FI_DEV_GPU_UTIL\n      \
             DCGM_FI_DEV_FB_FREE: DCGM_FI_DEV_FB_FREE\n  \
             interval: 1s\n  staleAfter: 3s\n"
        ),
    )
    .unwrap();
    path
}

async fn gpu_node(client: &Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "gpu.nvidia.com/model": "A100", "gpu.nvidia.com/count": "4",
            "gpu.nvidia.com/memory": "40960"}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110",
                                   "nvidia.com/gpu": "4"}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
}

/// Creates a one-GPU pod, waits for its node, deletes it (so every node
/// keeps the same free GPUs) and returns the node.
async fn place(client: &Client, name: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "cuda",
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let mut node = None;
    for _ in 0..600 {
        node = pods
            .get(name)
            .await
            .ok()
            .and_then(|p| p.spec.and_then(|s| s.node_name));
        if node.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(node) = node else {
        panic!("pod {name} never bound")
    };
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete(name, &now).await.unwrap();
    wait_until(
        &format!("pod {name} gone"),
        Duration::from_secs(30),
        || async { pods.get_opt(name).await.ok().flatten().is_none() },
    )
    .await;
    node
}

/// Waits until the source has finished a whole pass that started after
/// this call (its queries' count grew by two passes' worth), so the
/// cache holds what Prometheus had at the call.
async fn next_pass(sched: &Scheduler) {
    let count = "wasmsched_node_metrics_query_duration_seconds_count";
    let start = sched.metric(count, &[]).await;
    wait_until(
        "two passes of the node-metrics source",
        Duration::from_secs(30),
        || async { sched.metric(count, &[]).await >= start + 4.0 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_follow_dcgm_utilization_through_prometheus() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let exporter = Exporter::start().await;
    exporter.serve(&[("dcgm-a", 90), ("dcgm-b", 10), ("dcgm-c", 50)]);
    let _target = ScrapeTarget::add("dcgm-exporter", exporter.addr);
    until_prometheus(
        r#"DCGM_FI_DEV_GPU_UTIL{Hostname="dcgm-b",gpu="0"}"#,
        Some("10"),
    )
    .await;
    let upstream: SocketAddr = prometheus_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let proxy = Proxy::start(upstream).await;
    for n in NODES {
        gpu_node(&client, n).await;
    }
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), proxy.addr);
    let config = config.to_str().unwrap();
    let sched = Scheduler::start(tmp.path(), "dcgm", &env().kubeconfig, &["--config", config]);
    sched.wait_ready().await;
    next_pass(&sched).await;
    assert_eq!(sched.metric("wasmsched_node_metrics_nodes", &[]).await, 3.0);
    assert_eq!(sched.metric("wasmsched_node_metrics_up", &[]).await, 1.0);
    // 3 nodes x 4 GPUs x 2 metrics.
    assert_eq!(
        sched.metric("wasmsched_node_metrics_series", &[]).await,
        24.0
    );
    // The dashboard's panel reads what the source serves.
    let (_, served) = sched.get("/metrics").await.unwrap();
    let panel: Vec<String> = crate::deploy::dashboard_metrics()
        .into_iter()
        .filter(|m| m.starts_with("wasmsched_node_metrics_"))
        .collect();
    assert_eq!(panel.len(), 5, "{panel:?}");
    for m in panel {
        assert!(served.lines().any(|l| l.starts_with(&m)), "{m} not served");
    }

    // Same free GPUs everywhere: the least utilized node wins.
    assert_eq!(place(&client, "first").await, "dcgm-b", "{}", sched.logs());

    // The exporter's values change: placements follow once Prometheus has
    // scraped them and the source has made a pass.
    exporter.serve(&[("dcgm-a", 90), ("dcgm-b", 95), ("dcgm-c", 5)]);
    until_prometheus(
        r#"DCGM_FI_DEV_GPU_UTIL{Hostname="dcgm-b",gpu="0"}"#,
        Some("95"),
    )
    .await;
    next_pass(&sched).await;
    assert_eq!(place(&client, "second").await, "dcgm-c");

    // dcgm-c's series stop (Prometheus marks them stale at once): after
    // staleAfter it is unknown (50%), and the 30% node wins.
    exporter.serve(&[("dcgm-a", 30), ("dcgm-b", 95)]);
    until_prometheus(r#"DCGM_FI_DEV_GPU_UTIL{Hostname="dcgm-c",gpu="0"}"#, None).await;
    wait_until("dcgm-c's values stale", Duration::from_secs(30), || async {
        sched.metric("wasmsched_node_metrics_nodes", &[]).await == 2.0
    })
    .await;
    until_prometheus(
        r#"DCGM_FI_DEV_GPU_UTIL{Hostname="dcgm-a",gpu="0"}"#,
        Some("30"),
    )
    .await;
    next_pass(&sched).await;
    assert_eq!(place(&client, "third").await, "dcgm-a");

    // Prometheus unreachable: the condition shows in the metrics, every
    // value goes stale, and scheduling goes on with unknown utilization.
    let unreachable = [("cause", "prometheus-unreachable")];
    proxy.stop().await;
    wait_until(
        "the source sees Prometheus down",
        Duration::from_secs(30),
        || async {
            sched.metric("wasmsched_node_metrics_up", &[]).await == 0.0
                && sched
                    .metric("wasmsched_node_metrics_errors_total", &unreachable)
                    .await
                    > 0.0
        },
    )
    .await;
    wait_until("every value stale", Duration::from_secs(30), || async {
        sched.metric("wasmsched_node_metrics_nodes", &[]).await == 0.0
    })
    .await;
    let node = place(&client, "fourth").await;
    assert!(NODES.contains(&node.as_str()), "{node}");
    let logs = sched.logs();
    assert!(
        logs.contains("node metrics: query failed") && logs.contains("Prometheus unreachable"),
        "{logs}"
    );

    let nodes: Api<Node> = Api::all(client.clone());
    for n in NODES {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}
