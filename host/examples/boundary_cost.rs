//! Measures what crossing the component boundary costs with the contract's
//! design (resident state + node indices) against passing node records per
//! call. The numbers in docs/contract.md come from:
//!
//!     cargo run --release --example boundary_cost
//!
//! Uses the `chaos` test plugin in its well-behaved mode (Filter reads one
//! node label, Score parses one).

use std::path::Path;
use std::time::Instant;

use wasmsched::wasm::bindings::types as wit;
use wasmsched::wasm::instance::{Instance, Limits};
use wasmsched::wasm::PluginModule;

fn labels(n: usize, prefix: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = (0..n)
        .map(|i| (format!("{prefix}/key-{i:02}"), format!("value-{i}")))
        .collect();
    v.sort();
    v
}

fn node(i: u32) -> wit::Node {
    wit::Node {
        name: format!("node-{i:05}"),
        labels: labels(10, "example.com"),
        annotations: vec![],
        allocatable: vec![
            wit::ResourceAmount {
                name: "cpu".into(),
                amount: 32_000,
            },
            wit::ResourceAmount {
                name: "memory".into(),
                amount: 128 << 30,
            },
            wit::ResourceAmount {
                name: "nvidia.com/gpu".into(),
                amount: 8,
            },
        ],
        taints: vec![],
        unschedulable: false,
        metrics: vec![],
    }
}

fn pod(i: u32) -> wit::Pod {
    wit::Pod {
        uid: format!("uid-{i}"),
        namespace: "default".into(),
        name: format!("pod-{i}"),
        labels: labels(2, "app"),
        annotations: labels(4, "gpu.nvidia.com"),
        requests: vec![wit::ResourceAmount {
            name: "cpu".into(),
            amount: 1000,
        }],
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
        "{label:<58} {:>10.3} us",
        total.as_secs_f64() * 1e6 / n as f64
    );
}

fn main() {
    let path = Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("chaos.wasm");
    let bytes = std::fs::read(&path).expect("chaos.wasm (built by host/build.rs)");
    let module = PluginModule::compile(&bytes).expect("compiles");
    let mut inst = Instance::new("chaos", &module, Limits::default(), "{}").expect("instantiates");
    const N: u32 = 5000;

    let deltas: Vec<wit::Delta> = (0..N).map(|i| wit::Delta::NodeSet((i, node(i)))).collect();
    let t = Instant::now();
    inst.apply(&deltas, true).unwrap();
    per(
        "apply: one node record (10 labels), batch of 5000",
        t.elapsed(),
        N as usize,
    );

    let p = pod(0);
    let reps = 2000;
    let t = Instant::now();
    for _ in 0..reps {
        inst.cycle_start(&p).unwrap().unwrap();
    }
    per(
        "cycle-start: one pod record (4 annotations)",
        t.elapsed(),
        reps,
    );

    let one = [7u32];
    let t = Instant::now();
    for _ in 0..reps {
        inst.filter(&one).unwrap();
    }
    per("filter: one call with one node index", t.elapsed(), reps);

    let all: Vec<u32> = (0..N).collect();
    let rounds = 20;
    let t = Instant::now();
    for _ in 0..rounds {
        inst.filter(&all).unwrap();
    }
    per(
        "filter: per node, batch of 5000 indices",
        t.elapsed(),
        rounds * N as usize,
    );

    let t = Instant::now();
    for _ in 0..rounds {
        inst.score(&all).unwrap();
    }
    per(
        "score: per node, batch of 5000 indices",
        t.elapsed(),
        rounds * N as usize,
    );

    // The alternative design: the node record crosses on every call.
    let t = Instant::now();
    for i in 0..reps as u32 {
        inst.apply(&[wit::Delta::NodeSet((i % N, node(i % N)))], false)
            .unwrap();
        inst.filter(&[i % N]).unwrap();
    }
    per(
        "record per call: node record + filter call",
        t.elapsed(),
        reps,
    );

    let t = Instant::now();
    for i in 0..reps as u32 {
        inst.apply(
            &[wit::Delta::PodAdd(wit::Placement {
                node: i % N,
                pod: pod(i + 1),
            })],
            false,
        )
        .unwrap();
    }
    per("apply: one pod placement delta", t.elapsed(), reps);
}
