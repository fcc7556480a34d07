//! Preemption advisors: plugins that see the candidates DefaultPreemption
//! found (nodes, and the pods each would evict) and may veto victims or
//! rank the candidates, as upstream's preemption-capable extenders do. A
//! wasm component exporting the contract's `post-filter` is one; without
//! any, preemption is exactly upstream's.

use std::sync::Arc;

use crate::model::Pod;

use super::context::CycleContext;
use super::cycle_state::CycleState;
use super::plugin::Plugin;
use super::status::PluginError;

/// A pod a candidate would evict.
#[derive(Debug, Clone)]
pub struct Victim {
    pub pod: Arc<Pod>,
    /// Evicting it would violate a PodDisruptionBudget.
    pub violates_budget: bool,
}

/// A node where evicting the victims lets the preemptor fit.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    pub node_index: u32,
    /// In upstream's order: the budget-violating victims first, each group
    /// by decreasing importance.
    pub victims: Vec<Victim>,
    pub budget_violations: u32,
}

/// An advisor's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advice {
    /// Pods (by uid) that must not be evicted: candidates evicting one are
    /// dropped.
    pub vetoed: Vec<String>,
    /// Candidate positions (into the list given), best first; unlisted
    /// ones follow in the given order. Empty: the given order.
    pub ranking: Vec<u32>,
}

impl Advice {
    /// The positions of `candidates` kept after the vetoes, in the advised
    /// order (ranking, then the rest as given). Positions out of range or
    /// repeated are ignored.
    pub fn order(&self, candidates: &[Candidate]) -> Vec<usize> {
        let vetoed = |c: &Candidate| {
            c.victims
                .iter()
                .any(|v| self.vetoed.iter().any(|u| *u == v.pod.uid))
        };
        let mut out: Vec<usize> = Vec::with_capacity(candidates.len());
        let ranked = self.ranking.iter().map(|&i| i as usize);
        for i in ranked.chain(0..candidates.len()) {
            if i < candidates.len() && !out.contains(&i) {
                out.push(i);
            }
        }
        out.retain(|&i| !vetoed(&candidates[i]));
        out
    }
}

/// Advises DefaultPreemption on its candidates, in the preemptor's cycle.
pub trait PreemptionAdvisor: Plugin {
    /// `candidates` in the order preemption would choose them (the first
    /// wins). `None`: no opinion.
    fn advise(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        candidates: &[Candidate],
    ) -> Result<Option<Advice>, PluginError>;
}

#[cfg(test)]
mod tests {
    use crate::framework::plugins::testutil::P;

    use super::*;

    fn cand(node: &str, victims: &[&str]) -> Candidate {
        Candidate {
            node: node.into(),
            node_index: 0,
            victims: victims
                .iter()
                .map(|v| Victim {
                    pod: Arc::new(P::new(v).build()),
                    violates_budget: false,
                })
                .collect(),
            budget_violations: 0,
        }
    }

    fn names(advice: &Advice, c: &[Candidate]) -> Vec<String> {
        advice.order(c).iter().map(|&i| c[i].node.clone()).collect()
    }

    #[test]
    fn vetoes_drop_candidates_and_ranking_reorders() {
        let c = vec![cand("a", &["x"]), cand("b", &["y"]), cand("c", &["z", "x"])];
        let advice = Advice {
            vetoed: vec!["x".into()],
            ranking: vec![],
        };
        assert_eq!(names(&advice, &c), ["b"]);
        let advice = Advice {
            vetoed: vec![],
            ranking: vec![2, 9, 2, 1],
        };
        assert_eq!(names(&advice, &c), ["c", "b", "a"]);
        assert_eq!(names(&Advice::default(), &c), ["a", "b", "c"]);
    }
}
