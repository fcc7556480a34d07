//! The nominated pods a cycle's pod must leave room for, added to a
//! node for Filter (upstream's `addNominatedPods` and
//! `PodPassesFiltersOnNode`). The nominations themselves are the
//! snapshot's `Nominator`.

use std::sync::Arc;

use crate::model::Pod;

use super::context::CycleContext;
use super::cycle_state::CycleState;
use super::node_info::NodeInfo;
use super::points::FilterRunner;
use super::status::Rejection;

/// The pods nominated to `node` that the cycle's pod must leave room
/// for: those of equal or higher priority, other than itself.
pub fn nominated_for<'a>(ctx: &CycleContext<'a>, node: &str) -> Vec<&'a Arc<Pod>> {
    let pod = ctx.pod;
    ctx.snapshot
        .nominator
        .for_node(node)
        .iter()
        .filter(|p| p.priority >= pod.priority && p.uid != pod.uid)
        .collect()
}

/// `node` and `state` with the nominated pods the cycle's pod must leave
/// room for added through the PreFilter extensions (upstream's
/// `addNominatedPods`); `None` when there are none.
pub fn add_nominated(
    runner: &dyn FilterRunner,
    ctx: &CycleContext,
    state: &CycleState,
    node: &NodeInfo,
) -> Result<Option<(CycleState, NodeInfo)>, Rejection> {
    let nominated = nominated_for(ctx, node.name());
    if nominated.is_empty() {
        return Ok(None);
    }
    let mut state = state.clone();
    let mut node = node.clone();
    for p in nominated {
        node.add_pod(p.clone());
        runner
            .add_pod(ctx, &mut state, p, &node)
            .map_err(|e| Rejection::unresolvable(format!("adding nominated pods: {e}")))?;
    }
    Ok(Some((state, node)))
}

/// Upstream's `PodPassesFiltersOnNode`: every Filter with the nominated
/// pods added, then (when there were any) without them, so that the pod
/// fits whether or not they arrive.
pub fn passes_filters(
    runner: &dyn FilterRunner,
    ctx: &CycleContext,
    state: &CycleState,
    node: &NodeInfo,
) -> Result<(), Rejection> {
    if let Some((s, n)) = add_nominated(runner, ctx, state, node)? {
        runner.run_filters(ctx, &s, &n)?;
    }
    runner.run_filters(ctx, state, node)
}
