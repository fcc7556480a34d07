//! Dynamic Resource Allocation metrics, computed from DynamicResources'
//! store when scraped (upstream's scheduler has none beyond its plugin
//! timings, which DynamicResources reports as every plugin does):
//!
//! - `wasmsched_dra_device_allocated{node,driver,pool,device}`: 1 while a
//!   claim holds the published device (allocated outside admin access, or
//!   reserved in a cycle and not yet written), else 0; one series per
//!   device, for the dashboard's per-device panel;
//! - `wasmsched_dra_device_shares{node,driver,pool,device}`: the shares
//!   held of a device that allows multiple allocations (consumable
//!   capacity; such a device counts as allocated while one is held);
//! - `wasmsched_dra_device_capacity{node,driver,pool,device,capacity}` and
//!   `wasmsched_dra_device_capacity_consumed{...}`: each capacity of such a
//!   device (in its base unit: bytes for memory) and what its shares
//!   consume, for the dashboard's fractional-device panel;
//! - `wasmsched_dra_claims{state}`: claims `allocated` and `pending`;
//! - `wasmsched_dra_invalid_objects{kind}`: DeviceClasses, ResourceSlices
//!   and ResourceClaims that could not be read (each also an error for
//!   the pods that need it).
//!
//! Reads the current `run` (see [`super::gpu_metrics`]); nothing without
//! DRA objects.

use std::sync::OnceLock;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntGaugeVec, Opts, Registry};

use crate::framework::plugins::dynamic_resources::Store;

const METRICS: [(&str, &str, &[&str]); 3] = [
    (
        "wasmsched_dra_device_allocated",
        "1 while a ResourceClaim holds the published device (allocated, or reserved in a cycle and not yet written), else 0.",
        &["node", "driver", "pool", "device"],
    ),
    (
        "wasmsched_dra_claims",
        "ResourceClaims seen, by state: allocated or pending.",
        &["state"],
    ),
    (
        "wasmsched_dra_invalid_objects",
        "DRA objects that could not be read, by kind.",
        &["kind"],
    ),
];

/// The shared devices' metrics (consumable capacity).
const SHARED: [(&str, &str, &[&str]); 3] = [
    (
        "wasmsched_dra_device_shares",
        "Shares held of a device that allows multiple allocations (allocated, or reserved in a cycle and not yet written).",
        &["node", "driver", "pool", "device"],
    ),
    (
        "wasmsched_dra_device_capacity",
        "A capacity of a device that allows multiple allocations, in its base unit.",
        &["node", "driver", "pool", "device", "capacity"],
    ),
    (
        "wasmsched_dra_device_capacity_consumed",
        "What the shares of a device that allows multiple allocations consume of a capacity, in its base unit.",
        &["node", "driver", "pool", "device", "capacity"],
    ),
];

/// Registers the collector once per process.
pub fn register(registry: &Registry) {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        let _ = registry.register(Box::new(DraCollector::new()));
    });
}

struct DraCollector {
    descs: Vec<Desc>,
}

impl DraCollector {
    fn new() -> Self {
        let descs = METRICS
            .iter()
            .chain(&SHARED)
            .map(|(name, help, labels)| {
                Desc::new(
                    name.to_string(),
                    help.to_string(),
                    labels.iter().map(|l| l.to_string()).collect(),
                    Default::default(),
                )
                .expect("valid desc")
            })
            .collect();
        Self { descs }
    }
}

impl Collector for DraCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(shared) = super::gpu_metrics::current_run() else {
            return Vec::new();
        };
        let usage = shared.scheduler.handle.shared::<Store>().usage();
        let gauges: Vec<IntGaugeVec> = METRICS
            .iter()
            .map(|(name, help, labels)| {
                IntGaugeVec::new(Opts::new(*name, *help), labels).expect("valid")
            })
            .collect();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for d in &usage.devices {
            gauges[0]
                .with_label_values(&[&d.node, &d.driver, &d.pool, &d.device])
                .set(i64::from(d.taken));
        }
        if !usage.devices.is_empty() || usage.claims_allocated + usage.claims_pending > 0 {
            gauges[1]
                .with_label_values(&["allocated"])
                .set(count(usage.claims_allocated));
            gauges[1]
                .with_label_values(&["pending"])
                .set(count(usage.claims_pending));
        }
        for (kind, n) in &usage.invalid {
            gauges[2].with_label_values(&[kind]).set(count(*n));
        }
        let shares =
            IntGaugeVec::new(Opts::new(SHARED[0].0, SHARED[0].1), SHARED[0].2).expect("valid");
        let capacity: Vec<GaugeVec> = SHARED[1..]
            .iter()
            .map(|(name, help, labels)| {
                GaugeVec::new(Opts::new(*name, *help), labels).expect("valid")
            })
            .collect();
        for d in &usage.devices {
            let Some(s) = &d.shares else {
                continue;
            };
            shares
                .with_label_values(&[&d.node, &d.driver, &d.pool, &d.device])
                .set(i64::from(s.held));
            for (name, value, used) in &s.capacity {
                let labels = [&d.node, &d.driver, &d.pool, &d.device, name];
                capacity[0]
                    .with_label_values(&labels)
                    .set(base_units(*value));
                capacity[1]
                    .with_label_values(&labels)
                    .set(base_units(*used));
            }
        }
        let mut out: Vec<MetricFamily> = gauges.iter().flat_map(|g| g.collect()).collect();
        out.extend(shares.collect());
        out.extend(capacity.iter().flat_map(|g| g.collect()));
        out
    }
}

/// A quantity in nanos as a float of its base unit.
fn base_units(n: i128) -> f64 {
    n as f64 / 1e9
}
