//! A wasm plugin behind the framework's extension-point traits: the
//! contract's `cycle-start` is PreFilter (and the plan it returns is the
//! Skip of Filter and PreScore), `filter` and `score` take batches of node
//! indices, and the plugin's `failurePolicy` decides what a failure does:
//!
//! - `Fail`: the nodes being evaluated are rejected with `plugin <name>
//!   failed: <cause>` (unresolvable), and the plugin is not called again in
//!   that cycle; a failure at Score, Reserve or Permit fails the cycle;
//! - `Ignore`: the plugin is skipped for the pod (counted).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::framework::{
    BindAction, CycleContext, CycleState, Decision, DeviceRanker, FilterPlugin, NodeInfo, Permit,
    PermitPlugin, Plugin, PluginBundle, PluginError, PluginHealth, PreBindPlugin, PreFilterPlugin,
    PreScorePlugin, RankInput, Rejection, ReservePlugin, ScorePlugin,
};
use crate::model::Pod;

use super::bindings::types as wit;
use super::error::PluginFailure;
use super::plugin::{check_scores, CallError, FailurePolicy, WasmPlugin, ALL};

/// The extension points `plugin` takes part in, by its exports.
pub fn bundle(plugin: Arc<WasmPlugin>) -> PluginBundle {
    let e = plugin.module.exports;
    let mut b = PluginBundle::new(plugin.clone())
        .with_pre_filter(&plugin)
        .with_pre_score(&plugin);
    if e.filter {
        b = b.with_filter(&plugin);
    }
    if e.score {
        b = b.with_score(&plugin);
    }
    if e.reserve || e.pre_bind {
        b = b.with_reserve(&plugin).with_pre_bind(&plugin);
    }
    if e.permit {
        b = b.with_permit(&plugin);
    }
    if e.post_filter {
        b = b.with_preemption_advisor(&plugin);
    }
    if e.device_rank || e.node_device_rank {
        b = b.with_device_ranker(&plugin);
    }
    b
}

/// The plugin's part of the CycleState.
#[derive(Clone)]
struct WasmCycle {
    plan: wit::CyclePlan,
    trouble: Arc<Trouble>,
}

/// A failure earlier in the cycle, shared by the workers.
#[derive(Default)]
struct Trouble {
    /// `Fail`: the message every further node gets.
    failed: Mutex<Option<String>>,
    /// `Ignore`: the plugin is skipped for this pod.
    ignored: AtomicBool,
}

/// What Reserve chose, for PreBind and Unreserve.
#[derive(Clone)]
struct Reservation {
    node: u32,
    patch: wit::PodPatch,
}

impl WasmPlugin {
    fn cycle_key(&self) -> String {
        format!("wasm/{}", self.name)
    }

    fn reservation_key(&self) -> String {
        format!("wasm/{}/reservation", self.name)
    }

    /// This cycle's plan and trouble (a plugin that could not say runs
    /// every point).
    fn cycle_of(&self, state: &CycleState) -> WasmCycle {
        state
            .read::<WasmCycle>(&self.cycle_key())
            .cloned()
            .unwrap_or_else(|| WasmCycle {
                plan: ALL,
                trouble: Arc::default(),
            })
    }

    /// `Ignore`: marks the pod skipped (counted once). `Fail`: the message.
    fn on_failure(&self, trouble: &Trouble, failure: &PluginFailure) -> Option<String> {
        match self.failure_policy() {
            FailurePolicy::Ignore => {
                if !trouble.ignored.swap(true, Ordering::Relaxed) {
                    self.count_skip();
                }
                None
            }
            FailurePolicy::Fail => Some(format!("plugin {} failed: {failure}", self.name)),
        }
    }
}

impl Plugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn health(&self) -> Option<PluginHealth> {
        Some(self.health_report())
    }
}

impl PreFilterPlugin for WasmPlugin {
    /// AddPod / RemovePod: the plugin's resident state follows what-ifs.
    fn has_extensions(&self) -> bool {
        true
    }

    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let plan = match self.cycle_start(ctx.snapshot, ctx.cycle, ctx.pod) {
            Ok(plan) => plan,
            Err(CallError::Refused(reason)) => return Err(Rejection::unresolvable(reason)),
            // A failing plugin is dealt with per node (Fail) or skipped
            // (Ignore) by Filter and Score, which retry on a fresh
            // instance; here it must not decide the pod's fate alone.
            Err(_) => ALL,
        };
        let cycle = WasmCycle {
            plan,
            trouble: Arc::default(),
        };
        state.write(&self.cycle_key(), cycle);
        Ok(if plan.filter && self.module.exports.filter {
            Decision::Run
        } else {
            Decision::Skip
        })
    }

    /// AddPod: recorded for the what-if Filter (see `wasm::preemption`).
    fn add_pod(
        &self,
        _ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        self.what_if(state, |o| o.add(node.index, pod));
        Ok(())
    }

    /// RemovePod: recorded for the what-if Filter.
    fn remove_pod(
        &self,
        _ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        self.what_if(state, |o| o.remove(node.index, pod));
        Ok(())
    }
}

