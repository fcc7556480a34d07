//! `wasmsched bench`: the scheduling engine on synthetic clusters, in
//! process, with the numbers the performance targets are stated in.

pub mod fractional;
pub mod gangs;
pub mod generate;
#[cfg(feature = "native-builtins")]
pub mod native;
pub mod node_metrics;
pub mod preemption;
pub mod workloads;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::{self, file, ConfigFile};
use crate::framework::{Outcome, Snapshot};

pub use generate::{generate, Spec};
pub use workloads::Workload;

/// Which plugins run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Core native plugins only.
    Core,
    /// Core + GPU-topology + network-locality as wasm components (as shipped).
    Wasm,
    /// Core + the same two policies compiled natively into the host
    /// (needs the `native-builtins` feature).
    Native,
    /// Core plugins with DefaultPreemption on upstream's PreemptionAsync
    /// workload (`--pods` measured pods; see `bench::preemption`).
    Preemption,
}

/// One run's numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    pub scenario: Scenario,
    #[serde(default)]
    pub workload: Workload,
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub scheduled: usize,
    pub unschedulable: usize,
    pub seconds: f64,
    pub pods_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub peak_rss_mib: f64,
    /// (plugin, extension point, total ms, calls)
    pub plugins: Vec<(String, String, f64, u64)>,
    /// Preemptions made (the preemption workload).
    #[serde(default)]
    pub preemptions: usize,
    /// (wasm plugin, the most linear memory one of its instances had, bytes)
    #[serde(default)]
    pub plugin_memory: Vec<(String, u64)>,
    /// `--node-metrics`: the mean latency of the first attempt after each
    /// change of every node's metrics (the plugin instances apply the
    /// node changes then), ms.
    #[serde(default)]
    pub after_metrics_ms: Option<f64>,
}

/// What a run measured, for [`result`].
pub struct Run {
    pub scenario: Scenario,
    pub workload: Workload,
    pub spec: Spec,
    pub workers: usize,
    pub scheduled: usize,
    pub preemptions: usize,
    pub elapsed: Duration,
}

/// The progress bar of a run (hidden without `progress`).
pub fn progress_bar(
    progress: bool,
    len: usize,
    scenario: Scenario,
    workers: usize,
) -> indicatif::ProgressBar {
    let bar = if progress {
        indicatif::ProgressBar::new(len as u64).with_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:40}] {pos}/{len} pods {per_sec} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        )
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_prefix(format!("{scenario:?} x{workers}"));
    bar
}

/// The numbers of a run: throughput over `spec.pods`, latency
/// percentiles of the attempts, and the framework's timings.
pub fn result(
    r: Run,
    fw: &crate::framework::Framework,
    mut latencies: Vec<Duration>,
) -> BenchResult {
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let plugins = fw
        .timings
        .snapshot()
        .into_iter()
        .map(|((plugin, point), t)| {
            (
                plugin,
                point.to_string(),
                t.total.as_secs_f64() * 1e3,
                t.calls,
            )
        })
        .collect();
    BenchResult {
        scenario: r.scenario,
        workload: r.workload,
        nodes: r.spec.nodes,
        pods: r.spec.pods,
        workers: r.workers,
        scheduled: r.scheduled,
        unschedulable: r.spec.pods - r.scheduled.min(r.spec.pods),
        seconds: r.elapsed.as_secs_f64(),
        pods_per_second: r.spec.pods as f64 / r.elapsed.as_secs_f64(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        peak_rss_mib: peak_rss_mib(),
        plugins,
        preemptions: r.preemptions,
        plugin_memory: fw
            .profile()
            .members
            .iter()
            .filter_map(|p| Some((p.name().to_string(), p.health()?.memory_bytes)))
            .collect(),
        after_metrics_ms: None,
    }
}

fn config_for(scenario: Scenario, workers: usize) -> ConfigFile {
    let mut profile = file::ProfileFile {
        scheduler_name: config::DEFAULT_SCHEDULER_NAME.into(),
        ..Default::default()
    };
    if scenario != Scenario::Wasm {
        profile.plugins.multi_point = Some(file::PluginSet {
            enabled: vec![],
            disabled: crate::framework::registry::builtin_wasm()
                .filter(|(name, _)| {
                    crate::framework::registry::lookup(name).is_some_and(|r| r.default)
                })
                .map(|(name, _)| file::PluginRef {
                    name: name.to_string(),
                    weight: None,
                })
                .collect(),
        });
    }
    ConfigFile {
        parallelism: Some(workers),
        profiles: vec![profile],
        ..Default::default()
    }
}

/// Peak resident set size of this process (Linux `VmHWM`), MiB.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs one scenario on the mixed workload: every pod is attempted once,
/// in creation order, and placed pods are assumed so the next pod sees them.
pub fn run(
    spec: Spec,
    scenario: Scenario,
    workers: usize,
    progress: bool,
) -> anyhow::Result<BenchResult> {
    run_workload(Workload::Mixed, spec, scenario, workers, progress)
}

/// The nodes, initial and measured pods of `workload`.
fn cluster(workload: Workload, spec: &Spec) -> anyhow::Result<workloads::Cluster> {
    match workload {
        Workload::Fractional => {
            anyhow::bail!("the fractional workload has a runner of its own (bench::fractional)")
        }
        Workload::Mixed => {
            let manifests = generate(*spec);
            let mut measured = manifests.pods;
            measured.sort_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then(a.creation_ms.cmp(&b.creation_ms))
            });
            Ok(workloads::Cluster {
                nodes: manifests.nodes,
                init: Vec::new(),
                measured,
            })
        }
        w => Ok(workloads::cluster(w, spec)),
    }
}

