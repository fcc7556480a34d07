//! The Scheduler (upstream's `pkg/scheduler`: `scheduler.go` and
//! `schedule_one.go`): it owns the profiles and drives the loop over the
//! cache and its queue — pop, the profile's cycle, Reserve and Permit,
//! assume, and the hand-off to the binding cycle — for every driver
//! (`simulate`, `run`, `bench`, `plugin test`). The drivers feed it the
//! cluster (through the [`Cache`]) and receive its decisions through a
//! [`Sink`]; the framework ([`Framework`]) only runs plugins.

mod binding;
mod events;
mod sink;
#[cfg(test)]
mod tests;

pub use binding::BindingResult;
pub use sink::{Binding, Collected, Failure, FailureKind, Sink};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::framework::cycle::{CycleResult, Outcome, Placement};
use crate::framework::queue::{Backoff, PreEnqueue, SchedulingQueue};
use crate::framework::{
    Assumption, Cache, CycleState, Explanation, Framework, SchedulingError, WaitEnd,
};
use crate::model::Pod;

/// How often assumed pods are checked for expiry (upstream's
/// `cleanAssumedPeriod`); checking every turn would walk every pod in
/// flight once per pod.
const EXPIRY_PERIOD_MS: u64 = 1000;

/// Every profile, and the loop that schedules their pods.
pub struct Scheduler {
    pub profiles: Vec<Framework>,
    /// The first profile schedules pods whatever their `schedulerName`
    /// (`simulate --all-pods`).
    all_pods: AtomicBool,
    /// When assumed pods are next checked for expiry.
    next_expiry: AtomicU64,
    /// The queue's backoff (`podInitialBackoffSeconds`, `podMaxBackoffSeconds`).
    backoff: Backoff,
}

impl Scheduler {
    pub fn new(profiles: Vec<Framework>) -> Self {
        Self {
            profiles,
            all_pods: AtomicBool::new(false),
            next_expiry: AtomicU64::new(0),
            backoff: Backoff::default(),
        }
    }

    /// The same scheduler whose queue backs pods off by `backoff`.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The queue's backoff.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Whether the first profile schedules every pending pod, whatever
    /// its `schedulerName` (the what-if question of `simulate --all-pods`
    /// on a dump of a live cluster).
    pub fn set_all_pods(&self, all: bool) {
        self.all_pods.store(all, Ordering::Relaxed);
    }

    /// Whether a pending pod with this `schedulerName` is scheduled here.
    pub fn serves(&self, scheduler_name: &str) -> bool {
        self.all_pods.load(Ordering::Relaxed) || self.profile(scheduler_name).is_some()
    }

    /// An empty cache whose queue sorts pods with the profiles' QueueSort
    /// plugin (the one other than PrioritySort, if any) and holds them at
    /// their PreEnqueue plugins.
    pub fn new_cache(&self) -> Cache {
        let sort = self
            .profiles
            .first()
            .and_then(|fw| fw.profile().queue_sort.clone());
        let pre_enqueue = PreEnqueue {
            profiles: self
                .profiles
                .iter()
                .map(|fw| {
                    (
                        fw.scheduler_name().to_string(),
                        fw.profile().pre_enqueue.clone(),
                    )
                })
                .collect(),
        };
        Cache::new(SchedulingQueue::with_plugins(sort, pre_enqueue).with_backoff(self.backoff))
    }

    /// The profile serving `scheduler_name`.
    pub fn profile(&self, scheduler_name: &str) -> Option<&Framework> {
        self.profiles
            .iter()
            .find(|f| f.scheduler_name() == scheduler_name)
    }

    /// One turn of the loop at `now_ms`: assumed pods whose binding never
    /// showed expire (when due), Permit waits that ended go to the sink
    /// (bind) or back to the queue, and the next due pod, if any, is
    /// attempted. Returns whether a pod was attempted; when not, nothing
    /// is due before [`Scheduler::next_due`].
    ///
    pub fn schedule_one(&self, cache: &mut Cache, now_ms: u64, sink: &mut dyn Sink) -> bool {
        self.expire_assumed(cache, now_ms);
        self.end_waits(cache, now_ms, sink);
        self.activate(cache, now_ms);
        let Some(pod) = cache.pop(now_ms) else {
            return false;
        };
        match self.route(&pod) {
            Some(fw) => self.attempt(fw, pod, cache, now_ms, sink),
            // Queued only when served; a profile cannot disappear.
            None => {
                tracing::warn!(pod = %pod.key(), "no profile serves the pod; dropped from the queue")
            }
        }
        true
    }

