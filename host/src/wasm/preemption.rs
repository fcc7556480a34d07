//! A wasm plugin in preemption: its Filter in what-if evaluations, and its
//! `post-filter` advice.
//!
//! What-ifs: an instance keeps the cluster resident, so a Filter on a
//! copy of a node with victims removed (or nominated pods added) would
//! see the real node. PreFilter's AddPod/RemovePod record the changes in
//! the cycle state; a Filter with changes recorded applies them to the
//! instance as pod deltas, runs `cycle-start` and `filter`, and applies
//! the reverse deltas, leaving the instance as it was (its cycle is
//! started again by the next ordinary call). Slow, but exact, and only
//! preemption and nominated pods take this path.

use std::sync::Arc;

use crate::framework::{
    Advice, Candidate, Change, CycleContext, CycleState, PluginError, PreemptionAdvisor,
};
use crate::model::priority::deletion_cost;
use crate::model::Pod;

use super::bindings::types as wit;
use super::convert;
use super::plugin::{CallError, CallResult, FailurePolicy, WasmPlugin};

/// The pods a what-if evaluation has moved, relative to the snapshot.
#[derive(Clone, Default)]
pub(super) struct Overlay {
    removed: Vec<(u32, Arc<Pod>)>,
    added: Vec<(u32, Arc<Pod>)>,
}

impl Overlay {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    /// `pod` placed on `node` (a victim returning cancels its removal).
    pub fn add(&mut self, node: u32, pod: &Arc<Pod>) {
        match self.removed.iter().position(|(_, p)| p.uid == pod.uid) {
            Some(i) => {
                self.removed.remove(i);
            }
            None => self.added.push((node, pod.clone())),
        }
    }

    /// `pod` gone from `node`.
    pub fn remove(&mut self, node: u32, pod: &Arc<Pod>) {
        match self.added.iter().position(|(_, p)| p.uid == pod.uid) {
            Some(i) => {
                self.added.remove(i);
            }
            None => self.removed.push((node, pod.clone())),
        }
    }

    /// The changes that make the instance's cluster the what-if one.
    fn forward(&self) -> Vec<Change> {
        let removed = self
            .removed
            .iter()
            .map(|(n, p)| Change::PodRemove(*n, p.uid.clone()));
        let added = self
            .added
            .iter()
            .map(|(n, p)| Change::PodAdd(*n, p.clone()));
        removed.chain(added).collect()
    }

    /// The changes that undo [`Overlay::forward`].
    fn back(&self) -> Vec<Change> {
        let added = self
            .added
            .iter()
            .map(|(n, p)| Change::PodRemove(*n, p.uid.clone()));
        let removed = self
            .removed
            .iter()
            .map(|(n, p)| Change::PodAdd(*n, p.clone()));
        added.chain(removed).collect()
    }
}

impl WasmPlugin {
    pub(super) fn overlay_key(&self) -> String {
        format!("wasm/{}/what-if", self.name)
    }

    /// Records a what-if change (only a plugin with a Filter cares).
    pub(super) fn what_if(&self, state: &mut CycleState, f: impl FnOnce(&mut Overlay)) {
        if !self.module.exports.filter {
            return;
        }
        let key = self.overlay_key();
        if state.read::<Overlay>(&key).is_none() {
            state.write(&key, Overlay::default());
        }
        if let Some(o) = state.read_mut::<Overlay>(&key) {
            f(o);
        }
    }

    /// Filter on the what-if cluster of `overlay`, on this thread's
    /// instance, which is left as it was.
    pub(super) fn call_filter_what_if(
        &self,
        ctx: &CycleContext,
        overlay: &Overlay,
        nodes: &[u32],
    ) -> CallResult<Vec<Option<wit::Rejection>>> {
        let (forward, back) = (overlay.forward(), overlay.back());
        self.with_instance(ctx.snapshot, None, |inst| {
            inst.apply_batches(&convert::deltas(&forward, &inst.interests), false)?;
            inst.cycle = None;
            let record = convert::pod(ctx.pod, &inst.interests);
            let out = match inst.cycle_start(&record)? {
                Ok(plan) if !plan.filter => Ok(vec![None; nodes.len()]),
                Ok(_) => Ok(inst.filter(nodes)?),
                Err(reason) => Err(CallError::Refused(reason)),
            };
            inst.apply_batches(&convert::deltas(&back, &inst.interests), false)?;
            out
        })
    }
}

/// A candidate as the contract's record.
fn candidate(c: &Candidate, keys: &super::interests::Interests) -> wit::Candidate {
    wit::Candidate {
        node: c.node_index,
        victims: c
            .victims
            .iter()
            .map(|v| wit::Victim {
                pod: convert::pod(&v.pod, keys),
                deletion_cost: deletion_cost(&v.pod),
                start_time_ms: v.pod.start_ms.unwrap_or(v.pod.creation_ms),
                violates_budget: v.violates_budget,
            })
            .collect(),
        budget_violations: c.budget_violations,
    }
}

impl PreemptionAdvisor for WasmPlugin {
    fn advise(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        candidates: &[Candidate],
    ) -> Result<Option<Advice>, PluginError> {
        let cycle = Some((ctx.cycle, ctx.pod));
        let advice = self.with_instance(ctx.snapshot, cycle, |inst| {
            let records: Vec<wit::Candidate> = candidates
                .iter()
                .map(|c| candidate(c, &inst.interests))
                .collect();
            Ok(inst.post_filter(&records)?)
        });
        match advice {
            Ok(Some(a)) => Ok(Some(Advice {
                vetoed: a.vetoed,
                ranking: a.ranking,
            })),
            // No export, or the plugin refused the pod at cycle-start
            // (which its Filter already said): no opinion.
            Ok(None) | Err(CallError::Refused(_)) => Ok(None),
            Err(CallError::Failed(f)) => match self.failure_policy() {
                FailurePolicy::Ignore => {
                    self.count_skip();
                    Ok(None)
                }
                FailurePolicy::Fail => Err(PluginError(format!("post-filter failed: {f}"))),
            },
        }
    }
}
