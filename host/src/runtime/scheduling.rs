//! The scheduling loop: one pod at a time, as kube-scheduler's
//! scheduleOne. It runs on its own thread (a cycle is CPU work on the
//! framework's worker pool) and holds the cache lock for the cycle, so
//! the snapshot does not change under it; watch updates wait for at most
//! one cycle.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::binder::BindRequest;
use super::events::{PodRef, Report};
use super::Shared;
use crate::framework::Outcome;

/// Longest sleep when idle, so leadership and shutdown are re-checked.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// Runs until `shared.stopping` is set.
pub fn run(
    shared: Arc<Shared>,
    binds: mpsc::UnboundedSender<BindRequest>,
    reports: mpsc::UnboundedSender<Report>,
) {
    loop {
        let mut cache = shared.cache.lock();
        let pod = loop {
            shared.heartbeat();
            if shared.stopping.load(Ordering::Acquire) {
                return;
            }
            if shared.leadership.leading() && shared.synced() {
                let now = shared.now_ms();
                for uid in cache.expire_assumed(now) {
                    tracing::warn!(%uid, "binding never confirmed by the watch; reservation dropped");
                }
                if let Some(pod) = cache.pop(now) {
                    break pod;
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
                shared.wake.wait_for(&mut cache, wait);
            } else {
                shared.wake.wait_for(&mut cache, IDLE_WAIT);
            }
        };
        let Some(fw) = shared.scheduler.profile(&pod.scheduler_name) else {
            // Queued only when served; a profile cannot disappear.
            continue;
        };
        let profile = fw.scheduler_name().to_string();
        let started = Instant::now();
        let outcome = fw.schedule(&pod, &cache.snapshot);
        let now = shared.now_ms();
        let metrics = &shared.metrics;
        match outcome {
            Outcome::Scheduled(placement) => {
                let attempts = cache.queue.attempts(&pod.uid);
                cache.queue.done(&pod.uid);
                match cache.assume(&pod, &placement.node) {
                    Some(bound) => {
                        let _ = binds.send(BindRequest {
                            pod: bound,
                            node: placement.node,
                            profile,
                            started,
                            attempts,
                        });
                    }
                    None => cache.requeue(pod.clone(), now),
                }
                metrics.assumed_pods.set(cache.assumed_count() as i64);
            }
            Outcome::Unschedulable(fit) => {
                let message = fit.message();
                tracing::debug!(pod = %pod.key(), %message, "unschedulable");
                cache.queue.add_unschedulable(pod.clone());
                metrics
                    .schedule_attempts
                    .with_label_values(&["unschedulable", &profile])
                    .inc();
                metrics
                    .attempt_duration
                    .with_label_values(&["unschedulable", &profile])
                    .observe(started.elapsed().as_secs_f64());
                let _ = reports.send(Report::Failed {
                    pod: PodRef::from(&*pod),
                    message,
                    profile,
                });
            }
            Outcome::Error(message) => {
                tracing::warn!(pod = %pod.key(), %message, "scheduling error");
                cache.queue.add_backoff(pod.clone(), now);
                metrics
                    .schedule_attempts
                    .with_label_values(&["error", &profile])
                    .inc();
                metrics
                    .attempt_duration
                    .with_label_values(&["error", &profile])
                    .observe(started.elapsed().as_secs_f64());
                let _ = reports.send(Report::Failed {
                    pod: PodRef::from(&*pod),
                    message: format!("error: {message}"),
                    profile,
                });
            }
        }
        cache.snapshot.compact_log();
        metrics.set_queue(cache.queue.lengths());
    }
}