    /// When something queued can next be attempted: a backoff ends, or a
    /// Permit wait times out.
    pub fn next_due(&self, cache: &Cache) -> Option<u64> {
        let waits = self
            .profiles
            .iter()
            .filter_map(|fw| fw.waiting.next_deadline())
            .min();
        cache
            .queue
            .next_backoff_ready()
            .into_iter()
            .chain(waits)
            .min()
    }

    /// The profile that schedules `pod`: the first with `--all-pods`,
    /// else the one its `schedulerName` names.
    pub fn route(&self, pod: &Pod) -> Option<&Framework> {
        if self.all_pods.load(Ordering::Relaxed) {
            self.profiles.first()
        } else {
            self.profile(&pod.scheduler_name)
        }
    }

    /// Pods the profiles' plugins ask to move to the active queue.
    fn activate(&self, cache: &mut Cache, now_ms: u64) {
        let mut uids = std::collections::HashSet::new();
        self.each_informer(|i| uids.extend(i.pods_to_activate(now_ms)));
        if !uids.is_empty() {
            cache.queue.activate(&uids);
        }
    }

    fn expire_assumed(&self, cache: &mut Cache, now_ms: u64) {
        if now_ms < self.next_expiry.load(Ordering::Relaxed) {
            return;
        }
        self.next_expiry
            .store(now_ms + EXPIRY_PERIOD_MS, Ordering::Relaxed);
        for uid in cache.expire_assumed(now_ms) {
            tracing::warn!(%uid, "binding never confirmed by the watch; reservation dropped");
        }
    }

    /// Pods whose Permit wait ended: to the binding cycle, or back to the
    /// unschedulable pool with their reservation undone.
    fn end_waits(&self, cache: &mut Cache, now_ms: u64, sink: &mut dyn Sink) {
        for fw in &self.profiles {
            for (a, end) in fw.waiting.take_decided(now_ms) {
                let profile = fw.scheduler_name().to_string();
                match end {
                    WaitEnd::Allowed => sink.bind(Binding {
                        assumption: a,
                        profile,
                        started: Instant::now(),
                    }),
                    WaitEnd::Rejected(reason) => {
                        self.unassume(fw, &a, cache, now_ms, true);
                        sink.failed(Failure {
                            pod: a.pod.clone(),
                            profile,
                            kind: FailureKind::Rejected(reason),
                            started: Instant::now(),
                        });
                    }
                }
            }
        }
    }

    /// One attempt for `pod` with profile `fw` (upstream's
    /// `scheduleOne`): the cycle; then, for a pod that fits, Reserve,
    /// PreBind output and Permit, and the pod assumed; for one that does
    /// not, the unschedulable pool (and PostFilter's nomination), or
    /// backoff after an error.
    fn attempt(
        &self,
        fw: &Framework,
        pod: Arc<Pod>,
        cache: &mut Cache,
        now_ms: u64,
        sink: &mut dyn Sink,
    ) {
        let started = Instant::now();
        fw.clock.advance(now_ms);
        let mut explanation = sink.explains(&pod).then(Explanation::default);
        let CycleResult {
            outcome,
            state,
            nomination,
            cycle,
        } = fw.run_cycle(&pod, &cache.snapshot, explanation.as_mut());
        let profile = fw.scheduler_name().to_string();
        let mut node = None;
        match outcome {
            Outcome::Scheduled(placement) => {
                node = self.assume(
                    fw,
                    pod.clone(),
                    placement,
                    state,
                    cycle,
                    cache,
                    now_ms,
                    sink,
                    started,
                );
            }
            Outcome::Unschedulable(fit) => {
                cache.queue.add_unschedulable(pod.clone());
                if let Some(mut n) = nomination {
                    // Upstream's `PrepareCandidate` minus the API calls
                    // (the sink's): the nomination is recorded,
                    // lower-priority nominations there end, and victims
                    // held at Permit are rejected (preempted in memory).
                    cache.nominate(&pod, &n.node, &n.displaced);
                    n.in_memory = n
                        .victims
                        .iter()
                        .filter(|v| fw.waiting.reject(&v.uid, "preempted"))
                        .map(|v| v.uid.clone())
                        .collect();
                    if sink.preempt(&pod, &n, &profile) {
                        cache.queue.hold_preempting(&pod.uid);
                    }
                }
                sink.failed(Failure {
                    pod: pod.clone(),
                    profile: profile.clone(),
                    kind: FailureKind::Unschedulable(fit),
                    started,
                });
            }
            Outcome::Error(message) => {
                cache.queue.add_backoff(pod.clone(), now_ms);
                sink.failed(Failure {
                    pod: pod.clone(),
                    profile: profile.clone(),
                    kind: FailureKind::Error(message),
                    started,
                });
            }
        }
        if let Some(e) = explanation {
            sink.explained(&pod, &profile, node.as_deref(), e);
        }
    }

