//! The running scheduler's metrics, under kube-scheduler's names and
//! labels where they mean the same (so existing dashboards work), plus the
//! wasm-specific ones. Registered in the process registry that `/metrics`
//! serves ([`crate::metrics::Metrics::global`]).

use std::sync::Arc;
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    exponential_buckets, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

use crate::config::Scheduler;
use crate::framework::queue::QueueLengths;
use crate::framework::TimingSink;

/// kube-scheduler's metrics and ours.
pub struct SchedulerMetrics {
    /// `scheduler_schedule_attempts_total{result,profile}`.
    pub schedule_attempts: IntCounterVec,
    /// `scheduler_scheduling_attempt_duration_seconds{result,profile}`.
    pub attempt_duration: HistogramVec,
    /// `scheduler_pending_pods{queue}`.
    pub pending_pods: IntGaugeVec,
    /// `scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`.
    pub extension_point_duration: HistogramVec,
    /// `scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}`.
    pub plugin_duration: HistogramVec,
    /// `scheduler_pod_scheduling_attempts`: attempts until a pod was scheduled.
    pub pod_attempts: prometheus::Histogram,
    /// `scheduler_queue_incoming_pods_total{queue,event}`.
    pub incoming_pods: IntCounterVec,
    /// `wasmsched_bindings_total{result}`: bind calls by outcome.
    pub bindings: IntCounterVec,
    /// `wasmsched_events_total{reason,action}`: events written or folded.
    pub events: IntCounterVec,
    /// `wasmsched_cache_assumed_pods`: pods placed whose binding the watch
    /// has not confirmed.
    pub assumed_pods: IntGauge,
    /// `scheduler_preemption_attempts_total`: PostFilter runs (pods that
    /// fit nowhere and were considered for preemption).
    pub preemption_attempts: prometheus::IntCounter,
    /// `scheduler_preemption_victims`: victims per preemption.
    pub preemption_victims: prometheus::Histogram,
    /// `scheduler_preemption_goroutines_duration_seconds`: how long an
    /// asynchronous preemption's API calls took, by result.
    pub preemption_goroutines_duration: HistogramVec,
    /// `scheduler_preemption_goroutines_execution_total`: asynchronous
    /// preemptions carried out, by result (`success`, `error`).
    pub preemption_goroutines_total: IntCounterVec,
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>, labels: &[&str]) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("valid metric")
}

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

