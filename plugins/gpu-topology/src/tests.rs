//! Native tests: the plugin is driven through the SDK runtime exactly as
//! the exported component functions drive it.

use wasmsched_plugin_sdk::runtime;
use wasmsched_plugin_sdk::types::{Delta, Node, Placement as Bind, Pod, ResourceAmount};
use wasmsched_plugin_sdk::Cluster;

use crate::*;

// ---- builders -----------------------------------------------------------

fn sorted(mut v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.sort();
    v
}

#[derive(Clone, Default)]
struct N {
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
    allocatable: Vec<ResourceAmount>,
    metrics: Vec<(String, f64)>,
}

/// A node with no GPU labels.
fn node() -> N {
    N::default()
}

/// A node with the origin design's labels.
fn origin_node(count: u32, model: &str, memory_mib: u64) -> N {
    node()
        .label(LABEL_COUNT, &count.to_string())
        .label(LABEL_MODEL, model)
        .label(LABEL_MEMORY, &memory_mib.to_string())
}

/// A node with GPU Feature Discovery labels and allocatable GPUs.
fn gfd_node(count: u32, product: &str, memory_mib: u64) -> N {
    node()
        .label(GFD_COUNT, &count.to_string())
        .label(GFD_PRODUCT, product)
        .label(GFD_MEMORY, &memory_mib.to_string())
        .alloc(count as i64)
}

impl N {
    fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.retain(|(key, _)| key != k);
        self.labels.push((k.into(), v.into()));
        self
    }
    fn ann(mut self, k: &str, v: &str) -> Self {
        self.annotations.retain(|(key, _)| key != k);
        self.annotations.push((k.into(), v.into()));
        self
    }
    fn alloc(mut self, gpus: i64) -> Self {
        self.allocatable.push(ResourceAmount {
            name: GPU_RESOURCE.into(),
            amount: gpus,
        });
        self
    }
    fn metric(mut self, k: &str, v: f64) -> Self {
        self.metrics.push((k.into(), v));
        self
    }
    fn util(self, v: &str) -> Self {
        self.ann(ANN_UTILIZATION, v)
    }
    fn topo(self, v: &str) -> Self {
        self.ann(ANN_TOPOLOGY, v)
    }
    fn build(self, name: &str) -> Node {
        let mut allocatable = vec![
            ResourceAmount {
                name: "cpu".into(),
                amount: 64_000,
            },
            ResourceAmount {
                name: "memory".into(),
                amount: 512 << 30,
            },
        ];
        allocatable.extend(self.allocatable);
        Node {
            name: name.into(),
            labels: sorted(self.labels),
            annotations: sorted(self.annotations),
            allocatable,
            taints: vec![],
            unschedulable: false,
            metrics: self.metrics,
        }
    }
}

#[derive(Clone)]
struct P {
    name: String,
    gpus: i64,
    annotations: Vec<(String, String)>,
    created: i64,
}

fn pod(name: &str) -> P {
    P {
        name: name.into(),
        gpus: 0,
        annotations: vec![],
        created: 0,
    }
}

/// A pod asking for `n` whole GPUs.
fn gpu_pod(name: &str, n: i64) -> P {
    pod(name).gpu(n)
}

impl P {
    fn gpu(mut self, n: i64) -> Self {
        self.gpus = n;
        self
    }
    fn ann(mut self, k: &str, v: &str) -> Self {
        self.annotations.retain(|(key, _)| key != k);
        self.annotations.push((k.into(), v.into()));
        self
    }
    fn model(self, m: &str) -> Self {
        self.ann(ANN_MODEL, m)
    }
    fn mem(self, mib: &str) -> Self {
        self.ann(ANN_MEMORY, mib)
    }
    fn policy(self, p: &str) -> Self {
        self.ann(ANN_POLICY, p)
    }
    fn assigned(self, v: &str) -> Self {
        self.ann(ANN_ASSIGNED, v)
    }
    fn created(mut self, t: i64) -> Self {
        self.created = t;
        self
    }
    fn build(&self) -> Pod {
        let mut requests = vec![ResourceAmount {
            name: "cpu".into(),
            amount: 1000,
        }];
        let mut limits = vec![];
        if self.gpus != 0 {
            // The API server defaults an extended resource's request from
            // its limit; the host passes both.
            requests.push(ResourceAmount {
                name: GPU_RESOURCE.into(),
                amount: self.gpus,
            });
            limits.push(ResourceAmount {
                name: GPU_RESOURCE.into(),
                amount: self.gpus,
            });
        }
        Pod {
            uid: format!("uid-{}", self.name),
            namespace: "default".into(),
            name: self.name.clone(),
            labels: vec![],
            annotations: sorted(self.annotations.clone()),
            requests,
            limits,
            tolerations: vec![],
            priority: 0,
            creation_timestamp_ms: self.created,
            owner: None,
            node_name: None,
        }
    }
}

/// What the plugin says of one node for a pod: a score, or a rejection.
type Verdict = Result<i64, (String, bool)>;

fn ok(score: i64) -> Verdict {
    Ok(score)
}
fn no(reason: &str, unresolvable: bool) -> Verdict {
    Err((reason.to_string(), unresolvable))
}

/// The plugin instance of this test thread, plus a mirror of its cluster
/// (for `choose_gpus`, which takes a `NodeState`).
struct Env {
    nodes: u32,
    mirror: Cluster,
}

impl Env {
    fn new(args: &str, nodes: Vec<N>) -> Env {
        runtime::init::<GpuTopology>(args).expect("init");
        let mut env = Env {
            nodes: 0,
            mirror: Cluster::default(),
        };
        for n in nodes {
            env.add_node(n);
        }
        env
    }

    fn apply(&mut self, d: Delta) {
        self.mirror.apply(d.clone());
        runtime::apply::<GpuTopology>(vec![d]);
    }

    fn add_node(&mut self, n: N) -> u32 {
        let i = self.nodes;
        self.nodes += 1;
        self.apply(Delta::NodeSet((i, n.build(&format!("node-{i}")))));
        i
    }

    fn place(&mut self, node: u32, p: P) {
        let mut pod = p.build();
        pod.node_name = Some(format!("node-{node}"));
        self.apply(Delta::PodAdd(Bind { node, pod }));
    }

    fn all(&self) -> Vec<u32> {
        (0..self.nodes).collect()
    }

    /// Filter on every node, then Score on the feasible ones.
    fn eval(&self, p: &P) -> Vec<Verdict> {
        runtime::cycle_start::<GpuTopology>(p.build()).expect("cycle_start");
        let nodes = self.all();
        let verdicts = runtime::filter::<GpuTopology>(&nodes);
        let feasible: Vec<u32> = nodes
            .iter()
            .copied()
            .filter(|&i| verdicts[i as usize].is_none())
            .collect();
        let scores = runtime::score::<GpuTopology>(&feasible).expect("score");
        for s in &scores {
            assert!((0..=100).contains(s), "score {s} out of range");
        }
        let mut scores = scores.into_iter();
        verdicts
            .into_iter()
            .map(|v| match v {
                None => Ok(scores.next().unwrap()),
                Some(r) => Err((r.reason, r.unresolvable)),
            })
            .collect()
    }

