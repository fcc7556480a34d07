//! The profile's preemption advisors (wasm components exporting
//! `post-filter`), consulted in order on the ranked candidates: each may
//! drop candidates that would evict a pod it vetoes and reorder the rest.

use std::sync::Arc;

use crate::framework::{
    Candidate, CycleContext, CycleState, PluginError, PreemptionAdvisor, Victim,
};

use super::ordering::Ranked;

/// The candidate as advisors see it.
fn candidate(r: &Ranked) -> Candidate {
    Candidate {
        node: r.found.node.clone(),
        node_index: r.found.node_index,
        victims: r
            .found
            .selection
            .victims
            .iter()
            .map(|(pod, violates)| Victim {
                pod: pod.clone(),
                violates_budget: *violates,
            })
            .collect(),
        budget_violations: r.violations,
    }
}

/// `ranked` after every advisor's advice, and a note per advisor that
/// changed something (for `--explain`). An advisor's failure is the
/// preemption's (its plugin decides, by its failure policy, whether a
/// failure is an error or no opinion).
pub fn advise(
    ctx: &CycleContext,
    state: &CycleState,
    advisors: &[Arc<dyn PreemptionAdvisor>],
    mut ranked: Vec<Ranked>,
) -> Result<(Vec<Ranked>, Vec<String>), PluginError> {
    let mut notes = Vec::new();
    for a in advisors {
        if ranked.is_empty() {
            break;
        }
        let candidates: Vec<Candidate> = ranked.iter().map(candidate).collect();
        let advice = a
            .advise(ctx, state, &candidates)
            .map_err(|e| PluginError(format!("advisor {}: {e}", a.name())))?;
        let Some(advice) = advice else { continue };
        let order = advice.order(&candidates);
        let dropped = ranked.len() - order.len();
        let moved = order.iter().enumerate().any(|(k, &i)| k != i);
        let mut slots: Vec<Option<Ranked>> = ranked.into_iter().map(Some).collect();
        ranked = order.iter().filter_map(|&i| slots[i].take()).collect();
        if dropped > 0 || moved {
            notes.push(format!(
                "{} dropped {dropped} candidate(s) and {} the rest",
                a.name(),
                if moved {
                    "reordered"
                } else {
                    "kept the order of"
                }
            ));
        }
    }
    Ok((ranked, notes))
}
