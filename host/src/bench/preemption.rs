//! The preemption workload, after kube-scheduler's `PreemptionAsync`
//! (scheduler_perf): nodes of 4 cpu / 32 GiB / 110 pods, four
//! low-priority pods of 900m on each (placed beforehand), then the
//! measured pods (priority 0, 100m) while a high-priority pod (priority
//! 10, 3000m, so three evictions) arrives every 200 ms. Victims are
//! removed at once (no kubelet, no grace period), so a preemptor is
//! placed on its nominated node after its backoff. The cycle, queue,
//! cache and nominations are the ones `simulate` and `run` use.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as k8s;
use serde_json::json;

use crate::config;
use crate::config::Scheduler;
use crate::framework::Cache;
use crate::model::budget::Budgets;
use crate::model::{Node, Pod};
use crate::scheduler::Collected;

use super::{config_for, BenchResult, Scenario, Spec};

/// Low-priority pods placed on each node before the measurement.
const INIT_PER_NODE: usize = 4;
/// A high-priority pod arrives this often (upstream's churn interval).
const CHURN_MS: u64 = 200;

fn node(i: usize) -> Node {
    let name = format!("node-{i:05}");
    let n: k8s::Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}
    }))
    .expect("bench node");
    Node::from_k8s(&n).expect("bench node is valid")
}

fn pod(name: &str, priority: i32, cpu: &str, node: Option<&str>) -> Pod {
    let p: k8s::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "bench", "uid": name},
        "spec": {"schedulerName": config::DEFAULT_SCHEDULER_NAME, "nodeName": node, "priority": priority,
            "containers": [{"name": "pause", "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}]}
    }))
    .expect("bench pod");
    Pod::from_k8s(&p).expect("bench pod is valid")
}

/// The cluster with the low-priority pods in place and the measured pods
/// queued.
fn cluster(spec: &Spec) -> Cache {
    let mut cache = Cache::default();
    cache.snapshot.budgets = Budgets::complete(Vec::new());
    for i in 0..spec.nodes {
        let n = node(i);
        let name = n.name.clone();
        cache.node_applied(n, 0);
        for k in 0..INIT_PER_NODE {
            let p = pod(&format!("low-{i:05}-{k}"), 0, "900m", Some(&name));
            cache.pod_applied(p, false, |_| true, 0);
        }
    }
    for i in 0..spec.pods {
        let p = pod(&format!("pod-{i:05}"), 0, "100m", None);
        cache.pod_applied(p, false, |_| true, 0);
    }
    cache.snapshot.compact_log();
    cache
}

/// Counts of the run.
#[derive(Default)]
struct Tally {
    measured: usize,
    preemptions: usize,
    latencies: Vec<Duration>,
}

/// One turn of the scheduler: a pod that fits is bound as the watch
/// would confirm it; victims of a preemption leave at once. Returns
/// whether a pod was attempted.
fn turn(scheduler: &Scheduler, cache: &mut Cache, now: u64, t: &mut Tally) -> bool {
    let started = Instant::now();
    let mut out = Collected::default();
    if !scheduler.schedule_one(cache, now, &mut out) {
        return false;
    }
    for b in &out.binds {
        scheduler.bind_at_once(cache, b, now);
        t.measured += usize::from(b.pod().priority == 0);
    }
    for (_, n) in &out.preemptions {
        t.preemptions += 1;
        for v in &n.victims {
            scheduler.pod_deleted(cache, &v.uid, now);
        }
    }
    t.latencies.push(started.elapsed());
    true
}

/// Runs the workload: `spec.nodes` nodes, `spec.pods` measured pods.
pub fn run(spec: Spec, workers: usize, progress: bool) -> anyhow::Result<BenchResult> {
    let scheduler = config::build(
        &config_for(Scenario::Core, workers),
        std::path::Path::new("."),
        spec.seed,
    )?;
    let mut cache = cluster(&spec);
    let bar = super::progress_bar(progress, spec.pods, Scenario::Preemption, workers);
    let mut t = Tally::default();
    let started = Instant::now();
    let mut churned = 0u64;
    while t.measured < spec.pods {
        let now = started.elapsed().as_millis() as u64;
        while churned * CHURN_MS <= now {
            let p = pod(&format!("high-{churned:05}"), 10, "3000m", None);
            cache.pod_applied(p, false, |_| true, now);
            churned += 1;
        }
        let before = t.measured;
        if turn(&scheduler, &mut cache, now, &mut t) {
            bar.inc((t.measured - before) as u64);
            continue;
        }
        match scheduler.next_due(&cache) {
            Some(ready) => std::thread::sleep(Duration::from_millis(
                ready.saturating_sub(now).clamp(1, CHURN_MS),
            )),
            None => break,
        }
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    Ok(super::result(
        super::Run {
            scenario: Scenario::Preemption,
            // The scenario names the workload (its own cluster and pods).
            workload: super::Workload::Mixed,
            spec,
            workers,
            scheduled: t.measured,
            preemptions: t.preemptions,
            elapsed,
        },
        &scheduler.profiles[0],
        t.latencies,
    ))
}
