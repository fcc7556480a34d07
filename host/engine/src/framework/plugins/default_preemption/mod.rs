//! DefaultPreemption, kube-scheduler 1.20's PostFilter plugin: when a pod
//! fits nowhere, find nodes where evicting pods of lower priority lets it
//! fit, choose victims on each (sparing what can be spared, budgets
//! first), choose one node, and nominate it. The framework then keeps the
//! room for the pod (nominated pods) and the caller evicts the victims.
//!
//! One concept per module: [`args`] (sampling and the deletion-cost
//! option), [`candidates`] (which nodes, in parallel waves), [`victims`]
//! (removal and reprieve on one node), [`budgets`] (PodDisruptionBudget
//! accounting), [`ordering`] (which candidate wins) and [`advice`] (what
//! wasm advisors say). docs/preemption.md describes the rules and where
//! newer upstream releases differ.

pub mod advice;
pub mod args;
pub mod budgets;
pub mod candidates;
pub mod ordering;
pub mod victims;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::framework::explain::{CandidateExplanation, PreemptionExplanation};
use crate::framework::handle::Handle;
use crate::framework::{
    CycleContext, CycleState, FilterRunner, Filtered, Nomination, Plugin, PluginBundle,
    PluginError, PostFilterPlugin, PostFilterResult,
};

pub use args::Args;
use ordering::Ranked;

pub use args::NAME;

/// The plugin.
pub struct DefaultPreemption {
    pub args: Args,
    /// Where the dry run starts (upstream: a random offset); seeded, so
    /// runs repeat.
    rng: Mutex<StdRng>,
}

impl DefaultPreemption {
    pub fn new(args: Args) -> Self {
        Self {
            args,
            rng: Mutex::new(StdRng::seed_from_u64(0x5eed)),
        }
    }
}

/// The registry's factory.
pub fn new(args: Option<&Value>, _handle: &Handle) -> Result<PluginBundle, String> {
    let p = Arc::new(DefaultPreemption::new(Args::parse(args)?));
    Ok(PluginBundle::new(p.clone()).with_post_filter(&p))
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &str {
        NAME
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        filtered: &Filtered,
        runner: &dyn FilterRunner,
    ) -> Result<PostFilterResult, PluginError> {
        let mut explanation = PreemptionExplanation::default();
        let result = self.preempt(ctx, state, filtered, runner, &mut explanation);
        tracing::debug!(pod = %ctx.pod.key(), summary = %explanation.summary, "preemption");
        if runner.recording() {
            runner.record(explanation);
        }
        result
    }

    /// kube-scheduler 1.37 appends `not found` here when the rejection
    /// came before a plugin with PreFilterExtensions (PodTopologySpread,
    /// InterPodAffinity) wrote its state: its DefaultPreemption fails
    /// reading that state (CycleState's `ErrNotFound`), and the error's
    /// text becomes the PostFilter message (`0/3 nodes are available: pod
    /// has unbound immediate PersistentVolumeClaims. not found`). After
    /// them (DynamicResources' rejections), preemption runs and finds no
    /// node it could help. Mirrored so that messages compare equal;
    /// docs/compatibility.md lists it.
    fn after_pre_filter_rejection(
        &self,
        num_nodes: usize,
        states_complete: bool,
    ) -> Option<String> {
        Some(if states_complete {
            format!("preemption: 0/{num_nodes} nodes are available: {num_nodes} {NOT_HELPFUL}.")
        } else {
            "not found".into()
        })
    }
}

/// Nothing to add to the FitError message.
fn none() -> Result<PostFilterResult, PluginError> {
    Ok(PostFilterResult::Unschedulable(String::new()))
}

/// Upstream's reason for the nodes no eviction can help (unresolvable
/// Filter verdicts).
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// Upstream's PostFilter message when it found no candidate (appended to
/// the FitError): `preemption: ` and a FitError of its own over every
/// node, the nodes tried with their reasons, the others
/// [`NOT_HELPFUL`].
fn no_candidate(
    ctx: &CycleContext,
    rejected: &[Vec<String>],
) -> Result<PostFilterResult, PluginError> {
    let mut fit = crate::framework::FitError {
        num_all_nodes: ctx.snapshot.num_nodes(),
        ..Default::default()
    };
    for reasons in rejected {
        reasons.iter().for_each(|r| fit.add(r));
    }
    let absent = fit.num_all_nodes.saturating_sub(rejected.len());
    if absent > 0 {
        *fit.reasons.entry(NOT_HELPFUL.to_string()).or_insert(0) += absent;
    }
    Ok(PostFilterResult::Unschedulable(format!(
        "preemption: {}",
        fit.message()
    )))
}

