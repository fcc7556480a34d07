//! kube-scheduler's metrics beyond [`super::metrics`], under upstream's
//! names, labels and buckets (`pkg/scheduler/metrics/metrics.go`):
//!
//! - `scheduler_pod_scheduling_sli_duration_seconds{attempts}`: from a
//!   pod's first scheduling attempt to its binding, over every attempt
//!   (buckets 0.01 s doubling 20 times);
//! - `scheduler_unschedulable_pods{plugin,profile}`: pods waiting as
//!   unschedulable, by each plugin that rejected them in their last
//!   attempt;
//! - `scheduler_plugin_evaluation_total{plugin,extension_point,profile}`:
//!   plugin runs at PreFilter, Filter, PreScore and Score (Filter: per
//!   chunk of nodes evaluated together);
//! - the `process_*` families (CPU, resident and virtual memory, open and
//!   maximum file descriptors, start time, threads).
//!
//! Registered once in the process registry `/metrics` serves.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

use parking_lot::Mutex;
use prometheus::{
    exponential_buckets, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts,
};

use super::events::Report;
use crate::scheduler::{Failure, FailureKind};

/// The extension points `scheduler_plugin_evaluation_total` counts.
pub const EVALUATED_POINTS: [&str; 4] = ["PreFilter", "Filter", "PreScore", "Score"];

/// What is remembered about a pod not bound yet.
#[derive(Default)]
struct Pending {
    /// When its first attempt started.
    first_attempt: Option<Instant>,
    /// (profile, plugins) of its last unschedulable attempt.
    unschedulable: Option<(String, Vec<String>)>,
}

pub struct OpsMetrics {
    pub sli: HistogramVec,
    pub unschedulable: IntGaugeVec,
    pub evaluations: IntCounterVec,
    pods: Mutex<HashMap<String, Pending>>,
}

impl OpsMetrics {
    /// The process's.
    pub fn global() -> &'static OpsMetrics {
        static M: OnceLock<OpsMetrics> = OnceLock::new();
        M.get_or_init(|| {
            let m = OpsMetrics {
                sli: HistogramVec::new(
                    HistogramOpts::new(
                        "scheduler_pod_scheduling_sli_duration_seconds",
                        "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
                    )
                    .buckets(exponential_buckets(0.01, 2.0, 20).expect("valid buckets")),
                    &["attempts"],
                )
                .expect("valid metric"),
                unschedulable: IntGaugeVec::new(
                    Opts::new(
                        "scheduler_unschedulable_pods",
                        "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
                    ),
                    &["plugin", "profile"],
                )
                .expect("valid metric"),
                evaluations: IntCounterVec::new(
                    Opts::new(
                        "scheduler_plugin_evaluation_total",
                        "Number of attempts to schedule pods by each plugin and the extension point (available only in PreFilter, Filter, PreScore, and Score).",
                    ),
                    &["plugin", "extension_point", "profile"],
                )
                .expect("valid metric"),
                pods: Mutex::new(HashMap::new()),
            };
            let registry = crate::metrics::Metrics::global().registry();
            let _ = registry.register(Box::new(m.sli.clone()));
            let _ = registry.register(Box::new(m.unschedulable.clone()));
            let _ = registry.register(Box::new(m.evaluations.clone()));
            let _ = registry.register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ));
            m
        })
    }

    /// A plugin ran at `point` (counted at the points upstream counts).
    pub fn evaluated(&self, profile: &str, plugin: &str, point: &str) {
        if EVALUATED_POINTS.contains(&point) {
            self.evaluations
                .with_label_values(&[plugin, point, profile])
                .inc();
        }
    }

    /// An attempt failed: its start is the pod's first unless one came
    /// before; an unschedulable pod counts for each plugin that rejected it.
    pub fn failed(&self, f: &Failure) {
        let mut pods = self.pods.lock();
        let p = pods.entry(f.pod.uid.clone()).or_default();
        p.first_attempt.get_or_insert(f.started);
        let now = match &f.kind {
            FailureKind::Unschedulable(fit) => Some((
                f.profile.clone(),
                fit.unschedulable_plugins.iter().cloned().collect(),
            )),
            _ => None,
        };
        let before = std::mem::replace(&mut p.unschedulable, now.clone());
        self.move_gauge(before, now);
    }

    /// Pod `uid` was bound after `attempts` attempts, the last taking
    /// `last_attempt_seconds` (scheduling and binding).
    pub fn scheduled(&self, uid: &str, attempts: u32, last_attempt_seconds: f64) {
        let gone = self.pods.lock().remove(uid);
        let seconds = gone
            .as_ref()
            .and_then(|p| p.first_attempt)
            .map_or(last_attempt_seconds, |t| {
                t.elapsed().as_secs_f64().max(last_attempt_seconds)
            });
        self.sli
            .with_label_values(&[attempts.to_string().as_str()])
            .observe(seconds);
        if let Some(p) = gone {
            self.move_gauge(p.unschedulable, None);
        }
    }

    /// What the reporter sees: a deleted pod is forgotten.
    pub fn report(&self, report: &Report) {
        if let Report::Deleted { uid } = report {
            let gone = self.pods.lock().remove(uid);
            if let Some(p) = gone {
                self.move_gauge(p.unschedulable, None);
            }
        }
    }

    fn move_gauge(
        &self,
        before: Option<(String, Vec<String>)>,
        now: Option<(String, Vec<String>)>,
    ) {
        if let Some((profile, plugins)) = before {
            for plugin in plugins {
                self.unschedulable
                    .with_label_values(&[plugin.as_str(), &profile])
                    .dec();
            }
        }
        if let Some((profile, plugins)) = now {
            for plugin in plugins {
                self.unschedulable
                    .with_label_values(&[plugin.as_str(), &profile])
                    .inc();
            }
        }
    }
}
