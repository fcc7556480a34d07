//! kube-scheduler's scheduler_perf workloads (upstream
//! `test/integration/scheduler_perf/config/performance-config.yaml`), in the
//! shapes of upstream's templates: nodes of 4 cpu / 32 GiB / 110 pods,
//! pods asking for 100m / 500Mi. A workload places its initial pods
//! beforehand (not measured, as upstream's `initPods`), then attempts each
//! measured pod once, in order, with the cycle `simulate` runs.

use k8s_openapi::api::core::v1 as k8s;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config;
use crate::model::{Node, Pod};

use super::Spec;

/// What the synthetic cluster and its pods look like.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// The GPU and microservice mix of `bench::generate` (GPU pods with
    /// model annotations, network peers, spread, anti-affinity).
    #[default]
    Mixed,
    /// HAMi nodes with 8 shared GPUs each and pods asking for fractions of
    /// a GPU, through Reserve and PreBind (`bench::fractional`).
    Fractional,
    /// SchedulingBasic: plain pods, one per 5 nodes placed beforehand (as
    /// every workload below but required affinity).
    SchedulingBasic,
    /// SchedulingNodeAffinity: every pod requires a zone among two, every
    /// node is in one of them.
    NodeAffinity,
    /// SchedulingPreferredPodAffinity: pods prefer the hostname of pods
    /// of their own colour.
    PreferredAffinity,
    /// SchedulingPreferredPodAntiAffinity: pods prefer hosts without pods
    /// of their own colour.
    PreferredAntiAffinity,
    /// SchedulingPodAffinity: every pod requires a pod of its label in the
    /// same zone (one per node placed beforehand, at most 5000 measured).
    RequiredAffinity,
    /// SchedulingWithExtendedResource, as GPUs: every node has 8
    /// nvidia.com/gpu and the GPU labels, every pod asks for one.
    ExtendedResources,
    /// Unschedulable: one measured pod in ten asks for more cpu than any
    /// node has, so it takes the FitError path.
    Unschedulable,
    /// MixedSchedulingBasePod with churn: the pod templates above in
    /// turn, while every 100 attempts one node is deleted, one is added
    /// and 10 placed pods are deleted.
    MixedChurn,
}

/// Attempts between churn steps (MixedChurn).
const CHURN_EVERY: usize = 100;
/// Placed pods deleted at each churn step.
const CHURN_PODS: usize = 10;

impl Workload {
    /// The scheduler_perf workloads, in the order of BENCHMARKS.md's table.
    pub const UPSTREAM: [Workload; 8] = [
        Workload::SchedulingBasic,
        Workload::NodeAffinity,
        Workload::PreferredAffinity,
        Workload::PreferredAntiAffinity,
        Workload::RequiredAffinity,
        Workload::ExtendedResources,
        Workload::Unschedulable,
        Workload::MixedChurn,
    ];

    /// Its name on the command line.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// scheduler_perf's throughput threshold for the 5000-node case
    /// (pods/s, on upstream's bigger CI machines).
    pub fn upstream_threshold(self) -> Option<u32> {
        Some(match self {
            Workload::SchedulingBasic => 680,
            Workload::NodeAffinity => 220,
            Workload::PreferredAffinity | Workload::PreferredAntiAffinity => 90,
            Workload::RequiredAffinity => 35,
            Workload::ExtendedResources => 180,
            Workload::Unschedulable => 590,
            Workload::MixedChurn => 710,
            Workload::Mixed | Workload::Fractional => return None,
        })
    }

    /// This project's target on 2 cores (issue 15), pods/s.
    pub fn target(self) -> Option<u32> {
        Some(match self {
            Workload::SchedulingBasic => 1200,
            Workload::NodeAffinity => 500,
            Workload::PreferredAffinity | Workload::PreferredAntiAffinity => 200,
            Workload::RequiredAffinity => 100,
            Workload::ExtendedResources => 800,
            Workload::Unschedulable | Workload::MixedChurn => 1000,
            Workload::Mixed => 1000,
            Workload::Fractional => return None,
        })
    }

    /// Pods placed before the measurement: upstream's 1000 per 5000 nodes
    /// (5000 for required affinity).
    pub fn init_pods(self, nodes: usize) -> usize {
        match self {
            Workload::RequiredAffinity => nodes,
            Workload::Mixed | Workload::Fractional => 0,
            _ => nodes / 5,
        }
    }

    /// Measured pods for `requested` (required affinity caps at 5000, as
    /// upstream's 5000-node case).
    pub fn measured_pods(self, requested: usize) -> usize {
        match self {
            Workload::RequiredAffinity => requested.min(5000),
            _ => requested,
        }
    }

    /// Whether nodes and pods come and go during the run.
    pub fn churns(self) -> bool {
        self == Workload::MixedChurn
    }
}

/// A workload's cluster: nodes, the pods placed beforehand (with the index
/// of their node) and the pods to measure, in order.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub init: Vec<(u32, Pod)>,
    pub measured: Vec<Pod>,
}

/// Builds `workload`'s cluster (not for `Mixed` or `Fractional`, which have
/// generators of their own).
pub fn cluster(workload: Workload, spec: &Spec) -> Cluster {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let nodes: Vec<Node> = (0..spec.nodes).map(|i| node(workload, i)).collect();
    let n = spec.nodes.max(1) as u64;
    let init = (0..workload.init_pods(spec.nodes))
        .map(|i| {
            // Scattered, deterministic placement (a prime stride).
            let at = ((i as u64 * 7919) % n) as u32;
            (at, pod(workload, &format!("init-{i:05}"), i, &mut rng))
        })
        .collect();
    let measured = (0..workload.measured_pods(spec.pods))
        .map(|i| pod(workload, &format!("pod-{i:05}"), i, &mut rng))
        .collect();
    Cluster {
        nodes,
        init,
        measured,
    }
}

