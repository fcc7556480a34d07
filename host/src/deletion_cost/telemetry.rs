//! The controller's Prometheus metrics, registered in a registry the
//! caller passes (the process registry that `wasmsched run` serves, or a
//! test's own).

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
    /// `wasmsched_pod_deletion_cost`: the cost of each managed pod, observed
    /// once per pass (the "Pod Deletion Cost Distribution" panel).
    pub costs: Histogram,
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
                    "Pods whose cost was not written, by reason (unchanged, hysteresis, user-set, no-opinion, terminating, metrics-fault, plugin-error, pod-invalid, rate-limited).",
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
            costs: Histogram::with_opts(
                HistogramOpts::new(
                    "wasmsched_pod_deletion_cost",
                    "Pod-deletion-cost of the managed pods, observed once per pass.",
                )
                .buckets(COST_BUCKETS.to_vec()),
            )?,
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