/// Every node of the batch gets `reason`.
fn reject_all(out: &mut [Option<Rejection>], reason: &str) {
    out.iter_mut()
        .for_each(|o| *o = Some(Rejection::unresolvable(reason)));
}

impl FilterPlugin for WasmPlugin {
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        let mut out = [None];
        self.filter_batch(ctx, state, &[node], &mut out);
        out[0].take().map_or(Ok(()), Err)
    }

    fn filter_batch(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        nodes: &[&NodeInfo],
        out: &mut [Option<Rejection>],
    ) {
        let cycle = self.cycle_of(state);
        if cycle.trouble.ignored.load(Ordering::Relaxed) {
            return;
        }
        if let Some(msg) = cycle.trouble.failed.lock().clone() {
            return reject_all(out, &msg);
        }
        let idx: Vec<u32> = nodes.iter().map(|n| n.index).collect();
        let overlay = state
            .read::<super::preemption::Overlay>(&self.overlay_key())
            .filter(|o| !o.is_empty());
        let verdicts = match overlay {
            Some(o) => self.call_filter_what_if(ctx, o, &idx),
            None => self.call_filter(ctx.snapshot, ctx.cycle, ctx.pod, &idx),
        };
        match verdicts {
            Ok(verdicts) => {
                for (o, v) in out.iter_mut().zip(verdicts) {
                    *o = v.map(|r| Rejection {
                        reasons: vec![r.reason],
                        unresolvable: r.unresolvable,
                        error: false,
                    });
                }
            }
            Err(CallError::Refused(pod_reason)) => reject_all(out, &pod_reason),
            Err(CallError::Failed(failure)) => {
                if let Some(msg) = self.on_failure(&cycle.trouble, &failure) {
                    *cycle.trouble.failed.lock() = Some(msg.clone());
                    reject_all(out, &msg);
                }
            }
        }
    }
}

impl PreScorePlugin for WasmPlugin {
    /// Upstream's Skip: the plugin said Score does not matter for this pod.
    fn pre_score(
        &self,
        _ctx: &CycleContext,
        state: &mut CycleState,
        _feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError> {
        let cycle = self.cycle_of(state);
        let run = cycle.plan.score
            && self.module.exports.score
            && !cycle.trouble.ignored.load(Ordering::Relaxed);
        Ok(if run { Decision::Run } else { Decision::Skip })
    }
}

impl ScorePlugin for WasmPlugin {
    fn score(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let mut out = [0];
        self.score_batch(ctx, state, &[node], &mut out)?;
        Ok(out[0])
    }

    /// One batch on the scheduling thread's instance, which already holds
    /// the cycle from PreFilter: spreading Score over the workers would
    /// make each worker's instance run `cycle-start` first, which can cost
    /// more than scoring (docs/contract.md).
    fn parallel(&self) -> bool {
        false
    }

    fn score_batch(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<Decision, PluginError> {
        let cycle = self.cycle_of(state);
        let idx: Vec<u32> = nodes.iter().map(|n| n.index).collect();
        let raw = match self.call_score(ctx.snapshot, ctx.cycle, ctx.pod, &idx) {
            Ok(v) => v,
            Err(CallError::Refused(reason)) => {
                return Err(PluginError(format!("refused the pod: {reason}")))
            }
            Err(CallError::Failed(f)) => return self.score_failure(&cycle, &f),
        };
        out.copy_from_slice(&raw);
        Ok(Decision::Run)
    }

    fn normalize(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        let cycle = self.cycle_of(state);
        let idx: Vec<u32> = nodes.iter().map(|n| n.index).collect();
        match self.call_normalize(ctx.snapshot, ctx.cycle, ctx.pod, &idx, scores) {
            Ok(Some(v)) => scores.copy_from_slice(&v),
            Ok(None) => {}
            Err(CallError::Refused(reason)) => {
                return Err(PluginError(format!("refused the pod: {reason}")))
            }
            Err(CallError::Failed(f)) => return self.score_failure(&cycle, &f),
        }
        if let Err(f) = check_scores(scores) {
            self.record_failure(&f);
            return self.score_failure(&cycle, &f);
        }
        Ok(Decision::Run)
    }
}

impl WasmPlugin {
    /// A Score failure: skipped (`Ignore`) or the cycle's error (`Fail`).
    fn score_failure(&self, cycle: &WasmCycle, f: &PluginFailure) -> Result<Decision, PluginError> {
        match self.on_failure(&cycle.trouble, f) {
            None => Ok(Decision::Skip),
            Some(_) => Err(PluginError(f.to_string())),
        }
    }

