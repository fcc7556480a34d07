//! What Reserve + PreBind output cost per call, with the built-in
//! GpuTopology on HAMi nodes (the numbers in docs/gpu-sharing.md):
//!
//!     cargo run --release --example prebind_cost
//!
//! 1000 HAMi nodes with 8 GPUs each, a few fractional pods placed on each;
//! one fractional pod's cycle (`cycle-start`, `filter` on every node), then
//! `reserve` + `pre-bind` on one node, which the host makes as one step
//! (`Instance::reserve`); compared with one `filter` call on one node, and
//! with the `apply` of the placed pod that every instance then receives.

use std::time::Instant;

use wasmsched::wasm::bindings::types as wit;
use wasmsched::wasm::instance::{Instance, Limits};
use wasmsched::wasm::PluginModule;

const NODES: u32 = 1000;

fn amount(name: &str, amount: i64) -> wit::ResourceAmount {
    wit::ResourceAmount {
        name: name.into(),
        amount,
    }
}

fn node(i: u32) -> wit::Node {
    let devices: Vec<String> = (0..8)
        .map(|g| {
            format!(
                r#"{{"id":"GPU-{i}-{g}","index":{g},"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","numa":{},"mode":"hami-core","health":true}}"#,
                g / 4
            )
        })
        .collect();
    wit::Node {
        name: format!("gpu-{i:05}"),
        labels: vec![],
        annotations: vec![(
            "hami.io/node-nvidia-register".into(),
            format!("[{}]", devices.join(",")),
        )],
        allocatable: vec![amount("nvidia.com/gpu", 80)],
        taints: vec![],
        unschedulable: false,
        metrics: vec![],
    }
}

fn pod(i: u32, allocated: Option<String>) -> wit::Pod {
    let mut annotations = vec![(
        "wasmsched.io/container-resources".to_string(),
        "app:nvidia.com/gpu=1,nvidia.com/gpucores=20,nvidia.com/gpumem=4096".to_string(),
    )];
    if let Some(a) = allocated {
        annotations.push(("hami.io/vgpu-devices-allocated".into(), a));
    }
    annotations.sort();
    wit::Pod {
        uid: format!("uid-{i}"),
        namespace: "bench".into(),
        name: format!("infer-{i}"),
        labels: vec![],
        annotations,
        requests: vec![
            amount("nvidia.com/gpu", 1),
            amount("nvidia.com/gpucores", 20),
            amount("nvidia.com/gpumem", 4096),
        ],
        limits: vec![],
        tolerations: vec![],
        priority: 0,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: None,
    }
}

fn per(label: &str, total: std::time::Duration, n: usize) {
    println!(
        "{label:<64} {:>10.3} us",
        total.as_secs_f64() * 1e6 / n as f64
    );
}

fn main() {
    let bytes = wasmsched::wasm::loader::builtin("gpu-topology").expect("built-in GpuTopology");
    let module = PluginModule::compile(bytes).expect("compiles");
    let mut inst =
        Instance::new("GpuTopology", &module, Limits::default(), "{}").expect("instantiates");
    let mut deltas: Vec<wit::Delta> = (0..NODES)
        .map(|i| wit::Delta::NodeSet((i, node(i))))
        .collect();
    for i in 0..NODES * 3 {
        let node = i % NODES;
        let placed = wit::Placement {
            node,
            pod: pod(i, Some(format!("GPU-{node}-{},NVIDIA,4096,20:;", i % 8))),
        };
        deltas.push(wit::Delta::PodAdd(placed));
    }
    inst.apply(&deltas, true).unwrap();

    let reps = 2000;
    let p = pod(1_000_000, None);
    let all: Vec<u32> = (0..NODES).collect();
    let t = Instant::now();
    for _ in 0..20 {
        inst.cycle_start(&p).unwrap().unwrap();
        inst.filter(&all).unwrap();
    }
    per(
        "cycle-start + filter on 1000 HAMi nodes, per node",
        t.elapsed(),
        20 * NODES as usize,
    );
    inst.cycle_start(&p).unwrap().unwrap();
    let t = Instant::now();
    for _ in 0..reps {
        inst.filter(&[7]).unwrap();
    }
    per("filter: one call with one HAMi node", t.elapsed(), reps);

    let t = Instant::now();
    let mut written = String::new();
    for _ in 0..reps {
        let patch = inst.reserve(7).unwrap().unwrap();
        written = patch.annotations[0].1.clone();
    }
    per(
        "reserve + pre-bind: one call each, the pod patch back",
        t.elapsed(),
        reps,
    );
    println!("  (hami.io/vgpu-devices-allocated: {written})");

    let t = Instant::now();
    for i in 0..reps as u32 {
        let placed = wit::Placement {
            node: i % NODES,
            pod: pod(2_000_000 + i, Some(written.clone())),
        };
        inst.apply(&[wit::Delta::PodAdd(placed)], false).unwrap();
    }
    per(
        "apply: the assumed pod with its device annotation",
        t.elapsed(),
        reps,
    );
}
