//! What a wasm plugin costs in preemption: the `post-filter` call (the
//! candidates and their victims cross the boundary) for 1 to 100
//! candidates of 3 victims, and one what-if Filter evaluation (remove 3
//! victims by delta, `cycle-start`, `filter` of one node, put them back),
//! which preemption's dry run makes once with a node's lower-priority pods
//! removed and once per pod it tries to return, on each node it tries. Components: the built-in GpuTopology (with
//! `preemptWholeDomains`) and the `chaos` test plugin (ranking by a node
//! label), on a cluster of 500 GPU nodes with 4 pods each.
//!
//! ```sh
//! cargo run --release --example preemption_cost
//! ```
//!
//! The numbers in docs/preemption.md come from this.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use wasmsched::wasm::bindings::types as wit;
use wasmsched::wasm::instance::Instance;
use wasmsched::wasm::{loader, Limits, PluginModule};

const NODES: u32 = 500;
const ROUNDS: u32 = 200;

fn kv(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    v.sort();
    v
}

fn amounts(pairs: &[(&str, i64)]) -> Vec<wit::ResourceAmount> {
    pairs
        .iter()
        .map(|(n, a)| wit::ResourceAmount {
            name: n.to_string(),
            amount: *a,
        })
        .collect()
}

fn node(i: u32) -> wit::Node {
    wit::Node {
        name: format!("node-{i}"),
        labels: kv(&[
            ("gpu.nvidia.com/count", "4".into()),
            ("gpu.nvidia.com/memory", "40960".into()),
            ("gpu.nvidia.com/model", "A100".into()),
            ("rank", (i % 7).to_string()),
        ]),
        annotations: kv(&[("gpu.nvidia.com/topology", "0,1;2,3".into())]),
        allocatable: amounts(&[("cpu", 32_000), ("nvidia.com/gpu", 4)]),
        taints: vec![],
        unschedulable: false,
        metrics: vec![],
    }
}

fn pod(name: String, priority: i32, node: Option<u32>) -> wit::Pod {
    wit::Pod {
        uid: name.clone(),
        namespace: "default".into(),
        name,
        labels: vec![],
        annotations: vec![],
        requests: amounts(&[("cpu", 1000), ("nvidia.com/gpu", 1)]),
        limits: amounts(&[("nvidia.com/gpu", 1)]),
        tolerations: vec![],
        priority,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: node.map(|n| format!("node-{n}")),
    }
}

fn placed(n: u32, k: u32) -> wit::Pod {
    pod(format!("p-{n}-{k}"), 1, Some(n))
}

fn candidates(n: u32) -> Vec<wit::Candidate> {
    (0..n)
        .map(|i| wit::Candidate {
            node: i,
            victims: (0..3)
                .map(|k| wit::Victim {
                    pod: placed(i, k),
                    deletion_cost: 0,
                    start_time_ms: 0,
                    violates_budget: false,
                })
                .collect(),
            budget_violations: 0,
        })
        .collect()
}

fn median(mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut times = Vec::with_capacity(ROUNDS as usize);
    for _ in 0..ROUNDS {
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

fn measure(name: &str, bytes: &[u8], args: &str) -> Result<()> {
    let module = PluginModule::compile(bytes).map_err(|e| anyhow!("{name}: {e}"))?;
    let mut inst =
        Instance::new(name, &module, Limits::default(), args).map_err(|e| anyhow!("{e}"))?;
    let mut deltas: Vec<wit::Delta> = (0..NODES)
        .map(|i| wit::Delta::NodeSet((i, node(i))))
        .collect();
    for n in 0..NODES {
        for k in 0..4 {
            deltas.push(wit::Delta::PodAdd(wit::Placement {
                node: n,
                pod: placed(n, k),
            }));
        }
    }
    inst.apply(&deltas, true).map_err(|e| anyhow!("{e}"))?;
    let mut preemptor = pod("preemptor".into(), 10, None);
    preemptor.requests = amounts(&[("cpu", 1000), ("nvidia.com/gpu", 2)]);
    preemptor.limits = amounts(&[("nvidia.com/gpu", 2)]);
    let err = |e: wasmsched::wasm::PluginFailure| anyhow!("{e}");
    inst.cycle_start(&preemptor)
        .map_err(err)?
        .map_err(|e| anyhow!(e))?;
    let mut row = vec![name.to_string()];
    for n in [1, 10, 100] {
        let c = candidates(n);
        let t = median(|| inst.post_filter(&c).map(|_| ()).map_err(err))?;
        row.push(format!("{:.1}", us(t)));
    }
    let remove: Vec<wit::Delta> = (0..3)
        .map(|k| {
            wit::Delta::PodRemove(wit::Removal {
                node: 0,
                pod_uid: format!("p-0-{k}"),
            })
        })
        .collect();
    let restore: Vec<wit::Delta> = (0..3)
        .map(|k| {
            wit::Delta::PodAdd(wit::Placement {
                node: 0,
                pod: placed(0, k),
            })
        })
        .collect();
    let what_if = median(|| {
        inst.apply(&remove, false).map_err(err)?;
        inst.cycle_start(&preemptor)
            .map_err(err)?
            .map_err(|e| anyhow!(e))?;
        inst.filter(&[0]).map_err(err)?;
        inst.apply(&restore, false).map_err(err)?;
        Ok(())
    })?;
    row.push(format!("{:.1}", us(what_if)));
    println!("| {} |", row.join(" | "));
    Ok(())
}

fn main() -> Result<()> {
    println!("| component | post-filter us (1 candidate) | (10) | (100) | what-if Filter us |");
    println!("|---|---:|---:|---:|---:|");
    let gpu =
        loader::builtin("gpu-topology").ok_or_else(|| anyhow!("gpu-topology not built in"))?;
    measure("gpu-topology", gpu, r#"{"preemptWholeDomains": true}"#)?;
    let chaos = std::path::Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("chaos.wasm");
    let chaos = std::fs::read(&chaos)?;
    measure("chaos", &chaos, r#"{"rank_by_node_label": "rank"}"#)?;
    Ok(())
}
