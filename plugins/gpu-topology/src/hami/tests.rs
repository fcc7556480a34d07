//! The HAMi path, driven through the SDK runtime as the exported
//! functions drive it.

use wasmsched_plugin_sdk::runtime;
use wasmsched_plugin_sdk::types::{Delta, Node, Placement, Pod, Removal, ResourceAmount};
use wasmsched_shared::hami::request::CONTAINER_RESOURCES;
use wasmsched_shared::hami::*;

use crate::GpuTopology;

fn amount(name: &str, amount: i64) -> ResourceAmount {
    ResourceAmount {
        name: name.into(),
        amount,
    }
}

/// A HAMi node: `n` devices GPU-0.. of `mem` MiB, 10 vGPUs each, all on
/// NUMA node `i / 4`, in HAMi's JSON form.
fn devices(n: usize, mem: u64) -> String {
    let list: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id":"GPU-{i}","index":{i},"count":10,"devmem":{mem},"devcore":100,"type":"NVIDIA-A100","numa":{},"mode":"hami-core","health":true}}"#,
                i / 4
            )
        })
        .collect();
    format!("[{}]", list.join(","))
}

fn node(name: &str, annotations: &[(&str, &str)]) -> Node {
    let mut a: Vec<(String, String)> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    a.sort();
    Node {
        name: name.into(),
        labels: Vec::new(),
        annotations: a,
        allocatable: vec![amount("nvidia.com/gpu", 80)],
        taints: Vec::new(),
        unschedulable: false,
        metrics: Vec::new(),
    }
}

/// A pod whose containers are given as the host's per-container
/// annotation.
fn pod(name: &str, containers: &str, annotations: &[(&str, &str)]) -> Pod {
    let cs = decode_container_resources(containers).unwrap();
    let mut total = std::collections::BTreeMap::<String, i64>::new();
    for c in &cs {
        for (k, v) in &c.resources {
            *total.entry(k.clone()).or_default() += v;
        }
    }
    let mut a: Vec<(String, String)> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    a.push((CONTAINER_RESOURCES.into(), containers.into()));
    a.sort();
    Pod {
        uid: name.into(),
        namespace: "default".into(),
        name: name.into(),
        labels: Vec::new(),
        annotations: a,
        requests: total.iter().map(|(k, v)| amount(k, *v)).collect(),
        limits: total.iter().map(|(k, v)| amount(k, *v)).collect(),
        tolerations: Vec::new(),
        priority: 0,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: None,
    }
}

fn app(gpu: i64, mem: i64) -> String {
    format!("app:nvidia.com/gpu={gpu},nvidia.com/gpumem={mem}")
}

struct Env {
    nodes: u32,
}

