//! `bench --node-metrics N`: every node carries the node metrics the
//! node-metrics source would give a node of 8 GPUs with its default
//! queries (dcgm-exporter's `DCGM_FI_DEV_GPU_UTIL` and
//! `DCGM_FI_DEV_FB_FREE`: each node's mean and each GPU's `METRIC/UUID`,
//! 18 values), and every N
//! measured pods all of them change, as after a pass of the source: one
//! `NodeMetrics` change per node, which every plugin instance applies at
//! its next cycle (BENCHMARKS.md, "Node metrics").

use std::time::{Duration, Instant};

use crate::framework::Snapshot;
use crate::node_metrics::config::DEFAULT_QUERIES;
use crate::node_metrics::store::device_metric;

/// GPUs per node whose metrics are attached.
pub const GPUS: usize = 8;

/// A value in 0..100 from the node, the GPU, the metric and the pass.
fn value(node: u32, gpu: usize, metric: usize, pass: usize) -> f64 {
    let mut x = u64::from(node).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ ((gpu as u64) << 32)
        ^ ((metric as u64) << 40)
        ^ ((pass as u64) << 48);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    (x % 100) as f64
}

/// The metrics of node `index` at `pass`, sorted by name.
pub fn metrics_of(index: u32, pass: usize) -> Vec<(String, f64)> {
    let mut out = Vec::with_capacity(DEFAULT_QUERIES.len() * (GPUS + 1));
    for (m, metric) in DEFAULT_QUERIES.iter().enumerate() {
        let mut sum = 0.0;
        for g in 0..GPUS {
            let v = value(index, g, m, pass);
            sum += v;
            out.push((device_metric(metric, &format!("GPU-{index:08x}-{g}")), v));
        }
        out.push((metric.to_string(), sum / GPUS as f64));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Sets every node's metrics to those of `pass` (one change per node).
/// Returns how long making up the values took (the source's work, done on
/// its own task, not the scheduling loop's): the caller leaves it out of
/// the measured time.
pub fn refresh(snapshot: &mut Snapshot, pass: usize) -> Duration {
    let made = Instant::now();
    let nodes: Vec<(String, Vec<(String, f64)>)> = snapshot
        .nodes()
        .map(|info| (info.node.name.clone(), metrics_of(info.index, pass)))
        .collect();
    let made = made.elapsed();
    for (name, metrics) in nodes {
        snapshot.set_node_metrics(&name, metrics);
    }
    made
}
