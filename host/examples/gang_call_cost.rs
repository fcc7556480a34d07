//! Measures what the Reserve and Permit extension points cost per call
//! across the component boundary, with the `gang-quota` test plugin
//! (a gang and GPU-quota policy). The numbers in docs/gangs.md come from:
//!
//!     cargo run --release --example gang_call_cost

use std::path::Path;
use std::time::{Duration, Instant};

use wasmsched::wasm::bindings::types as wit;
use wasmsched::wasm::instance::{Instance, Limits};
use wasmsched::wasm::PluginModule;

fn amount(name: &str, amount: i64) -> wit::ResourceAmount {
    wit::ResourceAmount {
        name: name.into(),
        amount,
    }
}

fn node(i: u32) -> wit::Node {
    wit::Node {
        name: format!("node-{i:05}"),
        labels: vec![("kubernetes.io/hostname".into(), format!("node-{i:05}"))],
        annotations: vec![],
        allocatable: vec![amount("cpu", 64_000), amount("nvidia.com/gpu", 8)],
        taints: vec![],
        unschedulable: false,
        metrics: vec![],
    }
}

/// Pod `i`, in gang `gang` (of `size`) when given.
fn pod(i: u32, gang: Option<(&str, usize)>) -> wit::Pod {
    let (labels, annotations) = match gang {
        Some((g, size)) => (
            vec![("gang.example.com/name".into(), g.to_string())],
            vec![("gang.example.com/size".into(), size.to_string())],
        ),
        None => (vec![], vec![]),
    };
    wit::Pod {
        uid: format!("uid-{i}"),
        namespace: "ml".into(),
        name: format!("pod-{i}"),
        labels,
        annotations,
        requests: vec![amount("cpu", 1000), amount("nvidia.com/gpu", 1)],
        limits: vec![amount("nvidia.com/gpu", 1)],
        tolerations: vec![],
        priority: 0,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: None,
    }
}

fn per(label: &str, total: Duration, n: usize) {
    println!(
        "{label:<62} {:>9.2} us",
        total.as_secs_f64() * 1e6 / n as f64
    );
}

fn main() {
    let path = Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("gang_quota.wasm");
    let bytes = std::fs::read(&path).expect("gang_quota.wasm (built by host/build.rs)");
    let module = PluginModule::compile(&bytes).expect("compiles");
    let args = r#"{"gpuQuota": {"ml": 1000000}, "timeoutMs": 60000}"#;
    let mut inst = Instance::new("gang-quota", &module, Limits::default(), args).expect("starts");
    const NODES: u32 = 500;
    const PLACED: u32 = 2000;
    let mut deltas: Vec<wit::Delta> = (0..NODES)
        .map(|i| wit::Delta::NodeSet((i, node(i))))
        .collect();
    deltas.extend((0..PLACED).map(|i| {
        let mut p = pod(1_000_000 + i, None);
        p.node_name = Some(format!("node-{:05}", i % NODES));
        wit::Delta::PodAdd(wit::Placement {
            node: i % NODES,
            pod: p,
        })
    }));
    inst.apply(&deltas, true).unwrap();
    println!("{NODES} nodes, {PLACED} placed pods in the plugin's resident state\n");

    let reps = 2000;
    let plain = pod(1, None);
    let (mut reserve, mut unreserve, mut permit) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for i in 0..reps {
        inst.cycle_start(&plain).unwrap().unwrap();
        let t = Instant::now();
        inst.reserve(i % NODES).unwrap().unwrap();
        reserve += t.elapsed();
        let t = Instant::now();
        let r = inst.permit(i % NODES).unwrap();
        permit += t.elapsed();
        assert!(matches!(r.decision, wit::PermitDecision::Allow));
        let t = Instant::now();
        inst.unreserve(&plain.uid, i % NODES).unwrap();
        unreserve += t.elapsed();
    }
    per(
        "reserve (+ pre-bind probe), one call",
        reserve,
        reps as usize,
    );
    per("unreserve, one call", unreserve, reps as usize);
    per(
        &format!("permit: quota check over {PLACED} placed pods, allow"),
        permit,
        reps as usize,
    );

    // A gang of 8: seven wait, the eighth allows them (the host places
    // each reserved member in the plugin's state, as it would).
    let mut waits = Duration::ZERO;
    let mut completes = Duration::ZERO;
    let rounds = 200;
    for r in 0..rounds {
        let gang = format!("g{r}");
        for m in 0..8u32 {
            let mut p = pod(10_000 + r * 8 + m, Some((&gang, 8)));
            let node = (r * 8 + m) % NODES;
            inst.cycle_start(&p).unwrap().unwrap();
            inst.reserve(node).unwrap().unwrap();
            let t = Instant::now();
            let res = inst.permit(node).unwrap();
            let d = t.elapsed();
            if m < 7 {
                waits += d;
                assert!(matches!(res.decision, wit::PermitDecision::Wait(_)));
            } else {
                completes += d;
                assert_eq!(res.allow_waiting.len(), 7);
            }
            p.node_name = Some(format!("node-{node:05}"));
            inst.apply(
                &[wit::Delta::PodAdd(wit::Placement { node, pod: p })],
                false,
            )
            .unwrap();
        }
    }
    per("permit: gang member that waits", waits, rounds as usize * 7);
    per(
        "permit: gang member that completes it (allows 7 waiting)",
        completes,
        rounds as usize,
    );
}