impl Env {
    fn new(args: &str, nodes: Vec<Node>) -> Env {
        runtime::init::<GpuTopology>(args).expect("init");
        let n = nodes.len() as u32;
        let deltas = nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| Delta::NodeSet((i as u32, n)))
            .collect();
        runtime::apply::<GpuTopology>(deltas);
        Env { nodes: n }
    }

    fn place(&self, node: u32, mut p: Pod, allocated: &str) {
        p.node_name = Some(format!("node-{node}"));
        p.annotations.push((ALLOCATED.into(), allocated.into()));
        p.annotations.sort();
        runtime::apply::<GpuTopology>(vec![Delta::PodAdd(Placement { node, pod: p })]);
    }

    fn remove(&self, node: u32, uid: &str) {
        runtime::apply::<GpuTopology>(vec![Delta::PodRemove(Removal {
            node,
            pod_uid: uid.into(),
        })]);
    }

    /// Filter then Score on every node: score or (reason, unresolvable).
    fn eval(&self, p: &Pod) -> Vec<Result<i64, (String, bool)>> {
        runtime::cycle_start::<GpuTopology>(p.clone()).expect("cycle_start");
        let all: Vec<u32> = (0..self.nodes).collect();
        let verdicts = runtime::filter::<GpuTopology>(&all);
        let feasible: Vec<u32> = all
            .iter()
            .copied()
            .filter(|&i| verdicts[i as usize].is_none())
            .collect();
        let mut scores = runtime::score::<GpuTopology>(&feasible)
            .unwrap()
            .into_iter();
        verdicts
            .into_iter()
            .map(|v| match v {
                None => Ok(scores.next().unwrap()),
                Some(r) => Err((r.reason, r.unresolvable)),
            })
            .collect()
    }

    /// Reserve + PreBind on `node`: the devices string written.
    fn bind(&self, p: &Pod, node: u32) -> String {
        runtime::cycle_start::<GpuTopology>(p.clone()).expect("cycle_start");
        runtime::reserve::<GpuTopology>(node).expect("reserve");
        let patch = runtime::pre_bind::<GpuTopology>(node).expect("pre_bind");
        let get = |k: &str| {
            patch
                .annotations
                .iter()
                .find(|(a, _)| a == k)
                .map(|(_, v)| v.clone())
        };
        let devices = get(ALLOCATED).unwrap_or_default();
        assert_eq!(get(TO_ALLOCATE).unwrap_or_default(), devices);
        if !devices.is_empty() {
            let name = format!("node-{node}");
            assert_eq!(get(ASSIGNED_NODE).as_deref(), Some(name.as_str()));
            assert_eq!(patch.labels, vec![(ASSIGNED_NODE.to_string(), name)]);
        }
        devices
    }

    /// Reserve + PreBind, then the pod placed as the host's next delta
    /// shows it.
    fn schedule(&self, p: Pod, node: u32) -> String {
        let devices = self.bind(&p, node);
        self.place(node, p, &devices);
        devices
    }
}

fn hami_node(i: usize, n: usize, mem: u64) -> Node {
    node(
        &format!("node-{i}"),
        &[(REGISTER_ANNOTATION, &devices(n, mem))],
    )
}

#[test]
fn a_fraction_is_written_as_hami_reads_it() {
    let env = Env::new("{}", vec![hami_node(0, 2, 8192)]);
    let p = pod("a", &app(1, 3000), &[]);
    assert!(env.eval(&p)[0].is_ok());
    assert_eq!(env.bind(&p, 0), "GPU-0,NVIDIA,3000,0:;");
}

#[test]
fn small_requests_join_partly_used_gpus() {
    let env = Env::new("{}", vec![hami_node(0, 4, 8192)]);
    env.place(0, pod("x", &app(1, 4000), &[]), "GPU-2,NVIDIA,4000,0:;");
    // GPU-2 has 4192 MiB left: a 3000 MiB pod joins it rather than
    // opening an untouched GPU; a 5000 MiB pod cannot, and opens GPU-0.
    assert_eq!(
        env.schedule(pod("a", &app(1, 3000), &[]), 0),
        "GPU-2,NVIDIA,3000,0:;"
    );
    assert_eq!(
        env.schedule(pod("b", &app(1, 5000), &[]), 0),
        "GPU-0,NVIDIA,5000,0:;"
    );
    // HAMi's spread policy (its default) takes the least used GPU instead.
    let spread = pod("c", &app(1, 100), &[(GPU_POLICY, "spread")]);
    assert_eq!(env.bind(&spread, 0), "GPU-1,NVIDIA,100,0:;");
    let binpack = pod("d", &app(1, 100), &[(GPU_POLICY, "binpack")]);
    assert_eq!(env.bind(&binpack, 0), "GPU-2,NVIDIA,100,0:;");
}

