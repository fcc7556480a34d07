//! Schedule one pod (upstream's scheduleOne), shared by `simulate`, `run`,
//! `bench` and `plugin test`: the cycle; then, for a pod that fits,
//! Reserve, PreBind output and Permit, and the pod assumed in the cache;
//! for one that does not, the unschedulable pool (or backoff after an
//! error). The binding cycle itself (the API calls) is the caller's; it
//! reports back through [`Framework::bound`] or [`Framework::unassume`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::Pod;

use super::cache::Cache;
use super::cycle::{CycleResult, Framework, Outcome, Placement};
use super::cycle_state::CycleState;
use super::explain::Explanation;
use super::fit_error::FitError;
use super::interface::{BindAction, CycleContext, Nomination, Permit};
use super::node_info::NodeInfo;

pub use super::assumption::Assumption;

/// What one attempt did.
#[derive(Debug)]
pub enum Attempt {
    /// Assumed and allowed: run the binding cycle.
    Bind(Box<Assumption>),
    /// Assumed, held at Permit in the framework's waiting pods; it comes
    /// back from [`super::waiting::WaitingPods::take_decided`].
    Waiting { pod: Arc<Pod>, node: String },
    /// Fits nowhere (now in the unschedulable pool). `nomination`: what
    /// PostFilter proposed (preemption).
    Unschedulable {
        pod: Arc<Pod>,
        fit: FitError,
        nomination: Option<Nomination>,
    },
    /// Something went wrong other than fit; the pod backs off.
    Error { pod: Arc<Pod>, message: String },
}

impl Framework {
    /// One attempt for `pod`, popped from `cache`'s queue, at `now_ms`.
    pub fn schedule_pod(
        &self,
        pod: Arc<Pod>,
        cache: &mut Cache,
        now_ms: u64,
        recorder: Option<&mut Explanation>,
    ) -> Attempt {
        self.clock.advance(now_ms);
        let result = self.run_cycle(&pod, &cache.snapshot, recorder);
        let CycleResult {
            outcome,
            state,
            nomination,
            cycle,
        } = result;
        match outcome {
            Outcome::Scheduled(placement) => {
                self.reserve_and_permit(pod, placement, state, cycle, cache, now_ms)
            }
            Outcome::Unschedulable(fit) => {
                cache.queue.add_unschedulable(pod.clone());
                if let Some(n) = &nomination {
                    self.preempting(&pod, n, cache);
                }
                Attempt::Unschedulable {
                    pod,
                    fit,
                    nomination,
                }
            }
            Outcome::Error(message) => {
                cache.queue.add_backoff(pod.clone(), now_ms);
                Attempt::Error { pod, message }
            }
        }
    }