    fn eval1(&self, p: &P) -> Verdict {
        assert_eq!(self.nodes, 1);
        self.eval(p).remove(0)
    }

    fn cycle_error(&self, p: &P) -> String {
        runtime::cycle_start::<GpuTopology>(p.build()).expect_err("cycle_start should fail")
    }

    fn choose(&self, node: u32, p: &P) -> Option<Vec<u32>> {
        choose_gpus(self.mirror.node(node).unwrap(), &p.build())
    }
}

/// One node, fresh plugin, one pod.
fn one(args: &str, n: N, p: P) -> Verdict {
    Env::new(args, vec![n]).eval1(&p)
}

const ORIGIN: &str = r#"{"policy": "origin"}"#;

// ---- the origin design --------------------------------------------------

#[test]
fn origin_filter_messages_are_reproduced() {
    type Row = (&'static str, N, P, Result<(), (&'static str, bool)>);
    let a100 = || origin_node(4, "A100", 40960);
    #[rustfmt::skip]
    let table: Vec<Row> = vec![
        ("no GPU request passes anywhere", node(), pod("p"), Ok(())),
        ("no GPU request ignores the model", a100(), pod("p").model("V100"), Ok(())),
        ("fits", a100(), gpu_pod("p", 4).model("A100").mem("40960"), Ok(())),
        ("fewer GPUs than requested", a100(), gpu_pod("p", 8), Err((NOT_ENOUGH_GPUS, true))),
        ("no GPU node", node(), gpu_pod("p", 1), Err((NOT_ENOUGH_GPUS, true))),
        ("model mismatch", a100(), gpu_pod("p", 1).model("V100"), Err((MODEL_MISMATCH, true))),
        ("model asked, node has none", node().label(LABEL_COUNT, "4"), gpu_pod("p", 1).model("A100"), Err((MODEL_MISMATCH, true))),
        ("memory larger than the node's", a100(), gpu_pod("p", 1).mem("40961"), Err((NOT_ENOUGH_MEMORY, true))),
        ("memory asked, node has none", node().label(LABEL_COUNT, "4"), gpu_pod("p", 1).mem("1"), Err((NOT_ENOUGH_MEMORY, true))),
        // Origin order: count, then model, then memory.
        ("count before model", a100(), gpu_pod("p", 8).model("V100"), Err((NOT_ENOUGH_GPUS, true))),
        ("model before memory", a100(), gpu_pod("p", 1).model("V100").mem("99999"), Err((MODEL_MISMATCH, true))),
    ];
    for (what, n, p, want) in table {
        let got = one("{}", n, p).map(|_| ());
        let want = want.map_err(|(r, u)| (r.to_string(), u));
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn origin_scores_are_reproduced() {
    // (GPUs, request, utilization annotation, fit, util, final)
    #[rustfmt::skip]
    let table = [
        (8, 2, "0.25", 40, 75, 50),
        (2, 2, "0", 100, 100, 100),
        (4, 1, "0.5", 70, 50, 64),
        (3, 2, "35%", 90, 65, 82),
        (8, 8, "1", 100, 0, 70),
        (16, 1, "0.1", 0, 90, 27),
        (20, 1, "100%", 0, 0, 0),
    ];
    for (gpus, req, util, fit, util_score, want) in table {
        assert_eq!(
            (fit * 7 + util_score * 3) / 10,
            want,
            "table row is self-consistent"
        );
        let got = one(
            ORIGIN,
            origin_node(gpus, "A100", 40960).util(util),
            gpu_pod("p", req),
        );
        assert_eq!(
            got,
            ok(want),
            "{gpus} GPUs, request {req}, utilization {util}"
        );
    }
    // No GPU request: 0 everywhere with the origin's behaviour for such
    // pods; 0 on an untouched GPU node with the default too.
    let origin_cpu = r#"{"policy": "origin", "cpuPodsAvoidGpuNodes": false}"#;
    assert_eq!(
        one(origin_cpu, origin_node(8, "A100", 40960), pod("p")),
        ok(0)
    );
    assert_eq!(one(origin_cpu, node(), pod("p")), ok(0));
    assert_eq!(one(ORIGIN, origin_node(8, "A100", 40960), pod("p")), ok(0));
}

#[test]
fn free_gpus_not_the_count_label_decide() {
    // The origin compared the count label with the request: a node whose
    // GPUs are all taken still passed. Here it is filtered out.
    let mut env = Env::new(ORIGIN, vec![origin_node(8, "A100", 40960).util("0.25")]);
    env.place(0, gpu_pod("a", 6));
    // 2 free: a 2-GPU pod fits exactly (fit 100), a 3-GPU pod does not.
    assert_eq!(env.eval1(&gpu_pod("p", 2)), ok((100 * 7 + 75 * 3) / 10));
    assert_eq!(env.eval1(&gpu_pod("p", 3)), no(NOT_ENOUGH_FREE_GPUS, false));
    env.place(0, gpu_pod("b", 2));
    // Full: resolvable (evicting pods would help), unlike a node that is
    // too small whatever runs on it; the reasons say which.
    assert_eq!(env.eval1(&gpu_pod("p", 1)), no(NOT_ENOUGH_FREE_GPUS, false));
    assert_eq!(env.eval1(&gpu_pod("p", 9)), no(NOT_ENOUGH_GPUS, true));
    // A full node of the wrong model reports the model, which no eviction
    // fixes (so preemption does not try it).
    assert_eq!(
        env.eval1(&gpu_pod("p", 1).model("H100")),
        no(MODEL_MISMATCH, true)
    );
    // The pod's limit counts (nvidia.com/gpu is set as a limit).
    let mut limit_only = gpu_pod("p", 1).build();
    limit_only.requests.retain(|r| r.name != GPU_RESOURCE);
    let t = GpuTopology::new(Config::default());
    assert_eq!(t.demand(&limit_only).unwrap().unwrap().whole, 1);
}

#[test]
fn capacity_from_labels_and_allocatable() {
    // Allocatable alone.
    assert_eq!(
        one(ORIGIN, node().alloc(4).util("0"), gpu_pod("p", 4)),
        ok(100)
    );
    // The count label is capped by allocatable (a GPU the device plugin
    // does not offer cannot be used).
    assert_eq!(
        one(
            "{}",
            node().label(LABEL_COUNT, "8").alloc(6),
            gpu_pod("p", 7)
        ),
        no(NOT_ENOUGH_GPUS, true)
    );
    // Allocatable 0 (device plugin down) means no GPUs.
    assert_eq!(
        one(
            "{}",
            node().label(LABEL_COUNT, "8").alloc(0),
            gpu_pod("p", 1)
        ),
        no(NOT_ENOUGH_GPUS, true)
    );
    // Origin labels win over GFD labels.
    let both = gfd_node(8, "NVIDIA-H100-80GB-HBM3", 81559)
        .label(LABEL_MODEL, "A100")
        .label(LABEL_MEMORY, "40960");
    assert!(one(
        "{}",
        both.clone(),
        gpu_pod("p", 1).model("A100").mem("40960")
    )
    .is_ok());
    assert_eq!(
        one("{}", both, gpu_pod("p", 1).model("H100")),
        no(MODEL_MISMATCH, true)
    );
}

// ---- GPU Feature Discovery and model matching ---------------------------

#[test]
fn gfd_labels_and_model_matching() {
    let sxm = || gfd_node(8, "NVIDIA-A100-SXM4-40GB", 40960);
    #[rustfmt::skip]
    let table: Vec<(&str, &str, N, &str, bool)> = vec![
        ("{}", "short name as a token", sxm(), "A100", true),
        ("{}", "case-insensitive", sxm(), "a100", true),
        ("{}", "the full product name", sxm(), "nvidia-a100-sxm4-40gb", true),
        ("{}", "several tokens", sxm(), "A100-40GB", true),
        ("{}", "tokens in any order", sxm(), "40GB-A100", true),
        ("{}", "a prefix is not a token", sxm(), "A10", false),
        ("{}", "another model", sxm(), "H100", false),
        ("{}", "one token missing", sxm(), "A100-80GB", false),
        ("{}", "T4", gfd_node(1, "Tesla-T4", 15360), "T4", true),
        ("{}", "V100", gfd_node(8, "Tesla-V100-SXM2-16GB", 16160), "V100", true),
        ("{}", "H100", gfd_node(8, "NVIDIA-H100-80GB-HBM3", 81559), "H100", true),
        ("{}", "origin short label, long pod model", origin_node(8, "A100", 40960), "NVIDIA-A100-SXM4-40GB", false),
        (r#"{"modelMatching": "exact"}"#, "exact: token does not match", sxm(), "A100", false),
        (r#"{"modelMatching": "exact"}"#, "exact: case-insensitive equality", sxm(), "NVIDIA-A100-SXM4-40GB", true),
        // An alias replaces the token rule for that model name.
        (r#"{"modelAliases": {"a100-80g": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"]}}"#,
            "alias hit", gfd_node(8, "NVIDIA-A100-80GB-PCIe", 81920), "A100-80G", true),
        (r#"{"modelAliases": {"a100-80g": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"]}}"#,
            "alias miss", sxm(), "A100-80G", false),
        (r#"{"modelAliases": {"A100": ["NVIDIA-A100-PCIE-40GB"]}}"#, "alias narrows a token match", sxm(), "A100", false),
        (r#"{"modelAliases": {"A100": ["NVIDIA-A100-PCIE-40GB"]}}"#, "other models keep tokens", gfd_node(8, "NVIDIA-H100-80GB-HBM3", 81559), "H100", true),
        (r#"{"modelAliases": {"fast": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"]}}"#, "alias as a class", sxm(), "fast", true),
    ];
    for (args, what, n, model, fits) in table {
        let got = one(args, n, gpu_pod("p", 1).model(model));
        if fits {
            assert!(got.is_ok(), "{what}: {got:?}");
        } else {
            assert_eq!(got, no(MODEL_MISMATCH, true), "{what}");
        }
    }
    // GFD memory label.
    assert_eq!(
        one("{}", sxm(), gpu_pod("p", 1).mem("40961")),
        no(NOT_ENOUGH_MEMORY, true)
    );
    assert!(one("{}", sxm(), gpu_pod("p", 8).mem("40960")).is_ok());
}

// ---- utilization --------------------------------------------------------

#[test]
fn utilization_sources() {
    // Score = 100 - utilization% when only utilization counts.
    const UTIL_ONLY: &str = r#"{"fitWeight": 0, "utilizationWeight": 1}"#;
    let n = || origin_node(8, "A100", 40960);
    #[rustfmt::skip]
    let table: Vec<(&str, &str, N, i64)> = vec![
        (UTIL_ONLY, "fraction annotation", n().util("0.35"), 65),
        (UTIL_ONLY, "percent annotation", n().util("35%"), 65),
        (UTIL_ONLY, "percent with decimals, rounded", n().util("34.6%"), 65),
        (UTIL_ONLY, "fraction rounded to a percent", n().util("0.354"), 65),
        (UTIL_ONLY, "idle", n().util("0"), 100),
        (UTIL_ONLY, "busy", n().util("1"), 0),
        (UTIL_ONLY, "metric (percent)", n().metric(METRIC_UTILIZATION, 20.4), 80),
        (UTIL_ONLY, "metric clamped", n().metric(METRIC_UTILIZATION, 130.0), 0),
        (UTIL_ONLY, "non-finite metric is unknown", n().metric(METRIC_UTILIZATION, f64::NAN), 50),
        (UTIL_ONLY, "annotation wins over metric", n().util("0.9").metric(METRIC_UTILIZATION, 20.0), 10),
        (UTIL_ONLY, "unknown counts as 50%", n(), 50),
        (r#"{"fitWeight": 0, "utilizationWeight": 1, "unknownUtilization": 0.8}"#, "configured unknown", n(), 20),
        (r#"{"fitWeight": 0, "utilizationWeight": 1, "unknownUtilization": 0}"#, "optimistic unknown", n(), 100),
        (r#"{"fitWeight": 0, "utilizationWeight": 1, "utilizationAnnotation": "example.com/gpu-busy"}"#,
            "configured annotation", n().util("0.9").ann("example.com/gpu-busy", "40%"), 60),
        (r#"{"fitWeight": 0, "utilizationWeight": 1, "utilizationMetric": "gpu_busy"}"#,
            "configured metric", n().metric(METRIC_UTILIZATION, 90.0).metric("gpu_busy", 30.0), 70),
    ];
    for (args, what, n, want) in table {
        assert_eq!(one(args, n, gpu_pod("p", 1)), ok(want), "{what}");
    }
}

#[test]
fn doc_examples() {
    // docs/gpu-topology.md, Score examples not covered elsewhere.
    let n = || origin_node(8, "A100", 40960).util("0.25");
    assert_eq!(one(ORIGIN, n(), gpu_pod("p", 2)), ok(50));
    assert_eq!(one("{}", n(), gpu_pod("p", 2)), ok(47));
}

#[test]
fn weights_are_configurable() {
    // 8 GPUs free, request 2, 25% busy: fit 40, util 75 (origin policy).
    let n = || origin_node(8, "A100", 40960).util("0.25");
    let args = |f: u32, u: u32| {
        format!(r#"{{"policy": "origin", "fitWeight": {f}, "utilizationWeight": {u}}}"#)
    };
    assert_eq!(one(&args(7, 3), n(), gpu_pod("p", 2)), ok(50));
    assert_eq!(one(&args(1, 0), n(), gpu_pod("p", 2)), ok(40));
    assert_eq!(one(&args(1, 1), n(), gpu_pod("p", 2)), ok(57));
    assert_eq!(one(&args(1000, 1000), n(), gpu_pod("p", 2)), ok(57));
}

// ---- binpack, spread, per-pod policy ------------------------------------

/// Four nodes, utilization unknown (50%): A untouched 8 GPUs, B 8 GPUs with
/// 4 used, C 8 GPUs with 7 used, D untouched 4 GPUs.
fn packing_env(args: &str) -> Env {
    let n = || origin_node(8, "A100", 40960);
    let mut env = Env::new(args, vec![n(), n(), n(), origin_node(4, "A100", 40960)]);
    env.place(1, gpu_pod("b", 4));
    env.place(2, gpu_pod("c", 7));
    env
}

#[test]
fn binpack_fills_partly_used_nodes_first() {
    let env = packing_env("{}");
    // fit = 100 - 10*left - 5*untouched; final = (fit*7 + 50*3)/10.
    // A: left 7, untouched -> 25 -> 32. B: left 3 -> 70 -> 64.
    // C: left 0 -> 100 -> 85. D: left 3, untouched -> 65 -> 60.
    assert_eq!(
        env.eval(&gpu_pod("p", 1)),
        vec![ok(32), ok(64), ok(85), ok(60)]
    );
    // B and D leave 3 GPUs each; the tie goes to the partly used B, so
    // the untouched D stays whole for a 4-GPU job.
    // A 4-GPU pod: C cannot hold it; B fits exactly (left 0: 100); D too
    // but is untouched (95); A leaves 4 and is untouched (55).
    assert_eq!(
        env.eval(&gpu_pod("p", 4)),
        vec![ok(53), ok(85), no(NOT_ENOUGH_FREE_GPUS, false), ok(81)]
    );
}

#[test]
fn spread_prefers_empty_nodes() {
    let env = packing_env(r#"{"policy": "spread"}"#);
    // fit = 10*left + 5*untouched.
    // A: 75 -> 67. B: 30 -> 36. C: 0 -> 15. D: 35 -> 39.
    assert_eq!(
        env.eval(&gpu_pod("p", 1)),
        vec![ok(67), ok(36), ok(15), ok(39)]
    );
}

#[test]
fn origin_policy_on_free_gpus() {
    let env = packing_env(ORIGIN);
    // fit = 100 - 10*|free - req|: A 30, B 70, C 100, D 70.
    assert_eq!(
        env.eval(&gpu_pod("p", 1)),
        vec![ok(36), ok(64), ok(85), ok(64)]
    );
}

#[test]
fn policy_annotation_overrides_args() {
    let env = packing_env("{}");
    assert_eq!(
        env.eval(&gpu_pod("p", 1).policy("spread")),
        vec![ok(67), ok(36), ok(15), ok(39)]
    );
    assert_eq!(
        env.eval(&gpu_pod("p", 1).policy("origin")),
        vec![ok(36), ok(64), ok(85), ok(64)]
    );
    let env = packing_env(r#"{"policy": "spread"}"#);
    assert_eq!(
        env.eval(&gpu_pod("p", 1).policy("binpack")),
        vec![ok(32), ok(64), ok(85), ok(60)]
    );
}

#[test]
fn utilization_can_outweigh_packing() {
    // Two partly used nodes; one more GPU of packing is worth 7 points,
    // 30 points of utilization are worth 9.
    let mut env = Env::new(
        "{}",
        vec![
            origin_node(8, "A100", 40960).util("0.9"),
            origin_node(8, "A100", 40960).util("0.6"),
        ],
    );
    env.place(0, gpu_pod("a", 4));
    env.place(1, gpu_pod("b", 3));
    // Node 0: left 3 -> fit 70 -> (490+30)/10 = 52. Node 1: left 4 -> 60 -> (420+120)/10 = 54.
    assert_eq!(env.eval(&gpu_pod("p", 1)), vec![ok(52), ok(54)]);
}

// ---- topology -----------------------------------------------------------

#[test]
fn topology_prefers_one_nvlink_domain() {
    let n = || origin_node(8, "H100", 81920).topo("0,1,2,3;4,5,6,7");
    let mut env = Env::new("{}", vec![n(), n(), origin_node(8, "H100", 81920)]);
    // Node 0: 0,1 and 4,5 taken -> 2 free in each domain.
    env.place(0, gpu_pod("a", 2).assigned("0,1"));
    env.place(0, gpu_pod("b", 2).assigned("4,5"));
    // Node 1: 0-3 taken (no annotation: lowest free indices) -> domain 2 free.
    env.place(1, gpu_pod("c", 4));
    // Node 2: no topology annotation, 4 taken.
    env.place(2, gpu_pod("d", 4));
    // All have 4 free: fit 100 (binpack, partly used); final 85. Node 0
    // would span two domains: -20.
    assert_eq!(env.eval(&gpu_pod("p", 4)), vec![ok(65), ok(85), ok(85)]);
    assert_eq!(env.choose(0, &gpu_pod("p", 4)), Some(vec![2, 3, 6, 7]));
    assert_eq!(env.choose(1, &gpu_pod("p", 4)), Some(vec![4, 5, 6, 7]));
    assert_eq!(env.choose(2, &gpu_pod("p", 4)), Some(vec![4, 5, 6, 7]));
    // Two GPUs fit in one domain everywhere: no penalty.
    assert_eq!(env.eval(&gpu_pod("p", 2)), vec![ok(71), ok(71), ok(71)]);
    // An 8-GPU pod on an empty node spans both domains, the fewest
    // possible: no penalty.
    let env = Env::new("{}", vec![n()]);
    assert_eq!(env.eval1(&gpu_pod("p", 8)), ok((95 * 7 + 50 * 3) / 10));
    // The penalty is configurable.
    let mut env = Env::new(r#"{"topologyPenalty": 50}"#, vec![n()]);
    env.place(0, gpu_pod("a", 2).assigned("0,1"));
    env.place(0, gpu_pod("b", 2).assigned("4,5"));
    assert_eq!(env.eval1(&gpu_pod("p", 4)), ok(35));
}

#[test]
fn choose_gpus_packs_domains() {
    let n = origin_node(8, "H100", 81920).topo("0,1,2,3;4,5,6,7");
    let mut env = Env::new("{}", vec![n]);
    env.place(0, gpu_pod("a", 2).assigned("0,1"));
    // Domain 0 has 2 free, domain 1 has 4: a 2-GPU pod fills domain 0,
    // keeping domain 1 whole; a 1-GPU pod too.
    assert_eq!(env.choose(0, &gpu_pod("p", 2)), Some(vec![2, 3]));
    assert_eq!(env.choose(0, &gpu_pod("p", 1)), Some(vec![2]));
    // A 3-GPU pod fits only domain 1.
    assert_eq!(env.choose(0, &gpu_pod("p", 3)), Some(vec![4, 5, 6]));
    // 5 GPUs: all of domain 1, then the rest from domain 0.
    assert_eq!(env.choose(0, &gpu_pod("p", 5)), Some(vec![2, 4, 5, 6, 7]));
    assert_eq!(env.choose(0, &gpu_pod("p", 7)), None);
    assert_eq!(env.choose(0, &pod("p")), Some(vec![]));
    assert_eq!(env.choose(0, &gpu_pod("p", 1).mem("abc")), None);
}

#[test]
fn topology_annotation_details() {
    // Indices the annotation does not list are domains of their own;
    // indices beyond the GPU count are ignored.
    let n = origin_node(4, "A100", 40960).topo("0,1;2,9");
    let env = Env::new("{}", vec![n]);
    assert_eq!(env.choose(0, &gpu_pod("p", 2)), Some(vec![0, 1]));
    // {0,1}, {2}, {3}: 3 GPUs need 2 domains at best, so no penalty:
    // left 1 on an untouched node -> fit 85.
    assert_eq!(env.eval1(&gpu_pod("p", 3)), ok((85 * 7 + 50 * 3) / 10));
    assert_eq!(env.choose(0, &gpu_pod("p", 3)), Some(vec![0, 1, 2]));
    // Spaces are allowed around indices.
    assert!(one(
        "{}",
        origin_node(4, "A100", 40960).topo(" 0, 1 ; 2,3 "),
        gpu_pod("p", 1)
    )
    .is_ok());
}

#[test]
fn assigned_gpus_of_placed_pods() {
    let mut env = Env::new("{}", vec![origin_node(4, "A100", 40960)]);
    // Older pods without the annotation take the lowest free indices after
    // pods with it are placed.
    env.place(0, gpu_pod("late", 1).created(20));
    env.place(0, gpu_pod("pinned", 1).assigned("0").created(30));
    env.place(0, gpu_pod("early", 1).created(10));
    assert_eq!(env.choose(0, &gpu_pod("p", 1)), Some(vec![3]));
    // A pending pod's own annotation is ignored (it belongs to an earlier
    // attempt); the choice is made afresh.
    assert_eq!(env.choose(0, &gpu_pod("p", 1).assigned("0")), Some(vec![3]));
}

// ---- fractional sharing -------------------------------------------------

#[test]
fn fractional_sharing_by_memory() {
    let mut env = Env::new("{}", vec![origin_node(2, "T4", 16384).util("0")]);
    let share = |name: &str, mib: &str| pod(name).mem(mib);
    // Opens GPU 0: left 1 clean GPU, opens a GPU -> fit 85 -> (595+300)/10.
    assert_eq!(env.eval1(&share("s1", "8192")), ok(89));
    assert_eq!(env.choose(0, &share("s1", "8192")), Some(vec![0]));
    env.place(0, share("s1", "8192"));
    // Joins GPU 0 (best fit): left 1, joins -> fit 90 -> 93.
    assert_eq!(env.eval1(&share("s2", "8192")), ok(93));
    assert_eq!(env.choose(0, &share("s2", "8192")), Some(vec![0]));
    // Too big for what GPU 0 has left: opens GPU 1.
    assert_eq!(env.choose(0, &share("s3", "10000")), Some(vec![1]));
    // Bigger than a GPU: no eviction helps.
    assert_eq!(
        env.eval1(&share("s4", "16385")),
        no(NOT_ENOUGH_MEMORY, true)
    );
    // Whole GPUs: only GPU 1 is still whole.
    assert_eq!(env.eval1(&gpu_pod("w", 2)), no(NOT_ENOUGH_FREE_GPUS, false));
    assert!(env.eval1(&gpu_pod("w", 1)).is_ok());
    env.place(0, share("s2", "8192"));
    env.place(0, gpu_pod("w", 1));
    // GPU 0 full by memory, GPU 1 whole: nothing left for sharing.
    assert_eq!(
        env.eval1(&share("s5", "1")),
        no(NOT_ENOUGH_FREE_MEMORY, false)
    );
    // Model annotation applies to sharing pods too.
    assert_eq!(
        env.eval1(&share("s6", "1").model("A100")),
        no(MODEL_MISMATCH, true)
    );
}

#[test]
fn fractional_binpack_joins_shared_gpus() {
    let mut env = Env::new(
        "{}",
        vec![origin_node(2, "T4", 16384), origin_node(2, "T4", 16384)],
    );
    env.place(0, pod("s").mem("4096").assigned("1"));
    // Node 0: joins GPU 1 (left 1 whole: 90); node 1: opens a GPU (85).
    assert_eq!(env.eval(&pod("p").mem("4096")), vec![ok(78), ok(74)]);
    assert_eq!(env.choose(0, &pod("p").mem("4096")), Some(vec![1]));
    // Spread: 10 vs 15 -> opens a fresh GPU on the other node.
    assert_eq!(
        env.eval(&pod("p").mem("4096").policy("spread")),
        vec![ok(22), ok(25)]
    );
    // A shared GPU is not free for whole-GPU pods.
    // Node 1: left 0, untouched -> 95.
    assert_eq!(
        env.eval(&gpu_pod("w", 2)),
        vec![no(NOT_ENOUGH_FREE_GPUS, false), ok(81)]
    );
    assert_eq!(env.choose(0, &gpu_pod("w", 1)), Some(vec![0]));
}

#[test]
fn fractional_sharing_with_topology_opens_the_fullest_domain() {
    let mut env = Env::new(
        "{}",
        vec![origin_node(8, "A100", 40960).topo("0,1,2,3;4,5,6,7")],
    );
    env.place(0, gpu_pod("a", 3).assigned("4,5,6"));
    assert_eq!(env.choose(0, &pod("p").mem("1024")), Some(vec![7]));
}

#[test]
fn fractional_sharing_can_be_disabled() {
    let mut env = Env::new(
        r#"{"fractional": false}"#,
        vec![node(), origin_node(1, "T4", 16384)],
    );
    // A memory-only pod asks for no GPU: it passes everywhere and is
    // scored as a CPU pod (the GPU node is untouched: 0).
    assert_eq!(env.eval(&pod("p").mem("99999")), vec![ok(100), ok(0)]);
    let t = GpuTopology::new(Config::parse(r#"{"fractional": false}"#).unwrap());
    assert_eq!(
        t.choose_gpus(env.mirror.node(1).unwrap(), &pod("p").mem("1024").build()),
        Some(vec![])
    );
    // The default configuration shares.
    assert_eq!(env.choose(1, &pod("p").mem("1024")), Some(vec![0]));
    // Placed memory-only pods do not hold GPUs (even with a bad value).
    env.place(1, pod("s").mem("junk"));
    assert!(env.eval(&gpu_pod("w", 1))[1].is_ok());
}

// ---- pods that use no GPU -----------------------------------------------

#[test]
fn cpu_pods_prefer_nodes_without_gpus() {
    // A CPU node, an untouched 8-GPU node, 8 GPUs with 2 / 6 / 8 used, a
    // 4-GPU node with a GPU shared by memory, a node whose allocatable
    // says its GPUs are gone.
    let n8 = || origin_node(8, "A100", 40960);
    let nodes = vec![
        node(),
        n8(),
        n8(),
        n8(),
        n8(),
        origin_node(4, "T4", 16384),
        n8().alloc(0),
    ];
    let mut env = Env::new("{}", nodes.clone());
    env.place(2, gpu_pod("a", 2));
    env.place(3, gpu_pod("b", 6));
    env.place(4, gpu_pod("c", 8));
    env.place(5, pod("s").mem("1024"));
    // 100 without GPUs; else 50 * used / capacity.
    let want = vec![ok(100), ok(0), ok(12), ok(37), ok(50), ok(12), ok(100)];
    assert_eq!(env.eval(&pod("p")), want);
    // Annotations of a pod that uses no GPU do not matter (valid ones),
    // nor does the policy.
    assert_eq!(env.eval(&pod("p").model("V100").policy("spread")), want);
    let spread = Env::new(r#"{"policy": "spread"}"#, vec![node(), n8()]);
    assert_eq!(spread.eval(&pod("p")), vec![ok(100), ok(0)]);

    // Off: 0 everywhere, as in the origin (for every policy).
    for policy in ["binpack", "spread", "origin"] {
        let args = format!(r#"{{"policy": "{policy}", "cpuPodsAvoidGpuNodes": false}}"#);
        let mut env = Env::new(&args, nodes.clone());
        env.place(4, gpu_pod("c", 8));
        assert!(env.eval(&pod("p")).iter().all(|v| *v == ok(0)), "{policy}");
        // GPU pods are scored as before.
        assert!(env.eval(&gpu_pod("g", 1))[1].is_ok());
    }
}

#[test]
fn unknown_utilization_is_flagged_on_the_placement() {
    let env = Env::new(
        "{}",
        vec![
            origin_node(8, "A100", 40960),
            origin_node(8, "A100", 40960).util("0.2"),
            origin_node(8, "A100", 40960).metric(METRIC_UTILIZATION, 20.0),
        ],
    );
    let t = GpuTopology::new(Config::default());
    let d = t.demand(&gpu_pod("p", 1).build()).unwrap().unwrap();
    let known: Vec<(bool, u32)> = (0..3)
        .map(|i| {
            let p = t.place(&d, env.mirror.node(i).unwrap()).unwrap();
            (p.utilization_known, p.utilization_pct)
        })
        .collect();
    assert_eq!(known, [(false, 50), (true, 20), (true, 20)]);
    // Scoring such nodes works (it logs once per node at debug level).
    assert_eq!(env.eval(&gpu_pod("p", 1)), vec![ok(32), ok(41), ok(41)]);
    assert_eq!(env.eval(&gpu_pod("p", 1)), vec![ok(32), ok(41), ok(41)]);
    let summary = Config::parse(r#"{"unknownUtilization": 0.8}"#)
        .unwrap()
        .summary();
    assert!(summary.contains("unknownUtilization 80%"), "{summary}");
    assert!(summary.contains("cpuPodsAvoidGpuNodes true"), "{summary}");
}

// ---- bad inputs ---------------------------------------------------------

#[test]
fn bad_pod_annotations_fail_the_cycle() {
    let env = Env::new("{}", vec![origin_node(8, "A100", 40960)]);
    #[rustfmt::skip]
    let table: Vec<(P, &str)> = vec![
        (gpu_pod("p", 1).mem("abc"), r#"invalid annotation gpu.nvidia.com/memory="abc": not a non-negative integer (MiB)"#),
        (gpu_pod("p", 1).mem("-5"), r#"invalid annotation gpu.nvidia.com/memory="-5": not a non-negative integer (MiB)"#),
        (gpu_pod("p", 1).mem("16Gi"), r#"invalid annotation gpu.nvidia.com/memory="16Gi": not a non-negative integer (MiB)"#),
        (gpu_pod("p", 1).mem(""), r#"invalid annotation gpu.nvidia.com/memory="": not a non-negative integer (MiB)"#),
        (pod("p").mem("1.5"), r#"invalid annotation gpu.nvidia.com/memory="1.5": not a non-negative integer (MiB)"#),
        (gpu_pod("p", 1).model(""), r#"invalid annotation gpu.nvidia.com/model="": not a GPU model name"#),
        (gpu_pod("p", 1).model("-"), r#"invalid annotation gpu.nvidia.com/model="-": not a GPU model name"#),
        (gpu_pod("p", 1).policy("pack"), r#"invalid annotation gpu.nvidia.com/policy="pack": expected binpack, spread or origin"#),
        (gpu_pod("p", 1).policy("Binpack"), r#"invalid annotation gpu.nvidia.com/policy="Binpack": expected binpack, spread or origin"#),
        (gpu_pod("p", -1), "invalid nvidia.com/gpu amount -1: not a non-negative count"),
    ];
    for (p, want) in table {
        assert_eq!(env.cycle_error(&p), want);
    }
    // Annotations are checked even on pods that use no GPU (never a silent
    // default).
    assert!(env.cycle_error(&pod("p").policy("x")).contains(ANN_POLICY));
    assert!(env.cycle_error(&pod("p").model("")).contains(ANN_MODEL));
}

#[test]
fn bad_node_labels_reject_the_node() {
    let good = || origin_node(8, "A100", 40960);
    #[rustfmt::skip]
    let table: Vec<(N, &str)> = vec![
        (good().label(LABEL_COUNT, "abc"), "invalid node label gpu.nvidia.com/count"),
        (good().label(LABEL_COUNT, "-1"), "invalid node label gpu.nvidia.com/count"),
        (good().label(LABEL_COUNT, "100000000000"), "invalid node label gpu.nvidia.com/count"),
        (node().label(GFD_COUNT, "-2"), "invalid node label nvidia.com/gpu.count"),
        (good().label(LABEL_MEMORY, "40GB"), "invalid node label gpu.nvidia.com/memory"),
        (gfd_node(8, "NVIDIA-A100-SXM4-40GB", 40960).label(GFD_MEMORY, "x"), "invalid node label nvidia.com/gpu.memory"),
        (good().label(LABEL_MODEL, ""), "invalid node label gpu.nvidia.com/model"),
        (node().label(GFD_PRODUCT, " ").alloc(1), "invalid node label nvidia.com/gpu.product"),
        (node().alloc(100_000), "unsupported node allocatable nvidia.com/gpu"),
        (good().util("1.5"), "invalid node annotation gpu.nvidia.com/utilization"),
        (good().util("150%"), "invalid node annotation gpu.nvidia.com/utilization"),
        (good().util("-0.1"), "invalid node annotation gpu.nvidia.com/utilization"),
        (good().util("busy"), "invalid node annotation gpu.nvidia.com/utilization"),
        (good().util("NaN"), "invalid node annotation gpu.nvidia.com/utilization"),
        (good().topo("0,1;1,2"), "invalid node annotation gpu.nvidia.com/topology"),
        (good().topo("0,1;"), "invalid node annotation gpu.nvidia.com/topology"),
        (good().topo("a,b"), "invalid node annotation gpu.nvidia.com/topology"),
        (good().topo(""), "invalid node annotation gpu.nvidia.com/topology"),
    ];
    for (n, want) in table {
        assert_eq!(one("{}", n, gpu_pod("p", 1)), no(want, true), "{want}");
    }
    // A pod that uses no GPU is not rejected for the node's labels; it
    // scores such a node as an untouched GPU node.
    assert_eq!(one("{}", good().label(LABEL_COUNT, "abc"), pod("p")), ok(0));
    assert_eq!(one("{}", node().label(LABEL_COUNT, "abc"), pod("p")), ok(0));
    // A configured utilization annotation is named.
    let args = r#"{"utilizationAnnotation": "example.com/busy"}"#;
    assert_eq!(
        one(args, good().ann("example.com/busy", "x"), gpu_pod("p", 1)),
        no("invalid node annotation example.com/busy", true)
    );
}

#[test]
fn bad_annotations_on_placed_pods_reject_the_node() {
    let cases: Vec<(P, &str)> = vec![
        (
            pod("s").mem("lots"),
            "invalid annotation gpu.nvidia.com/memory on a pod placed on the node",
        ),
        (
            gpu_pod("w", 2).assigned("0,x"),
            "invalid annotation gpu.nvidia.com/assigned-gpus on a pod placed on the node",
        ),
        (
            gpu_pod("w", 2).assigned("0,0"),
            "invalid annotation gpu.nvidia.com/assigned-gpus on a pod placed on the node",
        ),
        (
            gpu_pod("w", 2).assigned("0"),
            "invalid annotation gpu.nvidia.com/assigned-gpus on a pod placed on the node",
        ),
        (
            pod("s").mem("10").assigned("0,1"),
            "invalid annotation gpu.nvidia.com/assigned-gpus on a pod placed on the node",
        ),
    ];
    for (placed, want) in cases {
        let mut env = Env::new("{}", vec![origin_node(8, "A100", 40960)]);
        env.place(0, placed);
        assert_eq!(env.eval1(&gpu_pod("p", 1)), no(want, true));
        // A pod that uses no GPU passes; the node's GPU state cannot be
        // read, so it counts as untouched.
        assert_eq!(env.eval1(&pod("p")), ok(0));
    }
    // Indices beyond the GPU count (a GPU gone from allocatable) are
    // ignored, the request still counts.
    let mut env = Env::new("{}", vec![origin_node(8, "A100", 40960).alloc(4)]);
    env.place(0, gpu_pod("w", 2).assigned("3,7"));
    assert_eq!(env.choose(0, &gpu_pod("p", 2)), Some(vec![0, 1]));
    assert_eq!(env.eval1(&gpu_pod("p", 3)), no(NOT_ENOUGH_FREE_GPUS, false));
}

#[test]
fn bad_args_fail_init_naming_the_field() {
    #[rustfmt::skip]
    let table: Vec<(&str, &str)> = vec![
        (r#"{"policy": "pack"}"#, "field `policy`: unknown variant `pack`"),
        (r#"{"polcy": "binpack"}"#, "unknown field `polcy`"),
        (r#"{"fitWeight": "7"}"#, "field `fitWeight`: invalid type"),
        (r#"{"fitWeight": -1}"#, "field `fitWeight`: invalid value"),
        (r#"{"fitWeight": 1001}"#, "field `fitWeight`: must be at most 1000"),
        (r#"{"utilizationWeight": 1, "fitWeight": 0.5}"#, "field `fitWeight`"),
        (r#"{"fitWeight": 0, "utilizationWeight": 0}"#, "field `fitWeight`: fitWeight and utilizationWeight cannot both be 0"),
        (r#"{"unknownUtilization": 50}"#, "field `unknownUtilization`: must be a fraction in 0..=1"),
        (r#"{"unknownUtilization": "50%"}"#, "field `unknownUtilization`: invalid type"),
        (r#"{"utilizationAnnotation": ""}"#, "field `utilizationAnnotation`: must not be empty"),
        (r#"{"utilizationMetric": ""}"#, "field `utilizationMetric`: must not be empty"),
        (r#"{"modelAliases": {"A100": "NVIDIA-A100"}}"#, "field `modelAliases`: invalid type"),
        (r#"{"modelAliases": {"A100": []}}"#, "field `modelAliases`: A100: needs a list"),
        (r#"{"modelAliases": {"A100": ["x"], "a100": ["y"]}}"#, "field `modelAliases`: a100: listed twice"),
        (r#"{"modelAliases": {"": ["x"]}}"#, "field `modelAliases`: a model name is empty"),
        (r#"{"modelMatching": "fuzzy"}"#, "field `modelMatching`: unknown variant `fuzzy`"),
        (r#"{"topologyPenalty": 101}"#, "field `topologyPenalty`: must be in 0..=100"),
        (r#"{"fractional": "yes"}"#, "field `fractional`: invalid type"),
        (r#"{"cpuPodsAvoidGpuNodes": 1}"#, "field `cpuPodsAvoidGpuNodes`: invalid type"),
        ("[]", "gpu-topology args: expected a JSON object"),
        ("null", "gpu-topology args: expected a JSON object"),
        ("{", "gpu-topology args: EOF"),
    ];
    for (args, want) in table {
        let err = runtime::init::<GpuTopology>(args).expect_err(args);
        assert!(err.contains(want), "{args}: {err}");
        assert!(err.starts_with("gpu-topology args: "), "{err}");
    }
    for good in [
        "",
        "{}",
        r#"{"policy": "spread", "fitWeight": 0, "utilizationWeight": 1, "unknownUtilization": 1, "topologyPenalty": 0}"#,
    ] {
        runtime::init::<GpuTopology>(good).expect(good);
    }
    let cfg = Config::parse("{}").unwrap();
    assert_eq!(
        (cfg.policy, cfg.fit_weight, cfg.utilization_weight),
        (Policy::Binpack, 7, 3)
    );
    assert_eq!(
        (
            cfg.unknown_utilization_pct,
            cfg.topology_penalty,
            cfg.fractional
        ),
        (50, 20, true)
    );
    assert!(cfg.cpu_pods_avoid_gpu_nodes);
    assert!(
        !Config::parse(r#"{"cpuPodsAvoidGpuNodes": false}"#)
            .unwrap()
            .cpu_pods_avoid_gpu_nodes
    );
}

#[test]
fn scores_stay_in_range_and_nothing_panics() {
    // Every combination of node size, usage, request, utilization,
    // topology and policy; Env::eval asserts 0..=100.
    for policy in ["binpack", "spread", "origin"] {
        for args in [
            format!(r#"{{"policy": "{policy}"}}"#),
            format!(
                r#"{{"policy": "{policy}", "fitWeight": 0, "utilizationWeight": 1000, "topologyPenalty": 100}}"#
            ),
        ] {
            for cap in [0u32, 1, 2, 3, 8, 16, 40] {
                for used in [0, cap / 2, cap] {
                    for (util, topo) in [
                        ("0", None),
                        ("100%", Some("0,1;2;3,4,5,6,7")),
                        ("0.5", Some("0;1;2;3;4;5;6;7")),
                    ] {
                        let mut n = origin_node(cap, "A100", 1000).util(util);
                        if let Some(t) = topo {
                            n = n.topo(t);
                        }
                        let mut env = Env::new(&args, vec![n]);
                        if used > 0 {
                            env.place(0, gpu_pod("u", used as i64));
                        }
                        for k in [1, 2, 4, 8, cap as i64 + 1] {
                            let v = env.eval1(&gpu_pod("p", k));
                            let fits = cap > 0 && k <= (cap - used) as i64;
                            assert_eq!(v.is_ok(), fits, "cap {cap} used {used} k {k}: {v:?}");
                        }
                        let _ = env.eval1(&pod("p").mem("500"));
                        let _ = env.eval1(&pod("p").mem("5000"));
                    }
                }
            }
        }
    }
}

// ---- fragmentation simulation -------------------------------------------

impl Env {
    /// Places `p` on the highest-scoring feasible node (lowest index on a
    /// tie), as the scheduler would with this plugin alone.
    fn place_best(&mut self, p: P) -> Option<u32> {
        let best = self
            .eval(&p)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| v.ok().map(|s| (s, std::cmp::Reverse(i))))
            .max();
        let (_, std::cmp::Reverse(i)) = best?;
        self.place(i as u32, p);
        Some(i as u32)
    }
}

/// 8 nodes x 8 GPUs; a stream of small pods (1, 2 or 4 GPUs, 40 GPUs in
/// all, from a fixed pseudo-random sequence) placed one by one, then
/// 8-GPU jobs until none fits. Returns how many 8-GPU jobs were placed.
fn fragmentation(policy: &str) -> u32 {
    let nodes = (0..8).map(|_| origin_node(8, "A100", 40960)).collect();
    let mut env = Env::new(&format!(r#"{{"policy": "{policy}"}}"#), nodes);
    let pattern = [1, 1, 2, 1, 4, 1, 2, 1, 1, 2];
    let (mut total, mut i, mut seed) = (0, 0, 7u32);
    while total < 40 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let k = pattern[(seed >> 16) as usize % pattern.len()];
        assert!(
            env.place_best(gpu_pod(&format!("small-{i}"), k)).is_some(),
            "small pod {i} must fit"
        );
        total += k;
        i += 1;
    }
    let mut jobs = 0;
    while env.place_best(gpu_pod(&format!("job-{jobs}"), 8)).is_some() {
        jobs += 1;
    }
    jobs
}

#[test]
fn binpack_leaves_room_for_large_jobs() {
    let (binpack, spread, origin) = (
        fragmentation("binpack"),
        fragmentation("spread"),
        fragmentation("origin"),
    );
    eprintln!("8x8 GPUs, 40 GPUs of small pods, 8-GPU jobs placeable: binpack {binpack}, spread {spread}, origin {origin}");
    assert!(binpack > spread, "binpack {binpack} spread {spread}");
    // 40 GPUs fill 5 nodes exactly: binpack is optimal here. The origin
    // formula on free GPUs ranks nodes like binpack on equal-sized nodes
    // (its fit is 100 - 10 * GPUs left); it only lacks the tie-break.
    assert_eq!((binpack, spread, origin), (3, 0, 3));
}

#[test]
fn binpack_tie_break_keeps_untouched_nodes_whole() {
    // An untouched 4-GPU node and an 8-GPU node with 4 used: a 1-GPU pod
    // leaves 3 free on either. Binpack takes the partly used node, so the
    // untouched one stays empty (for a cluster autoscaler to remove, or a
    // job that wants a whole node); origin's tie goes to the lower index,
    // spread prefers the untouched node.
    for (policy, chosen) in [("binpack", 1), ("origin", 0), ("spread", 0)] {
        let mut env = Env::new(
            &format!(r#"{{"policy": "{policy}"}}"#),
            vec![origin_node(4, "A100", 40960), origin_node(8, "A100", 40960)],
        );
        env.place(1, gpu_pod("a", 4));
        assert_eq!(
            env.place_best(gpu_pod("small", 1)),
            Some(chosen),
            "{policy}"
        );
    }
}

#[path = "facts_tests.rs"]
mod facts_tests;

/// DRA ranking through the SDK's kept devices: the node's device groups
/// are kept while its devices are (allocated flags still count on every
/// call) and made again when the host sends new devices.
#[test]
fn dra_ranks_with_kept_groups_follow_flags_and_new_devices() {
    use wasmsched_plugin_sdk::types::{Device, DeviceSet};
    let _env = Env::new("", vec![node()]);
    runtime::cycle_start::<GpuTopology>(pod("p").build()).expect("cycle_start");
    let gpu = |name: &str, root: &str| Device {
        driver: "gpu.example.com".into(),
        pool: "node-0".into(),
        name: name.into(),
        attributes: vec![(dra::PCIE_ROOT.into(), root.into())],
        capacity: Vec::new(),
        allocated: false,
    };
    let set = |d: &[u32]| DeviceSet {
        devices: d.to_vec(),
        requests: d.iter().map(|_| 0).collect(),
    };
    let sets = [set(&[0, 1]), set(&[0, 2]), set(&[1]), set(&[3])];
    let rank = |devices: Option<Vec<Device>>, flags: &[bool]| {
        runtime::rank_node_devices::<GpuTopology>(0, devices, flags, &[], &sets)
    };
    // What a plugin grouping the devices on every call answers.
    let fresh = |devices: &[Device], flags: &[bool]| {
        let mut devices = devices.to_vec();
        for (d, &f) in devices.iter_mut().zip(flags) {
            d.allocated = f;
        }
        dra::rank(&Config::default(), Policy::Binpack, &devices, &sets)
    };
    let a = vec![
        gpu("gpu-0", "pci0"),
        gpu("gpu-1", "pci1"),
        gpu("gpu-2", "pci0"),
        gpu("gpu-3", "pci1"),
    ];
    let none = [false; 4];
    assert_eq!(rank(Some(a.clone()), &none), [0, 100, 0, 0]);
    let flags = [false, false, true, false];
    assert_eq!(rank(None, &flags), fresh(&a, &flags));
    assert_ne!(fresh(&a, &flags), fresh(&a, &none), "the flags matter here");
    // New devices: gpu-0 and gpu-1 now share a root.
    let b = vec![
        gpu("gpu-0", "pci0"),
        gpu("gpu-1", "pci0"),
        gpu("gpu-2", "pci1"),
        gpu("gpu-3", "pci1"),
    ];
    assert_eq!(rank(Some(b.clone()), &none), fresh(&b, &none));
    assert_eq!(rank(None, &flags), fresh(&b, &flags));
    assert_ne!(fresh(&a, &none), fresh(&b, &none));
}