impl SchedulerMetrics {
    /// Creates the metrics and registers them, with a collector that reads
    /// the wasm plugins' failure and instance counters at scrape time.
    pub fn register(registry: &Registry, scheduler: Arc<Scheduler>) -> Arc<Self> {
        let m = Self {
            schedule_attempts: counter(
                "scheduler_schedule_attempts_total",
                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            ),
            attempt_duration: histogram(
                "scheduler_scheduling_attempt_duration_seconds",
                "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                exponential_buckets(0.001, 2.0, 15).expect("valid buckets"),
                &["result", "profile"],
            ),
            pending_pods: IntGaugeVec::new(
                Opts::new(
                    "scheduler_pending_pods",
                    "Number of pending pods, by the queue type.",
                ),
                &["queue"],
            )
            .expect("valid metric"),
            extension_point_duration: histogram(
                "scheduler_framework_extension_point_duration_seconds",
                "Latency for running all plugins of a specific extension point.",
                exponential_buckets(0.0001, 2.0, 12).expect("valid buckets"),
                &["extension_point", "status", "profile"],
            ),
            plugin_duration: histogram(
                "scheduler_plugin_execution_duration_seconds",
                "Duration for running a plugin at a specific extension point.",
                exponential_buckets(0.00001, 1.5, 20).expect("valid buckets"),
                &["plugin", "extension_point", "status"],
            ),
            pod_attempts: prometheus::Histogram::with_opts(
                HistogramOpts::new(
                    "scheduler_pod_scheduling_attempts",
                    "Number of attempts to successfully schedule a pod.",
                )
                .buckets(exponential_buckets(1.0, 2.0, 5).expect("valid buckets")),
            )
            .expect("valid metric"),
            incoming_pods: counter(
                "scheduler_queue_incoming_pods_total",
                "Number of pods added to scheduling queues by event and queue type.",
                &["queue", "event"],
            ),
            bindings: counter(
                "wasmsched_bindings_total",
                "Bind calls by result: bound, conflict (already bound or changed), gone (pod or node deleted), error.",
                &["result"],
            ),
            events: counter(
                "wasmsched_events_total",
                "Scheduling events by reason and action: created, updated (a repeat folded into the series' count), suppressed (a repeat inside the rate limit).",
                &["reason", "action"],
            ),
            assumed_pods: IntGauge::new(
                "wasmsched_cache_assumed_pods",
                "Pods placed in the cache whose binding the watch has not confirmed yet.",
            )
            .expect("valid metric"),
            preemption_attempts: prometheus::IntCounter::new(
                "scheduler_preemption_attempts_total",
                "Total preemption attempts in the cluster till now",
            )
            .expect("valid metric"),
            preemption_victims: prometheus::Histogram::with_opts(
                HistogramOpts::new(
                    "scheduler_preemption_victims",
                    "Number of selected preemption victims",
                )
                .buckets(prometheus::linear_buckets(5.0, 5.0, 10).expect("valid buckets")),
            )
            .expect("valid metric"),
            preemption_goroutines_duration: HistogramVec::new(
                HistogramOpts::new(
                    "scheduler_preemption_goroutines_duration_seconds",
                    "Duration in seconds for running goroutines for the preemption.",
                )
                .buckets(exponential_buckets(0.01, 2.0, 20).expect("valid buckets")),
                &["result"],
            )
            .expect("valid metric"),
            preemption_goroutines_total: counter(
                "scheduler_preemption_goroutines_execution_total",
                "Number of preemption goroutines executed.",
                &["result"],
            ),
        };
        let collectors: Vec<Box<dyn Collector>> = vec![
            Box::new(m.schedule_attempts.clone()),
            Box::new(m.attempt_duration.clone()),
            Box::new(m.pending_pods.clone()),
            Box::new(m.extension_point_duration.clone()),
            Box::new(m.plugin_duration.clone()),
            Box::new(m.pod_attempts.clone()),
            Box::new(m.incoming_pods.clone()),
            Box::new(m.bindings.clone()),
            Box::new(m.events.clone()),
            Box::new(m.assumed_pods.clone()),
            Box::new(m.preemption_attempts.clone()),
            Box::new(m.preemption_victims.clone()),
            Box::new(m.preemption_goroutines_duration.clone()),
            Box::new(m.preemption_goroutines_total.clone()),
            Box::new(PluginHealthCollector::new(scheduler)),
        ];
        for c in collectors {
            // Registering twice (a second `run` in one process, as tests
            // do) keeps the first registration.
            let _ = registry.register(c);
        }
        Arc::new(m)
    }

    pub fn set_queue(&self, q: QueueLengths) {
        self.pending_pods
            .with_label_values(&["active"])
            .set(q.active as i64);
        self.pending_pods
            .with_label_values(&["backoff"])
            .set(q.backoff as i64);
        self.pending_pods
            .with_label_values(&["unschedulable"])
            .set(q.unschedulable as i64);
        self.pending_pods
            .with_label_values(&["gated"])
            .set(q.gated as i64);
    }
}

impl TimingSink for SchedulerMetrics {
    fn plugin(&self, profile: &str, plugin: &str, point: &'static str, elapsed: Duration) {
        super::ops_metrics::OpsMetrics::global().evaluated(profile, plugin, point);
        self.plugin_duration
            .with_label_values(&[plugin, point, "Success"])
            .observe(elapsed.as_secs_f64());
    }

    fn extension_point(
        &self,
        profile: &str,
        point: &'static str,
        status: &'static str,
        elapsed: Duration,
    ) {
        self.extension_point_duration
            .with_label_values(&[point, status, profile])
            .observe(elapsed.as_secs_f64());
        if point == "PostFilter" {
            self.preemption_attempts.inc();
        }
    }
}

/// `leader_election_master_status{name}` (client-go's name), read from
/// the leadership when scraped: 1 only while this replica holds the lease
/// by its own clock (a leader frozen past its renew deadline says 0 the
/// moment it wakes, before its elector has run).
struct LeaderStatus {
    leadership: Arc<super::leader::Leadership>,
    name: String,
    desc: Desc,
}