#[test]
fn whole_gpus_percentages_and_exclusive_cores() {
    let env = Env::new("{}", vec![hami_node(0, 2, 7680)]);
    // A count alone: the whole device, exclusive (HAMi's defaults).
    let whole = pod("w", "app:nvidia.com/gpu=1", &[]);
    assert_eq!(env.schedule(whole, 0), "GPU-0,NVIDIA,7680,100:;");
    // A percentage of the registered memory.
    let pct = pod(
        "p",
        "app:nvidia.com/gpu=1,nvidia.com/gpumem-percentage=50",
        &[],
    );
    assert_eq!(env.schedule(pct, 0), "GPU-1,NVIDIA,3840,0:;");
    // Both GPUs are in use now: a full-memory pod fits nowhere.
    assert_eq!(
        env.eval(&pod("f", "app:nvidia.com/gpu=1", &[]))[0],
        Err(("Insufficient GPU memory".to_string(), false))
    );
    // gpucores 100 on a GPU already in use: HAMi's exclusive conflict.
    let env = Env::new("{}", vec![hami_node(0, 1, 8192)]);
    env.place(0, pod("s", &app(1, 10), &[]), "GPU-0,NVIDIA,10,0:;");
    let excl = pod(
        "e",
        "app:nvidia.com/gpu=1,nvidia.com/gpumem=100,nvidia.com/gpucores=100",
        &[],
    );
    assert_eq!(
        env.eval(&excl)[0],
        Err(("Exclusive GPU in use".to_string(), false))
    );
    // A core-less pod cannot join a GPU whose cores are all taken.
    let env = Env::new("{}", vec![hami_node(0, 1, 8192)]);
    env.place(0, pod("c", &app(1, 10), &[]), "GPU-0,NVIDIA,10,100:;");
    assert_eq!(
        env.eval(&pod("z", &app(1, 10), &[]))[0],
        Err(("GPU cores exhausted".to_string(), false))
    );
}

#[test]
fn init_containers_and_empty_slots() {
    let env = Env::new("{}", vec![hami_node(0, 2, 8192)]);
    let containers = "init:nvidia.com/gpu=1,nvidia.com/gpumem=6000;app:;app:nvidia.com/gpu=1,nvidia.com/gpumem=2000";
    let p = pod("i", containers, &[]);
    let devices = env.schedule(p, 0);
    assert_eq!(devices, "GPU-0,NVIDIA,6000,0:;;GPU-0,NVIDIA,2000,0:;");
    // Held: the larger of init (6000) and app (2000) on GPU-0, so 2192 MiB
    // are left there: a 2500 MiB pod goes to GPU-1.
    assert_eq!(
        env.bind(&pod("n", &app(1, 2500), &[]), 0),
        "GPU-1,NVIDIA,2500,0:;"
    );
    assert_eq!(
        env.bind(&pod("m", &app(1, 2000), &[]), 0),
        "GPU-0,NVIDIA,2000,0:;"
    );
}

#[test]
fn usage_is_rebuilt_from_placed_pods_and_never_overcommitted() {
    let env = Env::new("{}", vec![hami_node(0, 1, 8192)]);
    for i in 0..4 {
        env.schedule(pod(&format!("p{i}"), &app(1, 2048), &[]), 0);
    }
    assert_eq!(
        env.eval(&pod("full", &app(1, 1), &[]))[0],
        Err(("Insufficient GPU memory".to_string(), false))
    );
    // A fresh instance (a restart) sees the same usage from the pods.
    let env2 = Env::new("{}", vec![hami_node(0, 1, 8192)]);
    for i in 0..4 {
        env2.place(
            0,
            pod(&format!("p{i}"), &app(1, 2048), &[]),
            "GPU-0,NVIDIA,2048,0:;",
        );
    }
    assert!(env2.eval(&pod("more", &app(1, 1), &[]))[0].is_err());
    env2.remove(0, "p3");
    assert_eq!(
        env2.bind(&pod("again", &app(1, 2048), &[]), 0),
        "GPU-0,NVIDIA,2048,0:;"
    );
    // vGPU slots: count 10 per GPU.
    let env3 = Env::new("{}", vec![hami_node(0, 1, 100_000)]);
    for i in 0..10 {
        env3.schedule(pod(&format!("s{i}"), &app(1, 10), &[]), 0);
    }
    assert_eq!(
        env3.eval(&pod("s10", &app(1, 10), &[]))[0],
        Err(("GPU vGPU slots exhausted".to_string(), false))
    );
}