/// Runs one scenario on `workload`: the initial pods are placed, then
/// every measured pod is attempted once, in order, and placed pods are
/// assumed so the next pod sees them (MixedChurn also deletes and adds
/// nodes and pods between attempts).
pub fn run_workload(
    workload: Workload,
    spec: Spec,
    scenario: Scenario,
    workers: usize,
    progress: bool,
) -> anyhow::Result<BenchResult> {
    if scenario == Scenario::Preemption {
        return preemption::run(spec, workers, progress);
    }
    let scheduler = config::build(
        &config_for(scenario, workers),
        std::path::Path::new("."),
        spec.seed,
    )?;
    let fw = &scheduler.profiles[0];
    if scenario == Scenario::Native {
        #[cfg(feature = "native-builtins")]
        native::add_builtins(fw);
        #[cfg(not(feature = "native-builtins"))]
        anyhow::bail!("the native scenario needs a build with `--features native-builtins`");
    }
    let cluster = cluster(workload, &spec)?;
    let mut snapshot = Snapshot::default();
    for n in cluster.nodes {
        snapshot.set_node(n);
    }
    for (at, p) in cluster.init {
        snapshot.add_pod(at, Arc::new(p));
    }
    if spec.node_metrics > 0 {
        node_metrics::refresh(&mut snapshot, 0);
    }
    snapshot.compact_log();
    let measured = cluster.measured.len();
    let bar = progress_bar(progress, measured, scenario, workers);
    let mut tally = Tally::default();
    let mut rng = rand::SeedableRng::seed_from_u64(spec.seed);
    let mut after_metrics = Vec::new();
    let mut source_time = Duration::ZERO;
    let started = Instant::now();
    for (i, pod) in cluster.measured.into_iter().enumerate() {
        if workloads::churn(workload, i, &mut snapshot, &mut tally.placed, &mut rng) {
            snapshot.compact_log();
        }
        if spec.node_metrics > 0 && i > 0 && i % spec.node_metrics == 0 {
            source_time += node_metrics::refresh(&mut snapshot, i / spec.node_metrics);
            snapshot.compact_log();
            after_metrics.push(i);
        }
        tally.attempt(fw, &mut snapshot, pod);
        bar.inc(1);
    }
    let elapsed = started.elapsed().saturating_sub(source_time);
    bar.finish_and_clear();
    let after: Vec<f64> = after_metrics
        .iter()
        .filter_map(|&i| tally.latencies.get(i))
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let after_metrics_ms =
        (!after.is_empty()).then(|| after.iter().sum::<f64>() / after.len() as f64);
    let mut r = result(
        Run {
            scenario,
            workload,
            spec: Spec {
                pods: measured,
                ..spec
            },
            workers,
            scheduled: tally.placed_count,
            preemptions: 0,
            elapsed,
        },
        fw,
        tally.latencies,
    );
    r.unschedulable = tally.unschedulable;
    r.after_metrics_ms = after_metrics_ms;
    Ok(r)
}

/// What the measured attempts did.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    placed_count: usize,
    unschedulable: usize,
    /// Uids of the placed pods (MixedChurn deletes some).
    placed: Vec<String>,
}

impl Tally {
    fn attempt(
        &mut self,
        fw: &crate::framework::Framework,
        snapshot: &mut Snapshot,
        pod: crate::model::Pod,
    ) {
        let t = Instant::now();
        match fw.schedule(&pod, snapshot) {
            Outcome::Scheduled(p) => {
                let mut bound = pod;
                bound.node_name = Some(p.node);
                self.placed.push(bound.uid.clone());
                snapshot.add_pod(p.node_index, Arc::new(bound));
                snapshot.compact_log();
                self.placed_count += 1;
            }
            _ => self.unschedulable += 1,
        }
        self.latencies.push(t.elapsed());
    }
}
