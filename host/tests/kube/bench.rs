//! Throughput on the real API server: wasmsched against kube-scheduler
//! 1.20 (built from the same Debian source as the API server), same
//! cluster, same pods, same client QPS. Ignored in the test suite; run by
//! `scripts/bench-kube`, which prints the table BENCHMARKS.md keeps.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use crate::env::*;

const NS: &str = "bench";
const SCHED: &str = "bench-scheduler";

fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn create_cluster(client: &Client, nodes: usize) {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..nodes)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let zone = ["a", "b", "c"][i % 3];
                let node: Node = serde_json::from_value(json!({
                    "metadata": {"name": format!("bench-{i:05}"), "labels": {
                        "kubernetes.io/hostname": format!("bench-{i:05}"),
                        "topology.kubernetes.io/zone": zone}},
                    "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}
                }))
                .unwrap();
                api.create(&PostParams::default(), &node).await.unwrap();
            }
        })
        .await;
}

async fn create_pods(client: &Client, pods: usize) {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    futures::stream::iter(0..pods)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("p-{i:06}"), "namespace": NS,
                        "labels": {"app": format!("app-{}", i % 20)}},
                    "spec": {"schedulerName": SCHED, "containers": [{"name": "c", "image": "x",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
                }))
                .unwrap();
                api.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .await;
}

async fn bound(client: &Client) -> usize {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count()
        })
        .unwrap_or(0)
}

/// Starts a scheduler on the prepared cluster and measures the time from
/// its start until every pod is bound.
async fn measure(client: &Client, pods: usize, mut start: impl FnMut() -> Child) -> f64 {
    let t0 = Instant::now();
    let mut child = start();
    loop {
        if bound(client).await == pods {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(1800), "bench timed out");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("scheduler exited: {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    secs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: scripts/bench-kube"]
async fn bench_against_kube_scheduler() {
    let _g = serial();
    let nodes = size("BENCH_NODES", 500);
    let pods = size("BENCH_PODS", 2000);
    let qps = size("BENCH_QPS", 500);
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = env().kubeconfig.to_str().unwrap().to_string();

    let kube_cfg = tmp.path().join("kube-scheduler.yaml");
    std::fs::write(
        &kube_cfg,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {kubeconfig}, qps: {qps}, burst: {burst}}}\n\
             leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {SCHED}\n",
            burst = qps * 2
        ),
    )
    .unwrap();
    let core_cfg = tmp.path().join("wasmsched-core.yaml");
    std::fs::write(
        &core_cfg,
        format!(
            "leaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {qps}, burst: {burst}}}\n\
             profiles:\n- schedulerName: {SCHED}\n  plugins:\n    multiPoint:\n      disabled:\n      \
             - {{name: GpuTopology}}\n      - {{name: NetworkLocality}}\n",
            burst = qps * 2
        ),
    )
    .unwrap();
    let wasm_cfg = tmp.path().join("wasmsched-wasm.yaml");
    std::fs::write(
        &wasm_cfg,
        format!(
            "leaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {qps}, burst: {burst}}}\n\
             profiles:\n- schedulerName: {SCHED}\n",
            burst = qps * 2
        ),
    )
    .unwrap();

    let mut rows = Vec::new();
    type Start = Box<dyn Fn() -> Child>;
    let runs: Vec<(&str, Start)> = vec![
        (
            "kube-scheduler 1.20.2 (default plugins)",
            Box::new({
                let kube_cfg = kube_cfg.clone();
                let log = tmp.path().join("kube-scheduler.log");
                move || kube_scheduler(&kube_cfg, &log, 1)
            }),
        ),
        (
            "wasmsched, core plugins",
            Box::new({
                let cfg = core_cfg.clone();
                move || wasmsched(&cfg)
            }),
        ),
        (
            "wasmsched, core + GpuTopology + NetworkLocality (wasm)",
            Box::new({
                let cfg = wasm_cfg.clone();
                move || wasmsched(&cfg)
            }),
        ),
    ];
    for (name, start) in runs {
        reset(&client, &[NS]).await;
        create_cluster(&client, nodes).await;
        create_pods(&client, pods).await;
        let secs = measure(&client, pods, start).await;
        rows.push((name, secs, pods as f64 / secs));
        eprintln!(
            "{name}: {pods} pods on {nodes} nodes in {secs:.1} s ({:.0} pods/s)",
            pods as f64 / secs
        );
    }
    println!("\n{nodes} nodes, {pods} pending pods, client qps {qps} / burst {}; time from scheduler start until every pod is bound:\n", qps * 2);
    println!("| scheduler | seconds | pods/s |");
    println!("|---|---:|---:|");
    for (name, secs, rate) in rows {
        println!("| {name} | {secs:.1} | {rate:.0} |");
    }
}

fn wasmsched(cfg: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["run", "--config"])
        .arg(cfg)
        .arg("--kubeconfig")
        .arg(&env().kubeconfig)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .env("WASMSCHED_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}