#[test]
fn steering_annotations_and_device_state() {
    let reg = r#"[{"id":"GPU-a","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-Tesla-T4","health":true},
                  {"id":"GPU-b","index":1,"count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","health":true},
                  {"id":"GPU-c","index":2,"count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100"}]"#;
    let n = node(
        "node-0",
        &[(REGISTER_ANNOTATION, reg), (CORDON_ANNOTATION, "GPU-b")],
    );
    let env = Env::new("{}", vec![n]);
    let t4 = pod("t", &app(1, 100), &[(USE_GPUTYPE, "t4")]);
    assert_eq!(env.bind(&t4, 0), "GPU-a,NVIDIA,100,0:;");
    let a100 = pod("a", &app(1, 100), &[(USE_GPUTYPE, "A100")]);
    // GPU-b is cordoned, GPU-c unhealthy (no `health`).
    let r = env.eval(&a100)[0].clone().unwrap_err();
    assert!(r.1, "unresolvable: {r:?}");
    let no_a = pod("n", &app(1, 100), &[(NOUSE_GPUUUID, "GPU-a")]);
    assert!(env.eval(&no_a)[0].is_err());
    let only_a = pod("o", &app(1, 100), &[(USE_GPUUUID, "GPU-a,GPU-x")]);
    assert_eq!(env.bind(&only_a, 0), "GPU-a,NVIDIA,100,0:;");
    // Two vGPUs: GPU-b is cordoned and GPU-c unhealthy.
    let two = pod("2", &app(2, 100), &[]);
    assert_eq!(env.eval(&two)[0], Err(("GPU unhealthy".to_string(), true)));
}

