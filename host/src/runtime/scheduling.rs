//! The scheduling loop: one pod at a time, as kube-scheduler's
//! scheduleOne, through the framework's schedule-one step. It runs on its
//! own thread (a cycle is CPU work on the framework's worker pool) and
//! holds the cache lock for the cycle, so the snapshot does not change
//! under it; watch updates wait for at most one cycle.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::binder::BindRequest;
use super::events::{PodRef, Report};
use super::Shared;
use crate::framework::{Attempt, Cache, Framework, WaitEnd};
use crate::model::Pod;

/// Longest sleep when idle, so leadership and shutdown are re-checked.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// How often assumed pods are checked for expiry (upstream's
/// `cleanAssumedPeriod`); checking per cycle would walk every pod in
/// flight once per pod.
const EXPIRY_PERIOD_MS: u64 = 1000;

/// Where the loop sends what it decided.
struct Outbox {
    binds: mpsc::UnboundedSender<BindRequest>,
    reports: mpsc::UnboundedSender<Report>,
    preemptions: mpsc::UnboundedSender<super::preemption::Request>,
}

/// Runs until `shared.stopping` is set.
pub fn run(
    shared: Arc<Shared>,
    binds: mpsc::UnboundedSender<BindRequest>,
    reports: mpsc::UnboundedSender<Report>,
    preemptions: mpsc::UnboundedSender<super::preemption::Request>,
) {
    let out = Outbox {
        binds,
        reports,
        preemptions,
    };
    let mut next_expiry = 0;
    loop {
        let mut cache = shared.cache.lock();
        let Some(pod) = next_pod(&shared, &mut cache, &out, &mut next_expiry) else {
            return;
        };
        let Some(fw) = shared.scheduler.profile(&pod.scheduler_name) else {
            // Queued only when served; a profile cannot disappear.
            continue;
        };
        let started = Instant::now();
        let now = shared.now_ms();
        let attempt = fw.schedule_pod(pod, &mut cache, now, None);
        if let Attempt::Unschedulable {
            pod,
            nomination: Some(n),
            ..
        } = &attempt
        {
            let request = super::preemption::Request::new(pod, n, fw.scheduler_name());
            let _ = out.preemptions.send(request);
        }
        record(&shared, fw, attempt, started, &out);
        shared
            .metrics
            .assumed_pods
            .set(cache.assumed_count() as i64);
        cache.snapshot.compact_log();
        shared.metrics.set_queue(cache.queue.lengths());
    }
}

/// Waits (lock released meanwhile) until this replica leads, the caches
/// are synced and a pod is due; `None` when stopping.
fn next_pod(
    shared: &Shared,
    cache: &mut parking_lot::MutexGuard<'_, Cache>,
    out: &Outbox,
    next_expiry: &mut u64,
) -> Option<Arc<Pod>> {
    loop {
        shared.heartbeat();
        if shared.stopping.load(Ordering::Acquire) {
            return None;
        }
        if !(shared.leadership.leading() && shared.synced()) {
            shared.wake.wait_for(cache, IDLE_WAIT);
            continue;
        }
        let now = shared.now_ms();
        if now >= *next_expiry {
            *next_expiry = now + EXPIRY_PERIOD_MS;
            for uid in cache.expire_assumed(now) {
                tracing::warn!(%uid, "binding never confirmed by the watch; reservation dropped");
            }
        }
        end_waits(shared, cache, now, out);
        let groups = &shared.scheduler.pod_groups;
        if groups.enabled() {
            let activate = groups.take_activations(now);
            cache.queue.activate(&activate);
        }
        if let Some(pod) = cache.pop(now) {
            return Some(pod);
        }
        shared.metrics.set_queue(cache.queue.lengths());
        shared
            .metrics
            .assumed_pods
            .set(cache.assumed_count() as i64);
        let wait = cache
            .queue
            .next_backoff_ready()
            .map(|t| Duration::from_millis(t.saturating_sub(now)))
            .unwrap_or(IDLE_WAIT)
            .min(IDLE_WAIT);
        shared.wake.wait_for(cache, wait);
    }
}

/// Pods whose Permit wait ended: to the binder, or unreserved.
fn end_waits(shared: &Shared, cache: &mut Cache, now: u64, out: &Outbox) {
    for fw in &shared.scheduler.profiles {
        for (a, end) in fw.waiting.take_decided(now) {
            match end {
                WaitEnd::Allowed => {
                    let _ = out.binds.send(BindRequest {
                        assumption: a,
                        profile: fw.scheduler_name().to_string(),
                        started: Instant::now(),
                    });
                }
                WaitEnd::Rejected(message) => {
                    fw.unassume(&a, cache, now, true);
                    let _ = out.reports.send(Report::Failed {
                        pod: PodRef::from(&*a.pod),
                        message,
                        profile: fw.scheduler_name().to_string(),
                    });
                }
            }
        }
    }
}

/// Sends what an attempt decided on, and counts it.
fn record(shared: &Shared, fw: &Framework, attempt: Attempt, started: Instant, out: &Outbox) {
    let profile = fw.scheduler_name().to_string();
    let (result, pod, message) = match attempt {
        Attempt::Bind(assumption) => {
            let _ = out.binds.send(BindRequest {
                assumption,
                profile,
                started,
            });
            return;
        }
        Attempt::Waiting { pod, node } => {
            tracing::debug!(pod = %pod.key(), %node, "waiting at Permit");
            let message = shared
                .scheduler
                .pod_groups
                .waiting_message(&pod, &node)
                .unwrap_or_else(|| format!("Reserved on {node}; waiting at Permit"));
            let _ = out.reports.send(Report::Waiting {
                pod: PodRef::from(&*pod),
                message,
                profile,
            });
            return;
        }
        Attempt::Unschedulable { pod, fit, .. } => {
            let message = fit.message();
            tracing::debug!(pod = %pod.key(), %message, "unschedulable");
            ("unschedulable", pod, message)
        }
        Attempt::Error { pod, message } => {
            tracing::warn!(pod = %pod.key(), %message, "scheduling error");
            ("error", pod, format!("error: {message}"))
        }
    };
    let metrics = &shared.metrics;
    metrics
        .schedule_attempts
        .with_label_values(&[result, &profile])
        .inc();
    metrics
        .attempt_duration
        .with_label_values(&[result, &profile])
        .observe(started.elapsed().as_secs_f64());
    let _ = out.reports.send(Report::Failed {
        pod: PodRef::from(&*pod),
        message,
        profile,
    });
}