/// Upstream's node-default template, with a zone (`zone1`/`zone2` where
/// the workload's pods select on it) and, for the GPU workload, 8 GPUs.
pub fn node(workload: Workload, i: usize) -> Node {
    let n: k8s::Node =
        serde_json::from_value(node_json(workload, i)).expect("bench node is well-formed");
    Node::from_k8s(&n).expect("bench node is valid")
}

/// [`node`] as the Node object an API server stores (`scripts/bench-kube`
/// creates these).
pub fn node_json(workload: Workload, i: usize) -> Value {
    let name = format!("node-{i:05}");
    let zone = match workload {
        Workload::RequiredAffinity => "zone1".to_string(),
        _ => format!("zone{}", 1 + i % 3),
    };
    let mut labels = json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone});
    let mut alloc = json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
    if workload == Workload::ExtendedResources {
        let (model, memory) = if i.is_multiple_of(2) {
            ("A100", "40960")
        } else {
            ("H100", "81920")
        };
        labels["gpu.nvidia.com/model"] = json!(model);
        labels["gpu.nvidia.com/memory"] = json!(memory);
        labels["gpu.nvidia.com/count"] = json!("8");
        alloc["nvidia.com/gpu"] = json!("8");
    }
    json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc, "capacity": alloc},
    })
}

/// The `i`-th pod of `workload`.
fn pod(workload: Workload, name: &str, i: usize, rng: &mut StdRng) -> Pod {
    let mut p = pod_json(workload, name, i, rng);
    p["metadata"]["uid"] = json!(name);
    let p: k8s::Pod = serde_json::from_value(p).expect("bench pod is well-formed");
    Pod::from_k8s(&p).expect("bench pod is valid")
}

/// [`pod`] as the Pod object a client creates, in namespace `bench`, for
/// the default scheduler name (`scripts/bench-kube` creates these). The
/// colours of the preferred-affinity templates come from `rng`.
pub fn pod_json(workload: Workload, name: &str, i: usize, rng: &mut StdRng) -> Value {
    let template = match workload {
        Workload::MixedChurn => CHURN_TEMPLATES[i % CHURN_TEMPLATES.len()],
        w => w,
    };
    let mut requests = json!({"cpu": "100m", "memory": "500Mi"});
    let mut limits = json!({});
    let mut labels = json!({});
    let mut spec = json!({});
    match template {
        Workload::NodeAffinity => spec["affinity"] = node_affinity(),
        Workload::PreferredAffinity | Workload::PreferredAntiAffinity => {
            let color = COLORS[rng.random_range(0..COLORS.len())];
            labels["color"] = json!(color);
            spec["affinity"] = preferred_pod_affinity(template, color);
        }
        Workload::RequiredAffinity => {
            labels["foo"] = json!("bar");
            spec["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "topology.kubernetes.io/zone",
                "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
            }]}});
        }
        Workload::ExtendedResources => limits["nvidia.com/gpu"] = json!("1"),
        Workload::Unschedulable if i % 10 == 9 => requests["cpu"] = json!("1000"),
        Workload::MixedChurn => {
            // Spread: the fifth template of the mix.
            labels["app"] = json!(format!("app-{}", i % 20));
            spec["topologySpreadConstraints"] = json!([{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": format!("app-{}", i % 20)}},
            }]);
        }
        _ => {}
    }
    spec["schedulerName"] = json!(config::DEFAULT_SCHEDULER_NAME);
    spec["containers"] = json!([{"name": "pause", "image": "pause",
        "resources": {"requests": requests, "limits": limits}}]);
    json!({
        "metadata": {"name": name, "namespace": "bench", "labels": labels},
        "spec": spec,
    })
}

const COLORS: [&str; 4] = ["red", "blue", "green", "yellow"];

/// The templates MixedChurn cycles through; `MixedChurn` itself stands for
/// a pod with a zone spread constraint.
const CHURN_TEMPLATES: [Workload; 5] = [
    Workload::SchedulingBasic,
    Workload::NodeAffinity,
    Workload::PreferredAffinity,
    Workload::PreferredAntiAffinity,
    Workload::MixedChurn,
];

fn node_affinity() -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone1", "zone2"]}],
    }]}}})
}

fn preferred_pod_affinity(template: Workload, color: &str) -> Value {
    let kind = if template == Workload::PreferredAffinity {
        "podAffinity"
    } else {
        "podAntiAffinity"
    };
    json!({kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 1,
        "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"color": color}}},
    }]}})
}

/// One churn step of MixedChurn, after `attempt` attempts: deletes a node
/// (with its pods) and adds a new one, and deletes placed pods. Returns
/// whether anything changed.
pub fn churn(
    workload: Workload,
    attempt: usize,
    snapshot: &mut crate::framework::Snapshot,
    placed: &mut Vec<String>,
    rng: &mut StdRng,
) -> bool {
    if !workload.churns() || attempt == 0 || !attempt.is_multiple_of(CHURN_EVERY) {
        return false;
    }
    let step = attempt / CHURN_EVERY;
    let count = snapshot.num_nodes();
    if count > 1 {
        let at = rng.random_range(0..count);
        let victim = snapshot.nodes().nth(at).map(|n| n.name().to_string());
        if let Some(victim) = victim {
            snapshot.remove_node(&victim);
        }
    }
    snapshot.set_node(node(workload, 1_000_000 + step));
    for _ in 0..CHURN_PODS.min(placed.len()) {
        let uid = placed.swap_remove(rng.random_range(0..placed.len()));
        snapshot.remove_pod(&uid);
    }
    true
}
