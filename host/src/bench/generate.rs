//! Synthetic clusters and workloads for the benchmark, from parameters and
//! a seed: nodes with cpu/memory, a GPU share with model/memory/count
//! labels, 3 zones in 2 regions; pods with requests, about a third asking
//! for GPUs, some declaring network peers, some with spread and
//! anti-affinity constraints.

use k8s_openapi::api::core::v1 as k8s;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::manifest::Manifests;
use crate::model::{Node, Pod};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub nodes: usize,
    pub pods: usize,
    pub seed: u64,
    /// Bytes of a `last-applied-configuration` annotation on every pod.
    pub annotation_bytes: usize,
    /// Not 0: every node carries 8 GPUs' DCGM node metrics, changed every
    /// this many measured pods (`bench::node_metrics`).
    pub node_metrics: usize,
}

const ZONES: [(&str, &str); 3] = [
    ("us-east-1", "us-east-1a"),
    ("us-east-1", "us-east-1b"),
    ("us-west-2", "us-west-2a"),
];
const GPUS: [(&str, u32); 4] = [
    ("A100", 40960),
    ("V100", 16384),
    ("T4", 16384),
    ("H100", 81920),
];
const SERVICES: usize = 40;

/// Generates the cluster. Every object goes through the same validation as
/// a manifest would.
pub fn generate(spec: Spec) -> Manifests {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut out = Manifests::default();
    for i in 0..spec.nodes {
        let (region, zone) = ZONES[i % ZONES.len()];
        let name = format!("node-{i:05}");
        let cpu = if rng.random_bool(0.5) { "32" } else { "64" };
        let mut labels = json!({
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": region,
        });
        let mut alloc =
            json!({"cpu": cpu, "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"});
        let mut annotations = json!({});
        if rng.random_bool(0.3) {
            let (model, mem) = GPUS[rng.random_range(0..GPUS.len())];
            let count = if rng.random_bool(0.5) { 4 } else { 8 };
            labels["gpu.nvidia.com/model"] = json!(model);
            labels["gpu.nvidia.com/memory"] = json!(mem.to_string());
            labels["gpu.nvidia.com/count"] = json!(count.to_string());
            alloc["nvidia.com/gpu"] = json!(count.to_string());
            annotations["gpu.nvidia.com/utilization"] =
                json!(format!("{:.2}", rng.random_range(0.0..1.0)));
        }
        let node: k8s::Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "status": {"allocatable": alloc},
        }))
        .expect("generated node is well-formed");
        out.nodes
            .push(Node::from_k8s(&node).expect("generated node is valid"));
    }
    for i in 0..spec.pods {
        let svc = rng.random_range(0..SERVICES);
        let app = format!("svc-{svc:02}");
        let mut annotations = json!({});
        if spec.annotation_bytes > 0 {
            annotations["kubectl.kubernetes.io/last-applied-configuration"] =
                json!("x".repeat(spec.annotation_bytes));
        }
        let mut limits = json!({});
        let cpu = format!("{}m", rng.random_range(1..=8) * 250);
        let mem = format!("{}Mi", rng.random_range(1..=8) * 512);
        if rng.random_bool(1.0 / 3.0) {
            limits["nvidia.com/gpu"] = json!(rng.random_range(1..=2).to_string());
            if rng.random_bool(0.5) {
                let (model, mem) = GPUS[rng.random_range(0..GPUS.len())];
                annotations["gpu.nvidia.com/model"] = json!(model);
                if rng.random_bool(0.5) {
                    annotations["gpu.nvidia.com/memory"] = json!(mem.to_string());
                }
            }
        }
        if rng.random_bool(0.2) {
            let peer = (svc + 1 + rng.random_range(0..3)) % SERVICES;
            annotations["network.wasmsched.io/peers"] =
                json!(format!("app=svc-{peer:02}:{}", rng.random_range(1..=10)));
        }
        let mut spec_json = json!({
            "schedulerName": "gpu-scheduler",
            "containers": [{"name": "main", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": limits}}],
        });
        if rng.random_bool(0.05) {
            spec_json["topologySpreadConstraints"] = json!([{
                "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }]);
        }
        if rng.random_bool(0.03) {
            spec_json["affinity"] = json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 50,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": app}}},
            }]}});
        }
        let pod: k8s::Pod = serde_json::from_value(json!({
            "metadata": {
                "name": format!("pod-{i:05}"), "namespace": "bench", "labels": {"app": app},
                "annotations": annotations,
                "creationTimestamp": format!("2026-01-01T{:02}:{:02}:{:02}Z", (i / 3600) % 24, (i / 60) % 60, i % 60),
            },
            "spec": spec_json,
        }))
        .expect("generated pod is well-formed");
        out.pods
            .push(Pod::from_k8s(&pod).expect("generated pod is valid"));
    }
    out
}
