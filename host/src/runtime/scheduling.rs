//! The scheduling loop's thread: waits until this replica leads and the
//! caches are synced, then turns the engine's scheduler
//! ([`crate::scheduler::Scheduler::schedule_one`]) one pod at a time. A
//! cycle is CPU work on the framework's worker pool; the loop holds the
//! cache lock for it, so the snapshot does not change under it (watch
//! updates wait for at most one cycle). What the scheduler decides goes
//! out through [`Outbox`], the runtime's [`Sink`]: bindings to the
//! binder, events and conditions to the reporter, preemptions to the
//! evictor.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::events::{PodRef, Report};
use super::Shared;
use crate::framework::{Cache, Nomination};
use crate::model::Pod;
use crate::scheduler::{Binding, Failure, FailureKind, Sink};

/// Longest sleep when idle, so leadership and shutdown are re-checked.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// Where the loop sends what it decided.
struct Outbox<'a> {
    shared: &'a Shared,
    binds: &'a mpsc::UnboundedSender<Binding>,
    reports: &'a mpsc::UnboundedSender<Report>,
    preemptions: &'a super::preemption::Outlet,
    /// A synchronous preemption the loop waits for after the cycle.
    preempting: Option<std::sync::mpsc::Receiver<()>>,
}

impl Sink for Outbox<'_> {
    fn explains(&self, pod: &Pod) -> bool {
        super::explain::wants(pod)
    }

    fn explained(
        &mut self,
        pod: &Arc<Pod>,
        profile: &str,
        node: Option<&str>,
        explanation: crate::framework::Explanation,
    ) {
        super::explain::record(pod, profile, node, explanation);
    }

    fn bind(&mut self, binding: Binding) {
        let _ = self.binds.send(binding);
    }

    /// Counts the attempt (a Permit rejection was counted when its pod was
    /// scheduled) and reports the failure.
    fn failed(&mut self, f: Failure) {
        super::verbose::failure(&f);
        super::ops_metrics::OpsMetrics::global().failed(&f);
        let message = f.message();
        match &f.kind {
            FailureKind::Unschedulable(_) => {
                tracing::debug!(pod = %f.pod.key(), %message, "unschedulable")
            }
            FailureKind::Error(_) => {
                tracing::warn!(pod = %f.pod.key(), %message, "scheduling error")
            }
            FailureKind::Rejected(_) => {
                tracing::debug!(pod = %f.pod.key(), %message, "rejected at Permit")
            }
        }
        if let Some(result) = f.result() {
            let metrics = &self.shared.metrics;
            metrics
                .schedule_attempts
                .with_label_values(&[result, &f.profile])
                .inc();
            metrics
                .attempt_duration
                .with_label_values(&[result, &f.profile])
                .observe(f.started.elapsed().as_secs_f64());
        }
        let _ = self.reports.send(Report::Failed {
            pod: PodRef::from(&*f.pod),
            message,
            profile: f.profile,
        });
    }

    fn waiting(&mut self, pod: &Arc<Pod>, node: &str, message: &str, profile: &str) {
        tracing::debug!(pod = %pod.key(), %node, "waiting at Permit");
        let _ = self.reports.send(Report::Waiting {
            pod: PodRef::from(&**pod),
            message: message.to_string(),
            profile: profile.to_string(),
        });
    }

    fn preempt(&mut self, pod: &Arc<Pod>, nomination: &Nomination, profile: &str) -> bool {
        let request = super::preemption::Request::new(pod, nomination, profile);
        if self.preemptions.asynchronous {
            return request.send_async(&self.preemptions.tx);
        }
        self.preempting = request.send_sync(&self.preemptions.tx);
        false
    }
}

/// Runs until `shared.stopping` is set.
pub fn run(
    shared: Arc<Shared>,
    binds: mpsc::UnboundedSender<Binding>,
    reports: mpsc::UnboundedSender<Report>,
    preemptions: super::preemption::Outlet,
) {
    let mut out = Outbox {
        shared: &shared,
        binds: &binds,
        reports: &reports,
        preemptions: &preemptions,
        preempting: None,
    };
    let mut cache = shared.cache.lock();
    loop {
        shared.heartbeat();
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        if !(shared.leadership.leading() && shared.synced()) {
            shared.wake.wait_for(&mut cache, IDLE_WAIT);
            continue;
        }
        let now = shared.now_ms();
        let attempted = shared.scheduler.schedule_one(&mut cache, now, &mut out);
        publish(&shared, &cache);
        if let Some(done) = out.preempting.take() {
            // kube-scheduler without SchedulerAsyncPreemption: the
            // evictions are part of the cycle. The watches may update the
            // cache meanwhile.
            parking_lot::MutexGuard::unlocked(&mut cache, || super::preemption::wait_sync(done));
        }
        if attempted {
            cache.snapshot.compact_log();
            // Let the watches and the binder at the cache between cycles.
            parking_lot::MutexGuard::bump(&mut cache);
            continue;
        }
        let wait = shared
            .scheduler
            .next_due(&cache)
            .map(|t| Duration::from_millis(t.saturating_sub(now)))
            .unwrap_or(IDLE_WAIT)
            .min(IDLE_WAIT);
        shared.wake.wait_for(&mut cache, wait);
    }
}

/// The queue's lengths and the assumed pods, as metrics.
fn publish(shared: &Shared, cache: &Cache) {
    shared.metrics.set_queue(cache.queue.lengths());
    shared
        .metrics
        .assumed_pods
        .set(cache.assumed_count() as i64);
}
