//! The controller's Prometheus metrics, registered in a registry the
//! caller passes (the process registry that `wasmsched run` serves, or a
//! test's own).

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

/// Buckets of the cost histogram: the team ranges' edges over -1000..=1000.
pub const COST_BUCKETS: [f64; 17] = [
    -1000.0, -500.0, -100.0, -50.0, -10.0, -1.0, 0.0, 1.0, 10.0, 20.0, 50.0, 100.0, 200.0, 300.0,
    500.0, 750.0, 1000.0,
];

#[derive(Clone)]
pub struct Telemetry {
    /// `wasmsched_deletion_cost_updates_total`: annotation writes.
    pub updates: IntCounter,
    /// `wasmsched_deletion_cost_skips_total{reason}`.
    pub skips: IntCounterVec,
    /// `wasmsched_deletion_cost_errors_total{cause}`.
    pub errors: IntCounterVec,
    /// `wasmsched_pod_deletion_cost`: the costs of the managed pods at the
    /// last pass (the "Pod Deletion Cost Distribution" panel).
    pub costs: CostDistribution,
}

/// The distribution of the managed pods' costs at the last pass, exposed
/// as a histogram whose buckets count pods (a gauge histogram: each pass
/// replaces the previous one, so buckets can go down). Plotted raw, as the
/// dashboard does, it shows how many pods sit in each range now; an
/// accumulating histogram would show every pod once per pass since start.
#[derive(Clone)]
pub struct CostDistribution(Arc<Distribution>);

struct Distribution {
    /// Never observed: gives the metric's description.
    template: Histogram,
    opts: HistogramOpts,
    current: Mutex<Histogram>,
}

impl CostDistribution {
    fn new() -> prometheus::Result<Self> {
        let opts = HistogramOpts::new(
            "wasmsched_pod_deletion_cost",
            "Pod-deletion-cost of the managed pods at the last pass (buckets count pods; replaced each pass).",
        )
        .buckets(COST_BUCKETS.to_vec());
        Ok(CostDistribution(Arc::new(Distribution {
            template: Histogram::with_opts(opts.clone())?,
            current: Mutex::new(Histogram::with_opts(opts.clone())?),
            opts,
        })))
    }

    /// Replaces the distribution with `costs`.
    pub fn publish(&self, costs: &[i32]) {
        let Ok(h) = Histogram::with_opts(self.0.opts.clone()) else {
            return;
        };
        for c in costs {
            h.observe(f64::from(*c));
        }
        *self.0.current.lock() = h;
    }

    /// Pods in the current distribution.
    pub fn pods(&self) -> u64 {
        self.0.current.lock().get_sample_count()
    }
}

impl Collector for CostDistribution {
    fn desc(&self) -> Vec<&Desc> {
        self.0.template.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.0.current.lock().collect()
    }
}

impl Telemetry {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let t = Telemetry {
            updates: IntCounter::new(
                "wasmsched_deletion_cost_updates_total",
                "Pod-deletion-cost annotations written.",
            )?,
            skips: IntCounterVec::new(
                Opts::new(
                    "wasmsched_deletion_cost_skips_total",
                    "Pods whose cost was not written, by reason (unchanged, hysteresis, user-set, no-opinion, terminating, inactive, metrics-fault, plugin-error, pod-invalid, gone).",
                ),
                &["reason"],
            )?,
            errors: IntCounterVec::new(
                Opts::new(
                    "wasmsched_deletion_cost_errors_total",
                    "Errors of the deletion-cost controller, by cause (prometheus-unreachable, metric-nan, api-conflict, plugin, ...).",
                ),
                &["cause"],
            )?,
            costs: CostDistribution::new()?,
        };
        registry.register(Box::new(t.updates.clone()))?;
        registry.register(Box::new(t.skips.clone()))?;
        registry.register(Box::new(t.errors.clone()))?;
        registry.register(Box::new(t.costs.clone()))?;
        Ok(t)
    }

    pub fn skip(&self, reason: &str) {
        self.skips.with_label_values(&[reason]).inc();
    }

    pub fn error(&self, cause: &str) {
        self.errors.with_label_values(&[cause]).inc();
    }
}