#[test]
fn multi_gpu_pods_take_the_best_linked_set_and_single_ones_the_least() {
    // GPU-0..3: 0-1 and 2-3 linked by NVLink (100), the rest 10.
    let mut scores = Vec::new();
    for a in 0..4 {
        let s: Vec<String> = (0..4)
            .filter(|b| *b != a)
            .map(|b| {
                let v = if a / 2 == b / 2 { 100 } else { 10 };
                format!(r#""GPU-{b}":{v}"#)
            })
            .collect();
        scores.push(format!(
            r#"{{"uuid":"GPU-{a}","score":{{{}}}}}"#,
            s.join(",")
        ));
    }
    let pairs = format!("[{}]", scores.join(","));
    let n = node(
        "node-0",
        &[
            (REGISTER_ANNOTATION, &devices(4, 8192)),
            (SCORE_ANNOTATION, &pairs),
        ],
    );
    let env = Env::new("{}", vec![n]);
    // GPU-1 busy: a 2-GPU pod takes the linked pair 2-3, not 0-2.
    env.place(0, pod("x", &app(1, 8192), &[]), "GPU-1,NVIDIA,8192,100:;");
    let two = pod("t", "app:nvidia.com/gpu=2", &[]);
    assert_eq!(
        env.bind(&two, 0),
        "GPU-2,NVIDIA,8192,100:GPU-3,NVIDIA,8192,100:;"
    );
    // One whole GPU: GPU-0, whose partner is busy, keeps 2-3 whole.
    let one = pod("o", "app:nvidia.com/gpu=1", &[]);
    assert_eq!(env.bind(&one, 0), "GPU-0,NVIDIA,8192,100:;");
}

#[test]
fn numa_bind_keeps_a_container_on_one_numa_node() {
    // 8 GPUs, NUMA 0 = GPU-0..3, NUMA 1 = GPU-4..7; three of NUMA 0 busy.
    let env = Env::new("{}", vec![hami_node(0, 8, 8192)]);
    env.place(
        0,
        pod("x", "app:nvidia.com/gpu=3", &[]),
        "GPU-0,NVIDIA,8192,100:GPU-1,NVIDIA,8192,100:GPU-2,NVIDIA,8192,100:;",
    );
    let p = pod("n", "app:nvidia.com/gpu=2", &[(NUMA_BIND, "true")]);
    let devices = env.bind(&p, 0);
    assert!(!devices.contains("GPU-3"), "{devices}");
    let wide = pod("w", "app:nvidia.com/gpu=5", &[(NUMA_BIND, "true")]);
    assert_eq!(
        env.eval(&wide)[0],
        Err(("Not enough GPUs on one NUMA node".to_string(), false))
    );
}

#[test]
fn nodes_are_packed_and_whole_nodes_kept() {
    let env = Env::new(
        "{}",
        vec![
            hami_node(0, 8, 40960),
            hami_node(1, 8, 40960),
            hami_node(2, 8, 40960),
        ],
    );
    env.place(1, pod("x", &app(1, 10000), &[]), "GPU-5,NVIDIA,10000,0:;");
    let small = pod("s", &app(1, 10000), &[]);
    let v = env.eval(&small);
    let (s0, s1, s2) = (
        v[0].clone().unwrap(),
        v[1].clone().unwrap(),
        v[2].clone().unwrap(),
    );
    assert!(s1 > s0 && s0 == s2, "binpack: {v:?}");
    let spread = pod("p", &app(1, 10000), &[(NODE_POLICY, "spread")]);
    let v = env.eval(&spread);
    assert!(
        v[0].clone().unwrap() > v[1].clone().unwrap(),
        "spread: {v:?}"
    );
}

#[test]
fn other_nodes_and_bad_annotations() {
    let plain = node("node-1", &[]);
    let bad = node("node-2", &[(REGISTER_ANNOTATION, "garbage")]);
    let legacy = node(
        "node-3",
        &[(
            REGISTER_ANNOTATION,
            "GPU-l,10,8192,100,NVIDIA-Tesla P4,0,true,0,hami-core:",
        )],
    );
    let env = Env::new("{}", vec![hami_node(0, 1, 8192), plain, bad, legacy]);
    let v = env.eval(&pod("a", &app(1, 1000), &[]));
    assert!(v[0].is_ok() && v[3].is_ok(), "{v:?}");
    assert_eq!(
        v[1],
        Err(("Node has no HAMi-shared GPUs".to_string(), true))
    );
    assert_eq!(
        v[2],
        Err((
            "invalid node annotation hami.io/node-nvidia-register".to_string(),
            true
        ))
    );
    assert_eq!(
        env.bind(&pod("a", &app(1, 1000), &[]), 3),
        "GPU-l,NVIDIA,1000,0:;"
    );
    // A pod placed with an unreadable device string: the node takes no
    // new vGPU until it leaves.
    env.place(0, pod("b", &app(1, 1000), &[]), "GPU-0,NVIDIA,lots,0:;");
    assert!(env.eval(&pod("c", &app(1, 1), &[]))[0].is_err());
    env.remove(0, "b");
    assert!(env.eval(&pod("c", &app(1, 1), &[]))[0].is_ok());
    // Malformed pod annotations are the pod's error.
    let e = runtime::cycle_start::<GpuTopology>(pod("d", &app(1, 1), &[(NODE_POLICY, "tight")]));
    assert!(e.unwrap_err().contains("hami.io/node-scheduler-policy"));
}

#[test]
fn args_and_interests() {
    runtime::init::<GpuTopology>(
        r#"{"hami": {"gpuPolicy": "spread", "nodePolicy": "spread", "defaultCores": 20}}"#,
    )
    .unwrap();
    let e = runtime::init::<GpuTopology>(r#"{"hami": {"defaultCores": 200}}"#).unwrap_err();
    assert!(e.contains("hami.defaultCores"), "{e}");
    let e = runtime::init::<GpuTopology>(r#"{"hami": {"gpuPolicy": "tight"}}"#).unwrap_err();
    assert!(e.contains("hami"), "{e}");
    runtime::init::<GpuTopology>("{}").unwrap();
    let i = runtime::interests::<GpuTopology>();
    let wasmsched_plugin_sdk::types::KeySelector::Keys(keys) = i.node_annotations else {
        panic!("node annotation keys");
    };
    assert!(keys.contains(&REGISTER_ANNOTATION.to_string()));
    let wasmsched_plugin_sdk::types::KeySelector::Keys(keys) = i.pod_annotations else {
        panic!("pod annotation keys");
    };
    assert!(
        keys.contains(&CONTAINER_RESOURCES.to_string()) && keys.contains(&ALLOCATED.to_string())
    );
}

/// DCGM's per-GPU values (node metrics `METRIC/UUID` from the host's
/// node-metrics source): of GPUs that fit equally, the idle one; then the
/// one with more free framebuffer memory; a GPU whose real free memory is
/// below the request comes last, whatever the policy prefers; without
/// metrics, the lowest index as before.
#[test]
fn live_metrics_pick_the_idle_gpu_of_equal_fit() {
    let with_metrics = |metrics: &[(&str, f64)]| {
        let mut n = hami_node(0, 4, 8192);
        n.metrics = metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        n.metrics.sort_by(|a, b| a.0.cmp(&b.0));
        n
    };
    let p = pod("a", &app(1, 3000), &[]);
    let env = Env::new("{}", vec![with_metrics(&[])]);
    assert_eq!(env.bind(&p, 0), "GPU-0,NVIDIA,3000,0:;");

    let util = "DCGM_FI_DEV_GPU_UTIL";
    let free = "DCGM_FI_DEV_FB_FREE";
    let env = Env::new(
        "{}",
        vec![with_metrics(&[
            (util, 50.0),
            ("DCGM_FI_DEV_GPU_UTIL/GPU-0", 90.0),
            ("DCGM_FI_DEV_GPU_UTIL/GPU-1", 60.0),
            ("DCGM_FI_DEV_GPU_UTIL/GPU-2", 3.0),
            ("DCGM_FI_DEV_GPU_UTIL/GPU-3", 3.0),
            ("DCGM_FI_DEV_FB_FREE/GPU-2", 7000.0),
            ("DCGM_FI_DEV_FB_FREE/GPU-3", 8000.0),
        ])],
    );
    // All four untouched (equal fit): the idle ones, then more free memory.
    assert_eq!(env.bind(&p, 0), "GPU-3,NVIDIA,3000,0:;");
    // A 2-GPU container: the two idlest.
    let two = pod("b", &app(2, 1000), &[]);
    assert_eq!(
        env.bind(&two, 0),
        "GPU-2,NVIDIA,1000,0:GPU-3,NVIDIA,1000,0:;"
    );

    // A partly used GPU still wins under fragmentation (the policy first)...
    env.place(0, pod("x", &app(1, 2000), &[]), "GPU-0,NVIDIA,2000,0:;");
    assert_eq!(env.bind(&p, 0), "GPU-0,NVIDIA,3000,0:;");
    // ...unless DCGM says it has not the memory the vGPU takes.
    let env = Env::new(
        "{}",
        vec![with_metrics(&[
            (&format!("{free}/GPU-0"), 1000.0),
            (util, 10.0),
        ])],
    );
    env.place(0, pod("x", &app(1, 2000), &[]), "GPU-0,NVIDIA,2000,0:;");
    assert_eq!(env.bind(&p, 0), "GPU-1,NVIDIA,3000,0:;");

    // New values arrive as a node change: the choice follows.
    runtime::apply::<GpuTopology>(vec![Delta::NodeSet((
        0,
        with_metrics(&[
            ("DCGM_FI_DEV_GPU_UTIL/GPU-1", 99.0),
            ("DCGM_FI_DEV_GPU_UTIL/GPU-2", 1.0),
        ]),
    ))]);
    assert_eq!(env.bind(&p, 0), "GPU-0,NVIDIA,3000,0:;");
}
