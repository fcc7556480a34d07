//! Contract minors, node metrics and device ranking: a component built
//! against an earlier minor (plugins/compat-0-3, generated from
//! wit/history/0.3.0 with wit-bindgen alone) loads and behaves as under a
//! 0.3 host: whole node records with every metric, a change of a node's
//! metrics alone as a `node-set`, device ranking through `device-rank`
//! with the node's devices on every call. A current component that
//! declares its metric interests (GpuTopology, built in) gets only those
//! and follows the same changes; it ranks devices through 0.5's
//! `node-device-rank`, keeping each node's devices between calls.

mod common;

use std::path::Path;

use common::*;
use wasmsched::framework::{DeviceSet, RankDevice, RankInput, Snapshot};
use wasmsched::model::Pod;
use wasmsched::wasm::exports::Minor;
use wasmsched::wasm::{FailurePolicy, Limits, PluginModule, WasmPlugin, WasmSettings};

const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";

fn plugin(name: &str, bytes: &[u8], minor: Minor) -> WasmPlugin {
    let module = PluginModule::compile(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(module.minor(), minor, "{name}");
    let settings = WasmSettings {
        args: "{}".into(),
        limits: Limits::default(),
        failure_policy: FailurePolicy::Fail,
    };
    WasmPlugin::new(name, module, settings, 1).unwrap()
}

/// `UTIL` for the node and each of its two GPUs, all at `pct`.
fn metrics(node: &str, pct: f64) -> Vec<(String, f64)> {
    let mut m = vec![(UTIL.to_string(), pct)];
    for g in 0..2 {
        m.push((format!("{UTIL}/GPU-{node}-{g}"), pct));
    }
    m.push(("node_load1".to_string(), 3.0));
    m.sort_by(|a, b| a.0.cmp(&b.0));
    m
}

fn gpu_node(name: &str) -> NodeB {
    NodeB::new(name)
        .alloc(&[
            ("cpu", "32"),
            ("memory", "256Gi"),
            ("nvidia.com/gpu", "8"),
            ("pods", "110"),
        ])
        .label("gpu.nvidia.com/count", "8")
}

fn gpu_pod() -> Pod {
    PodB::new("train").req(&[("nvidia.com/gpu", "1")]).build()
}

/// The built-in GpuTopology component.
fn gpu_topology() -> &'static [u8] {
    wasmsched::wasm::builtin::BUILTIN
        .iter()
        .find(|(name, _)| *name == "gpu-topology")
        .map(|(_, b)| *b)
        .unwrap()
}

/// Scores of nodes `a` and `b` in a fresh cycle.
fn scores(p: &WasmPlugin, snap: &Snapshot, cycle: &mut u64, nodes: &[u32]) -> Vec<i64> {
    *cycle += 1;
    p.call_score(snap, *cycle, &gpu_pod(), nodes)
        .unwrap_or_else(|e| panic!("score: {e:?}"))
}

#[test]
fn a_component_of_contract_0_3_gets_metric_changes_as_whole_nodes() {
    let bytes = std::fs::read(Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("compat_0_3.wasm"))
        .unwrap();
    let p = plugin("compat", &bytes, Minor::V0_3);
    let mut snap = Snapshot::default();
    let a = snap.set_node(gpu_node("a").build());
    let b = snap.set_node(gpu_node("b").build());
    let mut cycle = 0;
    // No metrics yet: unknown scores 0.
    assert_eq!(scores(&p, &snap, &mut cycle, &[a, b]), [0, 0]);
    snap.set_node_metrics("a", metrics("a", 80.0));
    snap.set_node_metrics("b", metrics("b", 20.0));
    assert_eq!(scores(&p, &snap, &mut cycle, &[a, b]), [20, 80]);
    // New values for the same series (0.4 components get values only).
    snap.set_node_metrics("a", metrics("a", 10.0));
    assert_eq!(scores(&p, &snap, &mut cycle, &[a, b]), [90, 80]);
    // A watch update of the node keeps its metrics.
    snap.set_node(gpu_node("a").label("zone", "z1").build());
    assert_eq!(scores(&p, &snap, &mut cycle, &[a, b]), [90, 80]);
    // Other series: the node's utilization is gone.
    snap.set_node_metrics("b", vec![("node_load1".into(), 1.0)]);
    assert_eq!(scores(&p, &snap, &mut cycle, &[a, b]), [90, 0]);
}

#[test]
fn gpu_topology_declares_its_metrics_and_follows_value_changes() {
    let bytes = gpu_topology();
    let p = plugin("GpuTopology", bytes, Minor::Current);
    let declared = p
        .with_current(|inst| Ok(inst.interests.metrics.clone()))
        .expect("the first instance")
        .unwrap()
        .expect("GpuTopology exports metric-interests");
    assert!(declared.wants(UTIL));
    assert!(declared.wants(&format!("{UTIL}/GPU-x-0")));
    assert!(declared.wants("DCGM_FI_DEV_FB_FREE/GPU-x-0"));
    assert!(!declared.wants("node_load1"));
    let mut snap = Snapshot::default();
    let a = snap.set_node(gpu_node("a").build());
    let b = snap.set_node(gpu_node("b").build());
    let mut cycle = 0;
    snap.set_node_metrics("a", metrics("a", 90.0));
    snap.set_node_metrics("b", metrics("b", 10.0));
    let first = scores(&p, &snap, &mut cycle, &[a, b]);
    assert!(first[1] > first[0], "the idle node wins: {first:?}");
    // Values only (same series): the ranking follows them.
    snap.set_node_metrics("a", metrics("a", 10.0));
    snap.set_node_metrics("b", metrics("b", 90.0));
    let swapped = scores(&p, &snap, &mut cycle, &[a, b]);
    assert!(swapped[0] > swapped[1], "the idle node wins: {swapped:?}");
    assert_eq!(swapped, [first[1], first[0]]);
    // Series gone: both unknown, scored alike.
    snap.set_node_metrics("a", Vec::new());
    snap.set_node_metrics("b", vec![("node_load1".into(), 1.0)]);
    let unknown = scores(&p, &snap, &mut cycle, &[a, b]);
    assert_eq!(unknown[0], unknown[1]);
}

