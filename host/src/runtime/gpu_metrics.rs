//! Per-device metrics of HAMi nodes, computed from the scheduler's cache
//! when scraped (bound and assumed pods' `hami.io/vgpu-devices-allocated`):
//!
//! - `wasmsched_gpu_device_memory_allocated_mib{node,device,model}` and
//!   `wasmsched_gpu_device_memory_mib{...}` (registered memory);
//! - `wasmsched_gpu_device_cores_allocated{...}` (percent of SMs) and
//!   `wasmsched_gpu_device_cores{...}`;
//! - `wasmsched_gpu_device_vgpus{...}` and `wasmsched_gpu_device_vgpus_max{...}`;
//! - `wasmsched_gpus_untouched` (GPUs without any vGPU) and
//!   `wasmsched_gpu_nodes_untouched` (HAMi nodes with all GPUs untouched).
//!
//! One collector per process, reading the cache of the current `run`.

use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};

use super::Shared;
use crate::gpu_sharing;

const LABELS: [&str; 3] = ["node", "device", "model"];

const DEVICE_METRICS: [(&str, &str); 6] = [
    (
        "wasmsched_gpu_device_memory_allocated_mib",
        "GPU memory (MiB) held by the vGPUs of bound and assumed pods, per device of a HAMi node.",
    ),
    (
        "wasmsched_gpu_device_memory_mib",
        "GPU memory (MiB) a HAMi node registered for the device.",
    ),
    (
        "wasmsched_gpu_device_cores_allocated",
        "Percent of the device's SMs held by vGPUs of bound and assumed pods.",
    ),
    (
        "wasmsched_gpu_device_cores",
        "Percent of SMs the device offers (100 x core scaling).",
    ),
    ("wasmsched_gpu_device_vgpus", "vGPUs placed on the device."),
    (
        "wasmsched_gpu_device_vgpus_max",
        "vGPUs the device takes at most (HAMi's deviceSplitCount).",
    ),
];

const TOTALS: [(&str, &str); 2] = [
    (
        "wasmsched_gpus_untouched",
        "GPUs of HAMi nodes without any vGPU (whole GPUs left).",
    ),
    (
        "wasmsched_gpu_nodes_untouched",
        "HAMi nodes whose GPUs are all without vGPUs (whole nodes left).",
    ),
];

/// The cache the collector reads (the current `run`'s).
fn current() -> &'static Mutex<Weak<Shared>> {
    static CURRENT: OnceLock<Mutex<Weak<Shared>>> = OnceLock::new();
    CURRENT.get_or_init(|| Mutex::new(Weak::new()))
}

/// The current `run`'s state, if one runs (for the collectors of other
/// scrape-time metrics: [`super::dra_metrics`]).
pub(super) fn current_run() -> Option<Arc<Shared>> {
    current().lock().upgrade()
}

/// Registers the collector once per process and points it at `shared`.
pub fn register(registry: &Registry, shared: &Arc<Shared>) {
    *current().lock() = Arc::downgrade(shared);
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        let _ = registry.register(Box::new(DeviceCollector::new()));
    });
}

struct DeviceCollector {
    descs: Vec<Desc>,
}

impl DeviceCollector {
    fn new() -> Self {
        let mut descs: Vec<Desc> = DEVICE_METRICS
            .iter()
            .map(|(name, help)| {
                Desc::new(
                    name.to_string(),
                    help.to_string(),
                    LABELS.iter().map(|l| l.to_string()).collect(),
                    Default::default(),
                )
                .expect("valid desc")
            })
            .collect();
        for (name, help) in TOTALS {
            descs.push(
                Desc::new(name.into(), help.into(), Vec::new(), Default::default())
                    .expect("valid desc"),
            );
        }
        Self { descs }
    }
}

impl Collector for DeviceCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(shared) = current_run() else {
            return Vec::new();
        };
        let (devices, ((whole, _), (whole_nodes, _))) = {
            let cache = shared.cache.lock();
            (
                gpu_sharing::devices(&cache.snapshot),
                gpu_sharing::whole(&cache.snapshot),
            )
        };
        let gauges: Vec<IntGaugeVec> = DEVICE_METRICS
            .iter()
            .map(|(name, help)| IntGaugeVec::new(Opts::new(*name, *help), &LABELS).expect("valid"))
            .collect();
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for d in &devices {
            let labels = [d.node.as_str(), d.uuid.as_str(), d.model.as_str()];
            let values = [
                clamp(d.memory_mib.saturating_sub(d.memory_free_mib)),
                clamp(d.memory_mib),
                clamp(u64::from(d.cores).saturating_sub(d.cores_free)),
                i64::from(d.cores),
                i64::from(d.vgpus),
                i64::from(d.vgpus_max),
            ];
            for (g, v) in gauges.iter().zip(values) {
                g.with_label_values(&labels).set(v);
            }
        }
        let mut out: Vec<MetricFamily> = gauges.iter().flat_map(|g| g.collect()).collect();
        for ((name, help), v) in TOTALS.iter().zip([whole, whole_nodes]) {
            let g = IntGauge::new(*name, *help).expect("valid");
            g.set(v as i64);
            out.extend(g.collect());
        }
        out
    }
}