    /// Reserve, PreBind output and Permit for a pod that fits, then the
    /// pod assumed: handed to the binding cycle, or held at Permit.
    /// Returns the node when the pod went to its binding cycle.
    #[allow(clippy::too_many_arguments)]
    fn assume(
        &self,
        fw: &Framework,
        pod: Arc<Pod>,
        placement: Placement,
        mut state: CycleState,
        cycle: u64,
        cache: &mut Cache,
        now_ms: u64,
        sink: &mut dyn Sink,
        started: Instant,
    ) -> Option<String> {
        let profile = fw.scheduler_name().to_string();
        let fail = |cache: &mut Cache, sink: &mut dyn Sink, kind: FailureKind| {
            match &kind {
                FailureKind::Error(_) => cache.queue.add_backoff(pod.clone(), now_ms),
                _ => cache.queue.add_unschedulable(pod.clone()),
            }
            sink.failed(Failure {
                pod: pod.clone(),
                profile: profile.clone(),
                kind,
                started,
            });
        };
        let prepared = match cache.snapshot.get(placement.node_index) {
            Some(node) => {
                fw.prepare_binding(&pod, &cache.snapshot, cycle, &mut state, node, now_ms)
            }
            None => Err(crate::framework::Refusal::Error(SchedulingError::NodeGone(
                placement.node.clone(),
            ))),
        };
        let (actions, waits) = match prepared {
            Ok(p) => p,
            Err(refusal) => {
                let kind = match refusal {
                    crate::framework::Refusal::Unschedulable(reason) => {
                        FailureKind::Unschedulable(crate::framework::FitError {
                            num_all_nodes: cache.snapshot.num_nodes(),
                            pod_reason: Some(reason),
                            ..Default::default()
                        })
                    }
                    crate::framework::Refusal::Error(e) => FailureKind::Error(e),
                };
                fail(cache, sink, kind);
                return None;
            }
        };
        let attempts = cache.queue.attempts(&pod.uid);
        cache.queue.done(&pod.uid);
        let Some(mut assumed) = cache.assume(&pod, &placement.node) else {
            fw.unreserve(&pod, &state, &placement.node);
            cache.requeue(pod.clone(), now_ms);
            sink.failed(Failure {
                pod: pod.clone(),
                profile,
                kind: FailureKind::Error(SchedulingError::NodeGone(placement.node.clone())),
                started,
            });
            return None;
        };
        for (labels, annotations) in actions.iter().filter_map(|a| a.pod_patch()) {
            if let Some(p) = cache.patch_assumed(&pod.uid, labels, annotations) {
                assumed = p;
            }
        }
        let node = placement.node.clone();
        let assumption = Box::new(Assumption {
            pod: assumed.clone(),
            placement,
            state,
            actions,
            attempts,
        });
        if waits.is_empty() {
            sink.bind(Binding {
                assumption,
                profile,
                started,
            });
            return Some(node);
        }
        let message = fw.waiting_message(&assumed, &node);
        fw.waiting.add(assumption, waits);
        sink.waiting(&assumed, &node, &message, &profile);
        None
    }

    /// The evictions of `uid`'s preemption, which [`Sink::preempt`] said
    /// would go on after its cycle, are done (`failed`: some failed): the
    /// pod may be attempted again (upstream: the async preemption
    /// goroutine ends; on failure it `Activate`s the pod).
    pub fn preemption_finished(&self, cache: &mut Cache, uid: &str, failed: bool, now_ms: u64) {
        cache.queue.preemption_finished(uid, failed, now_ms);
    }

    /// The pod will not bind where it was assumed (its binding failed, its
    /// Permit wait ended in a rejection): Unreserve, forget the
    /// assumption, and queue the pod again (to the unschedulable pool
    /// after a rejection, to backoff after an error).
    fn unassume(
        &self,
        fw: &Framework,
        a: &Assumption,
        cache: &mut Cache,
        now_ms: u64,
        rejected: bool,
    ) {
        fw.clock.advance(now_ms);
        fw.unreserve(&a.pod, &a.state, &a.placement.node);
        cache.forget(&a.pod.uid, now_ms);
        if rejected {
            cache.requeue_unschedulable(a.pod.clone());
        } else {
            cache.requeue(a.pod.clone(), now_ms);
        }
    }
}