const LEADER_HELP: &str = "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.";

impl Collector for LeaderStatus {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let g = IntGaugeVec::new(
            Opts::new("leader_election_master_status", LEADER_HELP),
            &["name"],
        )
        .expect("valid gauge");
        g.with_label_values(&[&self.name])
            .set(i64::from(self.leadership.leading()));
        g.collect()
    }
}

/// Registers `leader_election_master_status{name}` for the lease `name`
/// (`namespace/name`).
pub fn register_leader_status(
    registry: &Registry,
    leadership: Arc<super::leader::Leadership>,
    name: &str,
) {
    let desc = Desc::new(
        "leader_election_master_status".into(),
        LEADER_HELP.into(),
        vec!["name".into()],
        Default::default(),
    )
    .expect("valid desc");
    let _ = registry.register(Box::new(LeaderStatus {
        leadership,
        name: name.to_string(),
        desc,
    }));
}

/// `wasmsched_plugin_errors_total{profile,plugin,cause}` and
/// `wasmsched_plugin_instances_total{profile,plugin}`, read from the wasm
/// plugins' own counters when scraped (they also count in `simulate`, so
/// they live with the plugins, not here). Reads the current profile, so a
/// reloaded plugin's counters follow.
struct PluginHealthCollector {
    scheduler: Arc<Scheduler>,
    descs: Vec<Desc>,
}

impl PluginHealthCollector {
    fn new(scheduler: Arc<Scheduler>) -> Self {
        let descs = vec![
            Desc::new(
                "wasmsched_plugin_errors_total".into(),
                "Wasm plugin call failures by cause (trap, timeout, memory, bad-result, ...), since the plugin version was loaded.".into(),
                vec!["profile".into(), "plugin".into(), "cause".into()],
                Default::default(),
            )
            .expect("valid desc"),
            Desc::new(
                "wasmsched_plugin_instances_total".into(),
                "Wasm plugin instances started (each failure replaces one), since the plugin version was loaded.".into(),
                vec!["profile".into(), "plugin".into()],
                Default::default(),
            )
            .expect("valid desc"),
            Desc::new(
                "wasmsched_plugin_memory_bytes".into(),
                "The most linear memory one instance of the wasm plugin has had (its resident state), bytes.".into(),
                vec!["profile".into(), "plugin".into()],
                Default::default(),
            )
            .expect("valid desc"),
        ];
        Self { scheduler, descs }
    }
}

impl Collector for PluginHealthCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let errors = counter(
            "wasmsched_plugin_errors_total",
            "Wasm plugin call failures by cause (trap, timeout, memory, bad-result, ...), since the plugin version was loaded.",
            &["profile", "plugin", "cause"],
        );
        let instances = counter(
            "wasmsched_plugin_instances_total",
            "Wasm plugin instances started (each failure replaces one), since the plugin version was loaded.",
            &["profile", "plugin"],
        );
        let memory = IntGaugeVec::new(
            Opts::new("wasmsched_plugin_memory_bytes", "The most linear memory one instance of the wasm plugin has had (its resident state), bytes."),
            &["profile", "plugin"],
        )
        .expect("valid gauge");
        for fw in &self.scheduler.profiles {
            for p in &fw.profile().members {
                let Some(health) = p.health() else { continue };
                let labels = [fw.scheduler_name(), p.name()];
                for cause in ["trap", "timeout", "memory", "bad-result", "plugin-error"] {
                    // Zero series exist from the start, so rate() works.
                    errors.with_label_values(&[labels[0], labels[1], cause]);
                }
                for (cause, n) in health.failures {
                    errors
                        .with_label_values(&[labels[0], labels[1], cause])
                        .inc_by(n);
                }
                instances
                    .with_label_values(&labels)
                    .inc_by(health.instances);
                memory
                    .with_label_values(&labels)
                    .set(i64::try_from(health.memory_bytes).unwrap_or(i64::MAX));
            }
        }
        let mut out = errors.collect();
        out.extend(instances.collect());
        out.extend(memory.collect());
        out
    }
}
