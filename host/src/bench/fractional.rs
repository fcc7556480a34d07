//! `wasmsched bench --workload fractional`: fractional GPU pods on HAMi
//! nodes, through the whole scheduling step (cycle, Reserve, PreBind
//! output merged into the assumed pod, assume), so every pod sees the
//! devices the earlier ones took. Reports pods/s and the GPUs left whole.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as k8s;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config;
use crate::framework::Cache;
use crate::gpu_sharing;
use crate::manifest::Manifests;
use crate::model::{Node, Pod};
use crate::scheduler::Collected;

/// GPUs per node.
pub const GPUS_PER_NODE: usize = 8;

/// GpuTopology's HAMi policies to run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policies {
    /// wasmsched's defaults: nodes binpack, GPUs fragmentation-aware.
    Default,
    /// HAMi's defaults: nodes binpack, GPUs spread.
    Hami,
    /// Nodes and GPUs spread.
    Spread,
}

impl Policies {
    fn args(self) -> &'static str {
        match self {
            Policies::Default => "{}",
            Policies::Hami => r#"{hami: {gpuPolicy: spread}}"#,
            Policies::Spread => r#"{hami: {nodePolicy: spread, gpuPolicy: spread}}"#,
        }
    }
}

/// One run's numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FractionalResult {
    pub policies: Policies,
    pub nodes: usize,
    pub gpus: usize,
    pub pods: usize,
    pub workers: usize,
    pub scheduled: usize,
    pub unschedulable: usize,
    pub seconds: f64,
    pub pods_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// GPUs without any vGPU after the run, and nodes with all GPUs so.
    pub gpus_whole: usize,
    pub nodes_whole: usize,
    pub peak_rss_mib: f64,
}

/// The devices of node `i`: A100 40 GB on two nodes in three, H100 80 GB
/// on the third; 10 vGPUs each; NVLink within each half (pair score 100),
/// PCIe across (20).
fn register(i: usize) -> (String, String) {
    let (model, mem) = if i % 3 == 2 {
        ("NVIDIA-H100-80GB-HBM3", 81920)
    } else {
        ("NVIDIA-A100-SXM4-40GB", 40960)
    };
    let id = |g: usize| format!("GPU-{i:05}-{g}");
    let devices: Vec<serde_json::Value> = (0..GPUS_PER_NODE)
        .map(|g| {
            json!({"id": id(g), "index": g, "count": 10, "devmem": mem, "devcore": 100,
                   "type": model, "numa": g / 4, "mode": "hami-core", "health": true})
        })
        .collect();
    let scores: Vec<serde_json::Value> = (0..GPUS_PER_NODE)
        .map(|a| {
            let s: serde_json::Map<String, serde_json::Value> = (0..GPUS_PER_NODE)
                .filter(|b| *b != a)
                .map(|b| (id(b), json!(if a / 4 == b / 4 { 100 } else { 20 })))
                .collect();
            json!({"uuid": id(a), "score": s})
        })
        .collect();
    (json!(devices).to_string(), json!(scores).to_string())
}

/// The cluster and the pods.
pub fn generate(nodes: usize, pods: usize, seed: u64) -> Manifests {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Manifests::default();
    for i in 0..nodes {
        let (reg, score) = register(i);
        let node: k8s::Node = serde_json::from_value(json!({
            "metadata": {"name": format!("gpu-{i:05}"),
                         "labels": {"kubernetes.io/hostname": format!("gpu-{i:05}")},
                         "annotations": {"hami.io/node-nvidia-register": reg, "hami.io/node-nvidia-score": score}},
            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110",
                                       "nvidia.com/gpu": (GPUS_PER_NODE * 10).to_string()}},
        }))
        .expect("generated node is well-formed");
        out.nodes
            .push(Node::from_k8s(&node).expect("generated node is valid"));
    }
    for i in 0..pods {
        let mut limits = json!({"nvidia.com/gpu": if rng.random_bool(0.05) { "2" } else { "1" }});
        if rng.random_bool(0.1) {
            limits["nvidia.com/gpumem-percentage"] = json!(["25", "50"][rng.random_range(0..2)]);
        } else {
            let mem = [2048, 4096, 8192, 12288, 16384][rng.random_range(0..5)];
            limits["nvidia.com/gpumem"] = json!(mem.to_string());
        }
        limits["nvidia.com/gpucores"] =
            json!(["10", "20", "25", "30", "50"][rng.random_range(0..5)]);
        let pod: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("infer-{i:05}"), "namespace": "bench",
                         "creationTimestamp": format!("2026-01-01T{:02}:{:02}:{:02}Z", (i / 3600) % 24, (i / 60) % 60, i % 60)},
            "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "main", "image": "infer",
                "resources": {"requests": {"cpu": format!("{}", rng.random_range(1..=4)),
                                           "memory": format!("{}Gi", rng.random_range(1..=4) * 4)},
                              "limits": limits}}]},
        }))
        .expect("generated pod is well-formed");
        out.pods
            .push(Pod::from_k8s(&pod).expect("generated pod is valid"));
    }
    out
}

/// The configuration: GpuTopology with `policies`, NodeResourcesFit
/// ignoring HAMi's resources, the resource scores off (as
/// examples/gpu-sharing).
fn configuration(policies: Policies, workers: usize) -> anyhow::Result<config::ConfigFile> {
    let text = format!(
        "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nparallelism: {workers}\n\
         profiles:\n- schedulerName: hami-scheduler\n  plugins:\n    score:\n      disabled:\n\
         \x20     - {{name: NodeResourcesFit}}\n      - {{name: NodeResourcesBalancedAllocation}}\n\
         \x20 pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      ignoredResources: \
         [nvidia.com/gpumem, nvidia.com/gpumem-percentage, nvidia.com/gpucores, nvidia.com/priority]\n\
         \x20 - name: GpuTopology\n    args: {}\n",
        policies.args()
    );
    Ok(config::parse(&text)?)
}

/// Schedules every pod once, in creation order.
pub fn run(
    nodes: usize,
    pods: usize,
    seed: u64,
    policies: Policies,
    workers: usize,
) -> anyhow::Result<FractionalResult> {
    let scheduler = config::build(
        &configuration(policies, workers)?,
        std::path::Path::new("."),
        seed,
    )?;
    let manifests = generate(nodes, pods, seed);
    let mut cache = Cache::default();
    for n in manifests.nodes {
        cache.node_applied(n, 0);
    }
    let mut latencies: Vec<Duration> = Vec::with_capacity(pods);
    let (mut scheduled, mut unschedulable) = (0, 0);
    let started = Instant::now();
    for pod in manifests.pods {
        scheduler.pod_applied(&mut cache, pod, false, 0);
        let t = Instant::now();
        let mut out = Collected::default();
        scheduler.schedule_one(&mut cache, 0, &mut out);
        latencies.push(t.elapsed());
        for b in &out.binds {
            scheduler.bind_at_once(&mut cache, b, 0);
        }
        scheduled += out.binds.len();
        unschedulable += out.failures.len();
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let ((gpus_whole, gpus), (nodes_whole, _)) = gpu_sharing::whole(&cache.snapshot);
    Ok(FractionalResult {
        policies,
        nodes,
        gpus,
        pods,
        workers,
        scheduled,
        unschedulable,
        seconds: elapsed.as_secs_f64(),
        pods_per_second: pods as f64 / elapsed.as_secs_f64(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        gpus_whole,
        nodes_whole,
        peak_rss_mib: super::peak_rss_mib(),
    })
}
