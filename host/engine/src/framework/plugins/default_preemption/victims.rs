//! Victims on one node (upstream `selectVictimsOnNode`): remove every pod
//! of lower priority than the preemptor; if the preemptor then fits,
//! reprieve as many as possible, most important first, trying the pods
//! whose eviction would violate a PodDisruptionBudget before the others.
//! Every "fits" is the profile's whole Filter chain on a what-if copy of
//! the node, with the PreFilter extensions told of each removal and
//! return (so inter-pod affinity, spread and the wasm Filters count).

use std::cmp::Reverse;
use std::sync::Arc;

use crate::framework::nominated::passes_filters;
use crate::framework::{CycleContext, CycleState, FilterRunner, NodeInfo};
use crate::model::budget::DisruptionBudget;
use crate::model::Pod;

use super::budgets::split_by_budget;

/// The victims chosen on a node.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Upstream's order: most important first (the budget-violating
    /// victims first when only one kind was to reprieve, which is the
    /// same order).
    pub victims: Vec<(Arc<Pod>, bool)>,
    /// How many victims violate a budget.
    pub violations: u32,
}

/// Upstream `MoreImportantPod` as a sort key: higher priority, then the
/// earlier start (a pod that has not started counts as starting now, so
/// after every pod that has).
pub fn importance(p: &Pod) -> (Reverse<i32>, i64) {
    (Reverse(p.priority), p.start_ms.unwrap_or(i64::MAX))
}

/// What the dry run works on: copies of the node and the cycle state.
struct WhatIf<'a> {
    ctx: &'a CycleContext<'a>,
    runner: &'a dyn FilterRunner,
    state: CycleState,
    node: NodeInfo,
}

impl WhatIf<'_> {
    fn remove(&mut self, p: &Arc<Pod>) -> Result<(), Vec<String>> {
        if self.node.remove_pod(&p.uid).is_none() {
            return Err(vec![format!("{} is not on the node", p.key())]);
        }
        self.runner
            .remove_pod(self.ctx, &mut self.state, p, &self.node)
            .map_err(|e| vec![e.to_string()])
    }

    fn add(&mut self, p: &Arc<Pod>) -> Result<(), Vec<String>> {
        self.node.add_pod(p.clone());
        self.runner
            .add_pod(self.ctx, &mut self.state, p, &self.node)
            .map_err(|e| vec![e.to_string()])
    }

    fn fits(&self) -> Result<(), Vec<String>> {
        passes_filters(self.runner, self.ctx, &self.state, &self.node).map_err(|r| r.reasons)
    }
}

/// Upstream's reason for a node without pods of lower priority.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// The victims on `node` that make room for the cycle's pod, or why none
/// do, as upstream's per-node status reasons: [`NO_VICTIMS`], or the
/// Filter reasons with every lower-priority pod gone (or a plugin's
/// failure).
pub fn select(
    ctx: &CycleContext,
    state: &CycleState,
    node: &NodeInfo,
    runner: &dyn FilterRunner,
    budgets: &[DisruptionBudget],
) -> Result<Selection, Vec<String>> {
    let priority = ctx.pod.priority;
    let mut w = WhatIf {
        ctx,
        runner,
        state: state.clone(),
        node: node.clone(),
    };
    let mut potential: Vec<Arc<Pod>> = node
        .pods
        .iter()
        .filter(|p| p.priority < priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(vec![NO_VICTIMS.to_string()]);
    }
    for p in &potential {
        w.remove(p)?;
    }
    w.fits()?;
    potential.sort_by_key(|p| importance(p));
    let (violating, fine) = split_by_budget(&potential, budgets);
    // Upstream (since 1.29): with both kinds, the victims are sorted by
    // importance again after the reprieve, so the first is the highest.
    let both = !violating.is_empty() && !fine.is_empty();
    let mut out = Selection {
        victims: Vec::new(),
        violations: 0,
    };
    for (group, violates) in [(violating, true), (fine, false)] {
        for p in group {
            w.add(&p)?;
            if w.fits().is_err() {
                w.remove(&p)?;
                out.violations += u32::from(violates);
                out.victims.push((p, violates));
            }
        }
    }
    if both {
        out.victims.sort_by_key(|(p, _)| importance(p));
    }
    Ok(out)
}