    /// Reserve, PreBind output and Permit, then assume.
    fn reserve_and_permit(
        &self,
        pod: Arc<Pod>,
        placement: Placement,
        mut state: CycleState,
        cycle: u64,
        cache: &mut Cache,
        now_ms: u64,
    ) -> Attempt {
        let prepared = match cache.snapshot.get(placement.node_index) {
            Some(node) => {
                let ctx = CycleContext {
                    pod: &pod,
                    snapshot: &cache.snapshot,
                    cycle,
                    pool: None,
                };
                self.prepare_binding(&ctx, &mut state, node, now_ms)
            }
            None => Err(Refusal::Error(format!("node {} is gone", placement.node))),
        };
        let (actions, waits) = match prepared {
            Ok(p) => p,
            Err(refusal) => return self.refused(pod, refusal, cache, now_ms),
        };
        let attempts = cache.queue.attempts(&pod.uid);
        cache.queue.done(&pod.uid);
        let Some(mut assumed) = cache.assume(&pod, &placement.node) else {
            self.unreserve(&pod, &state, &placement.node);
            cache.requeue(pod.clone(), now_ms);
            let message = format!("node {} is gone", placement.node);
            return Attempt::Error { pod, message };
        };
        for a in &actions {
            if let BindAction::PatchPod {
                labels,
                annotations,
            } = a
            {
                if let Some(p) = cache.patch_assumed(&pod.uid, labels, annotations) {
                    assumed = p;
                }
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
            return Attempt::Bind(assumption);
        }
        self.waiting.add(assumption, waits);
        Attempt::Waiting { pod: assumed, node }
    }

    /// Reserve (each plugin in order), PreBind output, Bind plugins and
    /// Permit. Returns the binding actions and the Permit waits (plugin ->
    /// deadline). A failure undoes the reservations made.
    fn prepare_binding(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
        now_ms: u64,
    ) -> Result<(Vec<BindAction>, BTreeMap<String, u64>), Refusal> {
        let profile = self.profile();
        let undo = |state: &CycleState| self.unreserve(ctx.pod, state, node.name());
        for (i, r) in profile.reserve.iter().enumerate() {
            if let Err(e) = r.reserve(ctx, state, node) {
                for done in profile.reserve[..i].iter().rev() {
                    done.unreserve(ctx.pod, state, node.name());
                }
                return Err(Refusal::Error(format!("plugin {} Reserve: {e}", r.name())));
            }
        }
        let actions = match self.binding_actions(ctx.pod, state, node.name()) {
            Ok(a) => a,
            Err(e) => {
                undo(state);
                return Err(Refusal::Error(e));
            }
        };
        let mut waits = BTreeMap::new();
        for p in &profile.permit {
            match p.permit(ctx, state, node) {
                Ok(Permit::Allow) => {}
                Ok(Permit::Wait(d)) => {
                    waits.insert(p.name().to_string(), now_ms + d.as_millis() as u64);
                }
                Ok(Permit::Reject(reason)) => {
                    undo(state);
                    return Err(Refusal::Unschedulable(reason));
                }
                Err(e) => {
                    undo(state);
                    return Err(Refusal::Error(format!("plugin {} Permit: {e}", p.name())));
                }
            }
        }
        Ok((actions, waits))
    }

    /// PreBind output of every PreBind plugin, then the first Bind plugin
    /// that binds (the default binder: `pods/binding`).
    fn binding_actions(
        &self,
        pod: &Pod,
        state: &CycleState,
        node: &str,
    ) -> Result<Vec<BindAction>, String> {
        let profile = self.profile();
        let mut actions = Vec::new();
        for p in &profile.pre_bind {
            let mut a = p
                .pre_bind(pod, state, node)
                .map_err(|e| format!("plugin {} PreBind: {e}", p.name()))?;
            actions.append(&mut a);
        }
        for b in &profile.bind {
            match b.bind(pod, state, node) {
                Ok(Some(mut a)) => {
                    actions.append(&mut a);
                    return Ok(actions);
                }
                Ok(None) => {}
                Err(e) => return Err(format!("plugin {} Bind: {e}", b.name())),
            }
        }
        actions.push(BindAction::Bind);
        Ok(actions)
    }

    /// A pod whose Reserve, PreBind or Permit refused it.
    fn refused(&self, pod: Arc<Pod>, refusal: Refusal, cache: &mut Cache, now_ms: u64) -> Attempt {
        match refusal {
            Refusal::Unschedulable(reason) => {
                cache.queue.add_unschedulable(pod.clone());
                let fit = FitError {
                    num_all_nodes: cache.snapshot.num_nodes(),
                    pod_reason: Some(reason),
                    ..Default::default()
                };
                Attempt::Unschedulable {
                    pod,
                    fit,
                    nomination: None,
                }
            }
            Refusal::Error(message) => {
                cache.queue.add_backoff(pod.clone(), now_ms);
                Attempt::Error { pod, message }
            }
        }
    }

    /// PostFilter nominated a node (upstream's `PrepareCandidate` minus
    /// the API calls, which are the caller's): the nomination is recorded,
    /// lower-priority nominations there end, and victims held at Permit
    /// are rejected.
    fn preempting(&self, pod: &Pod, n: &Nomination, cache: &mut Cache) {
        cache.nominate(pod, &n.node, &n.displaced);
        for v in &n.victims {
            self.waiting.reject(&v.uid, "preempted");
        }
    }

    /// Every Reserve plugin's Unreserve, in reverse order.
    pub fn unreserve(&self, pod: &Pod, state: &CycleState, node: &str) {
        for r in self.profile().reserve.iter().rev() {
            r.unreserve(pod, state, node);
        }
    }

    /// The binding cycle succeeded: PostBind.
    pub fn bound(&self, a: &Assumption) {
        for p in &self.profile().post_bind {
            p.post_bind(&a.pod, &a.state, &a.placement.node);
        }
    }

    /// The pod will not bind where it was assumed (its binding failed, its
    /// Permit wait ended in a rejection): Unreserve, forget the
    /// assumption, and queue the pod again (to the unschedulable pool
    /// after a rejection, to backoff after an error).
    pub fn unassume(&self, a: &Assumption, cache: &mut Cache, now_ms: u64, rejected: bool) {
        self.clock.advance(now_ms);
        self.unreserve(&a.pod, &a.state, &a.placement.node);
        cache.forget(&a.pod.uid, now_ms);
        if rejected {
            cache.requeue_unschedulable(a.pod.clone());
        } else {
            cache.requeue(a.pod.clone(), now_ms);
        }
    }
}

/// Why a pod that fits was not assumed.
enum Refusal {
    /// Permit rejected it.
    Unschedulable(String),
    /// Reserve, PreBind or Bind failed.
    Error(String),
}