/// GPU `i` of a node, on PCIe root `pci{root}`.
fn gpu(i: usize, root: usize) -> RankDevice {
    RankDevice {
        driver: "gpu.example.com".into(),
        pool: "a".into(),
        name: format!("gpu-{i}"),
        attributes: vec![(
            "resource.kubernetes.io/pcieRoot".into(),
            format!("pci{root}"),
        )],
        capacity: Vec::new(),
    }
}

/// A one-device claim's sets on `devices`: one per free device.
fn input<'a>(devices: &'a [RankDevice], allocated: &[bool], key: u64) -> RankInput<'a> {
    RankInput {
        devices: devices.iter().collect(),
        allocated: allocated.to_vec(),
        requests: vec!["claim/gpu".into()],
        sets: (0..devices.len() as u32)
            .filter(|&d| !allocated[d as usize])
            .map(|d| DeviceSet {
                devices: vec![d],
                requests: vec![0],
            })
            .collect(),
        devices_key: Some(vec![key]),
    }
}

fn rank(p: &WasmPlugin, snap: &Snapshot, cycle: &mut u64, node: u32, input: &RankInput) -> Vec<u8> {
    *cycle += 1;
    p.call_rank_devices(snap, *cycle, &gpu_pod(), node, input)
        .unwrap_or_else(|e| panic!("rank-devices: {e:?}"))
}

#[test]
fn a_component_of_contract_0_3_ranks_devices_sent_on_every_call() {
    let bytes = std::fs::read(Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("compat_0_3.wasm"))
        .unwrap();
    let exports = PluginModule::compile(&bytes).unwrap().exports;
    let p = plugin("compat", &bytes, Minor::V0_3);
    assert!(
        exports.device_rank && !exports.node_device_rank,
        "{exports}"
    );
    let mut snap = Snapshot::default();
    let a = snap.set_node(gpu_node("a").build());
    let mut cycle = 0;
    let devices: Vec<RankDevice> = (0..4).map(|i| gpu(i, i / 2)).collect();
    // Each set ranks 10 per position of its device: the last free wins.
    let first = input(&devices, &[true, false, false, false], 7);
    assert_eq!(rank(&p, &snap, &mut cycle, a, &first), [10, 20, 30]);
    // The same key again: a 0.3 component is sent the devices anyway, and
    // sees the new flags in them.
    let again = input(&devices, &[false, false, false, true], 7);
    assert_eq!(rank(&p, &snap, &mut cycle, a, &again), [0, 10, 20]);
}

#[test]
fn gpu_topology_keeps_each_nodes_devices_and_reads_new_allocated_flags() {
    let bytes = gpu_topology();
    let exports = PluginModule::compile(bytes).unwrap().exports;
    let p = plugin("GpuTopology", bytes, Minor::Current);
    assert!(exports.node_device_rank, "{exports}");
    let mut snap = Snapshot::default();
    let a = snap.set_node(gpu_node("a").build());
    let b = snap.set_node(gpu_node("b").build());
    let mut cycle = 0;
    let mut rank_on = |node: u32, devices: &[RankDevice], allocated: &[bool], key: u64| {
        rank(&p, &snap, &mut cycle, node, &input(devices, allocated, key))
    };
    // Roots pci0 (gpu-0, gpu-1) and pci1 (gpu-2, gpu-3); binpack prefers
    // the root already in use.
    let devices: Vec<RankDevice> = (0..4).map(|i| gpu(i, i / 2)).collect();
    let ranks = rank_on(a, &devices, &[true, false, false, false], 1);
    assert!(
        ranks[0] > ranks[1] && ranks[1] == ranks[2],
        "gpu-1 beside the used gpu-0: {ranks:?}"
    );
    // Same devices (same key): not sent again; the flags are new, so the
    // plugin must apply them to the devices it kept.
    let ranks = rank_on(a, &devices, &[false, false, true, false], 1);
    assert!(
        ranks[2] > ranks[0] && ranks[0] == ranks[1],
        "gpu-3 beside the used gpu-2: {ranks:?}"
    );
    // The key is the promise: under the same key the plugin ranks the
    // devices it kept, whatever the host holds now (here, gpu-1 and gpu-2
    // swapped roots), which shows they were not sent again.
    let swapped: Vec<RankDevice> = (0..4).map(|i| gpu(i, i % 2)).collect();
    let kept = rank_on(a, &swapped, &[true, false, false, false], 1);
    assert!(
        kept[0] > kept[1],
        "gpu-1, on the kept root of gpu-0: {kept:?}"
    );
    // A new key: the devices are sent, and gpu-2 is now beside gpu-0.
    let sent = rank_on(a, &swapped, &[true, false, false, false], 2);
    assert!(
        sent[1] > sent[0] && sent[0] == sent[2],
        "gpu-2 beside the used gpu-0: {sent:?}"
    );
    // Keys are per node: node b's first call sends its devices, whatever
    // key node a had.
    let on_b = rank_on(b, &swapped, &[true, false, false, false], 1);
    assert_eq!(on_b, sent);
}
