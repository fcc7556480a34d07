//! Dynamic Resource Allocation metrics, computed from DynamicResources'
//! store when scraped (upstream's scheduler has none beyond its plugin
//! timings, which DynamicResources reports as every plugin does):
//!
//! - `wasmsched_dra_device_allocated{node,driver,pool,device}`: 1 while a
//!   claim holds the published device (allocated outside admin access, or
//!   reserved in a cycle and not yet written), else 0; one series per
//!   device, for the dashboard's per-device panel;
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
use prometheus::{IntGaugeVec, Opts, Registry};

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
        gauges.iter().flat_map(|g| g.collect()).collect()
    }
}
