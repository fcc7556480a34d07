//! Throughput on the real API server: wasmsched against kube-scheduler
//! 1.20 (built from the same Debian source as the API server), same
//! cluster, same pods, same client QPS. Ignored in the test suite; run by
//! `scripts/bench-kube`, which prints the table BENCHMARKS.md keeps.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
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

/// Seconds from a scheduler's start until its first binding, and until
/// every pod is bound.
struct Timing {
    first: f64,
    all: f64,
}

/// Starts a scheduler on the prepared cluster and measures the time from
/// its start until its first binding and until every pod is bound.
/// Bindings are counted from a watch opened (and listed) before the start:
/// polling a list of 10000 pods would cost the API server, which shares
/// the machine with the scheduler measured, about as much as the
/// scheduler's own requests.
async fn measure(client: &Client, pods: usize, mut start: impl FnMut() -> Child) -> Timing {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    let mut bound = HashSet::new();
    loop {
        match events.next().await.expect("the watch ended").unwrap() {
            watcher::Event::InitDone => break,
            watcher::Event::InitApply(p) if is_bound(&p) => {
                bound.insert(p.metadata.name.unwrap());
            }
            _ => {}
        }
    }
    assert!(
        bound.is_empty(),
        "pods were bound before the scheduler started"
    );
    let t0 = Instant::now();
    let mut child = start();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut first = None;
    while bound.len() < pods {
        tokio::select! {
            event = events.next() => match event.expect("the watch ended") {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) if is_bound(&p) => {
                    first.get_or_insert_with(|| t0.elapsed().as_secs_f64());
                    bound.insert(p.metadata.name.unwrap());
                }
                Ok(_) => {}
                Err(e) => eprintln!("watch: {e}"),
            },
            _ = tick.tick() => {
                assert!(t0.elapsed() < Duration::from_secs(1800), "bench timed out");
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("scheduler exited: {status}");
                }
            }
        }
    }
    let all = t0.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    Timing {
        first: first.unwrap_or(all),
        all,
    }
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
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {kubeconfig}, qps: {qps}, burst: {burst}}}\n\
             leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {SCHED}\n",
            burst = qps * 2
        ),
    )
    .unwrap();
    // As deployed (deploy/config.yaml): compiled plugins kept in a cache
    // directory, warm as after any restart.
    let common = format!(
        "leaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {qps}, burst: {burst}}}\n\
         pluginCacheDir: {cache}\n{parallelism}",
        burst = qps * 2,
        cache = tmp.path().join("plugin-cache").display(),
        parallelism = std::env::var("BENCH_PARALLELISM")
            .map(|p| format!("parallelism: {p}\n"))
            .unwrap_or_default(),
    );
    let core_cfg = tmp.path().join("wasmsched-core.yaml");
    std::fs::write(
        &core_cfg,
        format!(
            "{common}profiles:\n- schedulerName: {SCHED}\n  plugins:\n    multiPoint:\n      disabled:\n      \
             - {{name: GpuTopology}}\n      - {{name: NetworkLocality}}\n"
        ),
    )
    .unwrap();
    let wasm_cfg = tmp.path().join("wasmsched-wasm.yaml");
    std::fs::write(
        &wasm_cfg,
        format!("{common}profiles:\n- schedulerName: {SCHED}\n"),
    )
    .unwrap();
    // One warm-up compiles every component either configuration loads (the
    // core one disables two of the as-shipped one's plugins).
    let warm = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["profiles", "--config"])
        .arg(&wasm_cfg)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(
        warm.success(),
        "wasmsched profiles --config {}",
        wasm_cfg.display()
    );

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
        let t = measure(&client, pods, start).await;
        let (rate, steady) = (pods as f64 / t.all, (pods - 1) as f64 / (t.all - t.first));
        eprintln!(
            "{name}: {pods} pods on {nodes} nodes in {:.1} s ({rate:.0} pods/s; first binding at {:.1} s, {steady:.0} pods/s after)",
            t.all, t.first
        );
        rows.push((name, t, rate, steady));
    }
    println!("\n{nodes} nodes, {pods} pending pods, client qps {qps} / burst {}; seconds from the scheduler's start:\n", qps * 2);
    println!(
        "| scheduler | first binding | every pod bound | pods/s | pods/s after the first binding |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, t, rate, steady) in rows {
        println!(
            "| {name} | {:.1} | {:.1} | {rate:.0} | {steady:.0} |",
            t.first, t.all
        );
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
