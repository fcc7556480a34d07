//! Candidate nodes (upstream `FindCandidates` / `dryRunPreemption`): the
//! nodes no Filter called unresolvable, from a random offset, each tried
//! with [`victims::select`] in parallel waves until enough candidates are
//! found (`minCandidateNodesPercentage` / `minCandidateNodesAbsolute`,
//! and at least one that violates no budget).

use std::collections::HashSet;

use rayon::prelude::*;

use crate::framework::{CycleContext, CycleState, FilterRunner, Filtered, NodeInfo};

use super::args::Args;
use super::victims::{self, Selection};

/// A node where the preemptor fits once `selection`'s victims are gone.
#[derive(Debug, Clone)]
pub struct Found {
    pub node_index: u32,
    pub node: String,
    pub selection: Selection,
}

/// The nodes where evicting pods might help (upstream
/// `nodesWherePreemptionMightHelp`), in snapshot order.
pub fn potential_nodes<'a>(ctx: &CycleContext<'a>, filtered: &Filtered) -> Vec<&'a NodeInfo> {
    let unresolvable: HashSet<u32> = filtered.unresolvable.iter().copied().collect();
    ctx.snapshot
        .nodes()
        .filter(|n| !unresolvable.contains(&n.index))
        .collect()
}

/// What the dry run found: the candidates, and why each node tried
/// without success is none (its reasons), for the FitError's
/// `preemption:` part.
pub struct DryRun {
    pub found: Vec<Found>,
    pub rejected: Vec<Vec<String>>,
}

/// The candidates among `potential`, starting at `offset`: those that
/// violate no budget first, then the others, each in the order tried.
pub fn find(
    args: &Args,
    ctx: &CycleContext,
    state: &CycleState,
    potential: &[&NodeInfo],
    offset: usize,
    runner: &dyn FilterRunner,
) -> DryRun {
    let n = potential.len();
    let want = args.num_candidates(n);
    let budgets = &ctx.snapshot.budgets.list;
    let order: Vec<&NodeInfo> = (0..n).map(|i| potential[(offset + i) % n]).collect();
    let try_node = |node: &&NodeInfo| {
        victims::select(ctx, state, node, runner, budgets).map(|selection| Found {
            node_index: node.index,
            node: node.name().to_string(),
            selection,
        })
    };
    let (mut fine, mut violating) = (Vec::new(), Vec::new());
    let mut rejected = Vec::new();
    for wave in order.chunks(want.max(64)) {
        let found: Vec<Result<Found, Vec<String>>> = match runner.pool() {
            Some(pool) => pool.install(|| wave.par_iter().map(try_node).collect()),
            None => wave.iter().map(try_node).collect(),
        };
        for f in found {
            let f = match f {
                Ok(f) => f,
                Err(reasons) => {
                    rejected.push(reasons);
                    continue;
                }
            };
            let list = if f.selection.violations == 0 {
                &mut fine
            } else {
                &mut violating
            };
            if list.len() < want {
                list.push(f);
            }
            if !fine.is_empty() && fine.len() + violating.len() >= want {
                break;
            }
        }
        if !fine.is_empty() && fine.len() + violating.len() >= want {
            break;
        }
    }
    fine.extend(violating);
    DryRun {
        found: fine,
        rejected,
    }
}
