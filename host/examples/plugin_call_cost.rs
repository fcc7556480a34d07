//! What a plugin costs per call, by language: compiles each component
//! given, starts an instance, streams a cluster of 500 nodes to it, then
//! times `cycle-start`, a one-node `filter` (the call itself) and `filter`
//! and `score` batches over every node, as the scheduler calls them.
//!
//! ```sh
//! scripts/build-example-plugins target/example-plugins
//! cargo run --release --example plugin_call_cost -- target/example-plugins/spot-affinity-*.wasm
//! ```
//!
//! The numbers in docs/writing-plugins.md come from this.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use wasmsched::wasm::bindings::types as wit;
use wasmsched::wasm::instance::Instance;
use wasmsched::wasm::{self, Limits, PluginModule};

const NODES: u32 = 500;
const ROUNDS: u32 = 200;

fn node(i: u32) -> wit::Node {
    let mut labels = vec![
        (
            "karpenter.sh/capacity-type".to_string(),
            if i.is_multiple_of(2) {
                "spot"
            } else {
                "on-demand"
            }
            .to_string(),
        ),
        ("kubernetes.io/hostname".to_string(), format!("node-{i}")),
        (
            "topology.kubernetes.io/zone".to_string(),
            format!("zone-{}", i % 3),
        ),
    ];
    if i.is_multiple_of(10) {
        labels.push(("wasmsched.io/reserved-for".to_string(), "batch".to_string()));
    }
    labels.sort();
    wit::Node {
        name: format!("node-{i}"),
        labels,
        annotations: vec![],
        allocatable: vec![wit::ResourceAmount {
            name: "cpu".into(),
            amount: 4000,
        }],
        taints: vec![],
        unschedulable: false,
        metrics: vec![],
    }
}

fn pod(class: &str) -> wit::Pod {
    wit::Pod {
        uid: "uid-1".into(),
        namespace: "default".into(),
        name: "p".into(),
        labels: vec![("wasmsched.io/workload-class".into(), class.into())],
        annotations: vec![],
        requests: vec![wit::ResourceAmount {
            name: "cpu".into(),
            amount: 500,
        }],
        limits: vec![],
        tolerations: vec![],
        priority: 0,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: None,
    }
}

/// Median of `rounds` runs of `f`.
fn median(rounds: u32, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut times = Vec::with_capacity(rounds as usize);
    for _ in 0..rounds {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn measure(path: &str) -> Result<()> {
    let source = wasm::source::read(path.as_ref())?;
    let t = Instant::now();
    let module = PluginModule::compile(&source.bytes).map_err(|e| anyhow!("{path}: {e}"))?;
    let compile = t.elapsed();
    let limits = Limits::default();
    let t = Instant::now();
    let mut inst = Instance::new("cost", &module, limits, "{}").map_err(|e| anyhow!("{e}"))?;
    let start = t.elapsed();
    let deltas: Vec<wit::Delta> = (0..NODES)
        .map(|i| wit::Delta::NodeSet((i, node(i))))
        .collect();
    let t = Instant::now();
    inst.apply(&deltas, true).map_err(|e| anyhow!("{e}"))?;
    let apply = t.elapsed();
    let all: Vec<u32> = (0..NODES).collect();
    let batch = pod("batch");
    let cycle = median(ROUNDS, || {
        inst.cycle_start(&batch)
            .map_err(|e| anyhow!("{e}"))?
            .map_err(|e| anyhow!("{e}"))?;
        Ok(())
    })?;
    let one = median(ROUNDS, || {
        inst.filter(&[1]).map_err(|e| anyhow!("{e}"))?;
        Ok(())
    })?;
    let filter = median(ROUNDS, || {
        inst.filter(&all).map_err(|e| anyhow!("{e}"))?;
        Ok(())
    })?;
    let score = median(ROUNDS, || {
        inst.score(&all).map_err(|e| anyhow!("{e}"))?;
        Ok(())
    })?;
    let name = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string());
    println!(
        "| {name} | {} | {:.0} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} | {:.2} |",
        module.size,
        compile.as_secs_f64() * 1e3,
        start.as_secs_f64() * 1e3,
        us(apply) / NODES as f64,
        us(cycle),
        us(one),
        us(filter) / NODES as f64,
        us(score) / NODES as f64,
    );
    Ok(())
}

fn main() -> Result<()> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(
        !paths.is_empty(),
        "usage: plugin_call_cost COMPONENT.wasm..."
    );
    println!("| component | bytes | compile ms | start ms | apply us/node | cycle-start us | filter call us (1 node) | filter us/node ({NODES}) | score us/node ({NODES}) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in &paths {
        measure(p).with_context(|| p.clone())?;
    }
    Ok(())
}