impl DefaultPreemption {
    fn preempt(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        filtered: &Filtered,
        runner: &dyn FilterRunner,
        e: &mut PreemptionExplanation,
    ) -> Result<PostFilterResult, PluginError> {
        if let Some((why, upstream)) = ineligible(ctx, filtered) {
            e.summary = why;
            return Ok(PostFilterResult::Unschedulable(format!(
                "preemption: {upstream}"
            )));
        }
        if !ctx.snapshot.budgets.synced {
            e.summary = "not preempting until the PodDisruptionBudgets are read".into();
            return none();
        }
        let potential = candidates::potential_nodes(ctx, filtered);
        if potential.is_empty() {
            e.summary = "preemption cannot help: every node rejects the pod for a reason no eviction resolves".into();
            return no_candidate(ctx, &[]);
        }
        let offset = self.rng.lock().random_range(0..potential.len());
        let dry = candidates::find(&self.args, ctx, state, &potential, offset, runner);
        let found = dry.found;
        if found.is_empty() {
            e.summary = format!(
                "no node where evicting pods of lower priority lets the pod fit ({} node(s) tried)",
                potential.len()
            );
            return no_candidate(ctx, &dry.rejected);
        }
        let by_cost = self.args.prefer_lower_deletion_cost;
        let mut ranked = ordering::order(found, by_cost);
        for (i, r) in ranked.iter_mut().enumerate() {
            r.rank = i;
        }
        let (ranked, notes) = advice::advise(ctx, state, runner.advisors(), ranked)?;
        if runner.recording() {
            e.candidates = explain_candidates(&ranked, by_cost);
        }
        let Some(best) = ranked.into_iter().next() else {
            e.summary = format!("advisors vetoed every candidate ({})", notes.join("; "));
            return none();
        };
        e.nominated = Some(best.found.node.clone());
        e.summary = summary(&best, &notes);
        Ok(PostFilterResult::Nominated(nominate(ctx, best)))
    }
}

/// Upstream `PodEligibleToPreemptOthers`: `Some((why not, upstream's
/// message))`.
fn ineligible(ctx: &CycleContext, filtered: &Filtered) -> Option<(String, &'static str)> {
    let pod = ctx.pod;
    if !pod.may_preempt() {
        return Some((
            "the pod's preemptionPolicy is Never".into(),
            "not eligible due to preemptionPolicy=Never.",
        ));
    }
    let nominated = ctx
        .snapshot
        .nominator
        .node_of(&pod.uid)
        .or(pod.nominated_node.as_deref())?;
    let info = ctx.snapshot.by_name(nominated)?;
    if filtered.unresolvable.contains(&info.index) {
        // Its nominated node can never take it: it may preempt again.
        return None;
    }
    info.pods
        .iter()
        .any(|p| p.terminating && p.priority < pod.priority)
        .then(|| {
            (
                format!("waiting for the pods it preempted on {nominated} to terminate"),
                "not eligible due to a terminating pod on the nominated node.",
            )
        })
}

/// The nomination of the winning candidate; lower-priority pods nominated
/// to the same node lose their nomination (upstream
/// `getLowerPriorityNominatedPods`).
fn nominate(ctx: &CycleContext, best: Ranked) -> Nomination {
    let displaced = ctx
        .snapshot
        .nominator
        .for_node(&best.found.node)
        .iter()
        .filter(|p| p.priority < ctx.pod.priority)
        .cloned()
        .collect();
    Nomination {
        node: best.found.node,
        node_index: best.found.node_index,
        victims: best
            .found
            .selection
            .victims
            .into_iter()
            .map(|(p, _)| p)
            .collect(),
        displaced,
        in_memory: Vec::new(),
    }
}

fn summary(best: &Ranked, notes: &[String]) -> String {
    let mut s = format!(
        "nominated {}: evicting {} pod(s) ({} violating a PodDisruptionBudget) lets the pod fit",
        best.found.node, best.count, best.violations
    );
    if !notes.is_empty() {
        s.push_str(&format!("; {}", notes.join("; ")));
    }
    s
}

fn explain_candidates(ranked: &[Ranked], by_cost: bool) -> Vec<CandidateExplanation> {
    ranked
        .iter()
        .enumerate()
        .map(|(i, r)| CandidateExplanation {
            node: r.found.node.clone(),
            victims: r
                .found
                .selection
                .victims
                .iter()
                .map(|(p, _)| p.key())
                .collect(),
            budget_violations: r.violations,
            highest_priority: r.highest,
            priority_sum: r
                .found
                .selection
                .victims
                .iter()
                .map(|(p, _)| i64::from(p.priority))
                .sum(),
            behind_because: i.checked_sub(1).map(|j| {
                let before = &ranked[j];
                if before.rank > r.rank {
                    "ranked lower by an advisor".to_string()
                } else {
                    ordering::why_behind(before, r, by_cost)
                }
            }),
        })
        .collect()
}