    /// A failure after Filter and Score (Reserve, Permit): `Ignore` lets
    /// the pod pass; `Fail` fails the cycle.
    fn late_failure(&self, f: &PluginFailure) -> Result<(), PluginError> {
        match self.failure_policy() {
            FailurePolicy::Ignore => {
                self.count_skip();
                Ok(())
            }
            FailurePolicy::Fail => Err(PluginError(f.to_string())),
        }
    }
}

impl ReservePlugin for WasmPlugin {
    fn reserve(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        match self.call_reserve(ctx.snapshot, ctx.cycle, ctx.pod, node.index) {
            Ok(patch) => {
                let r = Reservation {
                    node: node.index,
                    patch,
                };
                state.write(&self.reservation_key(), r);
                Ok(())
            }
            Err(CallError::Refused(reason)) => Err(PluginError(reason)),
            Err(CallError::Failed(f)) => self.late_failure(&f),
        }
    }

    fn unreserve(&self, pod: &Pod, state: &CycleState, _node: &str) {
        let Some(r) = state.read::<Reservation>(&self.reservation_key()) else {
            return;
        };
        if let Some(Err(f)) = self.with_current(|i| i.unreserve(&pod.uid, r.node)) {
            tracing::warn!(plugin = %self.name, pod = %pod.key(), failure = %f, "unreserve failed");
        }
    }
}

impl PreBindPlugin for WasmPlugin {
    fn pre_bind(
        &self,
        _pod: &Pod,
        state: &CycleState,
        _node: &str,
    ) -> Result<Vec<BindAction>, PluginError> {
        let Some(r) = state.read::<Reservation>(&self.reservation_key()) else {
            return Ok(Vec::new());
        };
        if r.patch.labels.is_empty() && r.patch.annotations.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![BindAction::PatchPod {
            labels: r.patch.labels.clone(),
            annotations: r.patch.annotations.clone(),
        }])
    }
}

impl PermitPlugin for WasmPlugin {
    fn permit(
        &self,
        ctx: &CycleContext,
        _state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<Permit, PluginError> {
        let result = match self.call_permit(ctx.snapshot, ctx.cycle, ctx.pod, node.index) {
            Ok(r) => r,
            Err(CallError::Refused(reason)) => return Ok(Permit::Reject(reason)),
            Err(CallError::Failed(f)) => return self.late_failure(&f).map(|_| Permit::Allow),
        };
        for uid in &result.allow_waiting {
            self.handle.waiting.allow(uid, &self.name);
        }
        Ok(match result.decision {
            wit::PermitDecision::Allow => Permit::Allow,
            wit::PermitDecision::Wait(ms) => Permit::Wait(Duration::from_millis(ms.into())),
            wit::PermitDecision::Reject(reason) => Permit::Reject(reason),
        })
    }
}

impl DeviceRanker for WasmPlugin {
    /// A failure follows the failure policy's spirit without stopping the
    /// pod: `Ignore` abstains (counted); `Fail` reports the error, and
    /// DynamicResources falls back to the first fit for the node.
    fn rank_devices(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
        input: &RankInput,
    ) -> Result<Vec<u8>, PluginError> {
        let cycle = self.cycle_of(state);
        if cycle.trouble.ignored.load(Ordering::Relaxed) {
            return Ok(Vec::new());
        }
        let call = self.call_rank_devices(ctx.snapshot, ctx.cycle, ctx.pod, node.index, input);
        match call {
            Ok(ranks) => Ok(ranks),
            Err(CallError::Refused(reason)) => Err(PluginError(reason)),
            Err(CallError::Failed(f)) => match self.on_failure(&cycle.trouble, &f) {
                Some(msg) => Err(PluginError(msg)),
                None => Ok(Vec::new()),
            },
        }
    }
}
