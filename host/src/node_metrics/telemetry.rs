//! The node-metrics source's own metrics, in the process registry that
//! `wasmsched run` serves (registered once per process).

use std::sync::OnceLock;

use prometheus::{Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

#[derive(Clone)]
pub struct Telemetry {
    /// `wasmsched_node_metrics_query_duration_seconds{metric}`.
    pub query_duration: HistogramVec,
    /// `wasmsched_node_metrics_errors_total{cause}`: `prometheus-unreachable`,
    /// `prometheus-bad-response`, `sample-unlabeled` (no node label),
    /// `sample-invalid` (NaN, infinite or negative).
    pub errors: IntCounterVec,
    /// `wasmsched_node_metrics_up`: 1 when every query of the last pass
    /// was answered, 0 otherwise.
    pub up: IntGauge,
    /// `wasmsched_node_metrics_series`: samples kept at the last pass.
    pub series: IntGauge,
    /// `wasmsched_node_metrics_nodes`: nodes with a known value.
    pub nodes: IntGauge,
    /// `wasmsched_node_metrics_oldest_value_age_seconds`.
    pub oldest_age: Gauge,
}

impl Telemetry {
    /// The process's, registered in `crate::metrics::Metrics::global()`
    /// on first use.
    pub fn global() -> &'static Telemetry {
        static T: OnceLock<Telemetry> = OnceLock::new();
        T.get_or_init(|| {
            Self::register(crate::metrics::Metrics::global().registry())
                .expect("node-metrics metric definitions are valid and registered once")
        })
    }

    fn register(registry: &Registry) -> prometheus::Result<Self> {
        let t = Telemetry {
            query_duration: HistogramVec::new(
                HistogramOpts::new(
                    "wasmsched_node_metrics_query_duration_seconds",
                    "Latency of the node-metrics source's Prometheus queries, answered or not.",
                )
                .buckets(vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ]),
                &["metric"],
            )?,
            errors: IntCounterVec::new(
                Opts::new(
                    "wasmsched_node_metrics_errors_total",
                    "Node-metrics queries that failed and samples that were unusable, by cause.",
                ),
                &["cause"],
            )?,
            up: IntGauge::new(
                "wasmsched_node_metrics_up",
                "1 when Prometheus answered every node-metrics query of the last pass, else 0.",
            )?,
            series: IntGauge::new(
                "wasmsched_node_metrics_series",
                "Series (node and device values) the node-metrics source kept at its last pass.",
            )?,
            nodes: IntGauge::new(
                "wasmsched_node_metrics_nodes",
                "Nodes with at least one known (not stale) metric value.",
            )?,
            oldest_age: Gauge::new(
                "wasmsched_node_metrics_oldest_value_age_seconds",
                "Age of the oldest node-metric value plugins get (older than staleAfter: dropped).",
            )?,
        };
        for cause in [
            "prometheus-unreachable",
            "prometheus-bad-response",
            "sample-unlabeled",
            "sample-invalid",
        ] {
            t.errors.with_label_values(&[cause]);
        }
        for c in [
            Box::new(t.query_duration.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(t.errors.clone()),
            Box::new(t.up.clone()),
            Box::new(t.series.clone()),
            Box::new(t.nodes.clone()),
            Box::new(t.oldest_age.clone()),
        ] {
            registry.register(c)?;
        }
        Ok(t)
    }
}
