//! The recorder behind `--explain`: what the deciding cycle saw, turned
//! into an [`Explanation`] once the decision is made.

use std::collections::HashSet;

use crate::framework::explain::{Explanation, FilterVerdict, NodeExplanation, ScoreDetail};
use crate::framework::interface::Rejection;
use crate::framework::node_info::NodeInfo;

use super::phase::Cycle;
use super::verdict::Outcome;

impl Cycle<'_> {
    /// Fills `out` from the record, after the decision.
    pub(super) fn explain(&self, outcome: &Outcome, out: &mut Explanation) {
        let nodes: Vec<&NodeInfo> = self.ctx.snapshot.nodes().collect();
        out.pod_reason = match outcome {
            Outcome::Unschedulable(fit) => fit.pod_reason.clone(),
            _ => None,
        };
        out.error = match outcome {
            Outcome::Error(e) => Some(e.to_string()),
            _ => None,
        };
        out.preemption = self.record.preemption.clone();
        let chosen = match outcome {
            Outcome::Scheduled(p) => Some(p.node.as_str()),
            _ => None,
        };
        out.notes = self
            .profile
            .members
            .iter()
            .flat_map(|m| {
                m.explain(&self.state, chosen)
                    .into_iter()
                    .map(|l| (m.name().to_string(), l))
            })
            .collect();
        out.skipped = self
            .profile
            .filter
            .iter()
            .zip(&self.skip_filter)
            .filter(|(_, s)| **s)
            .map(|(f, _)| (f.name().to_string(), "Filter".to_string()))
            .chain(
                self.record
                    .score_skipped
                    .iter()
                    .map(|n| (n.clone(), "Score".to_string())),
            )
            .collect();
        out.nodes = nodes
            .iter()
            .map(|n| NodeExplanation {
                node: n.name().to_string(),
                filters: Vec::new(),
                scores: Vec::new(),
                total: None,
                unresolvable: Vec::new(),
                note: None,
            })
            .collect();
        if out.pod_reason.is_some() {
            return;
        }
        let mut verdicts = self.display_verdicts(&nodes);
        self.apply_decision(&nodes, &mut verdicts);
        for (entry, row) in out.nodes.iter_mut().zip(verdicts) {
            for (f, (verdict, unresolvable)) in self.profile.filter.iter().zip(row) {
                if unresolvable {
                    entry.unresolvable.push(f.name().to_string());
                }
                entry.filters.push((f.name().to_string(), verdict));
            }
        }
        self.explain_scores(&nodes, out);
        self.explain_unscored(&nodes, outcome, out);
    }

    /// Says why each node no Filter plugin rejected has no score (or one
    /// the decision did not use).
    fn explain_unscored(&self, nodes: &[&NodeInfo], outcome: &Outcome, out: &mut Explanation) {
        let single = matches!(outcome, Outcome::Scheduled(p) if p.score.is_none());
        let evaluated: HashSet<u32> = self.record.evaluated.iter().copied().collect();
        let feasible: HashSet<u32> = self.record.feasible.iter().copied().collect();
        for (entry, node) in out.nodes.iter_mut().zip(nodes) {
            let passed = entry
                .filters
                .iter()
                .all(|(_, v)| matches!(v, FilterVerdict::Pass | FilterVerdict::Skip));
            if !passed {
                continue;
            }
            let feasible = feasible.contains(&node.index);
            entry.note = if let (Outcome::Error(e), None) = (outcome, entry.total) {
                Some(format!("not scored: the attempt failed ({e})"))
            } else if feasible && single {
                Some(
                    "the only feasible node: the decision skipped Score (as upstream); \
                     the scores are shown for reference"
                        .into(),
                )
            } else if !feasible && !evaluated.contains(&node.index) {
                let pct = match self.profile.percentage_of_nodes_to_score {
                    Some(p) if p > 0 => format!("percentageOfNodesToScore {p}%"),
                    _ => "percentageOfNodesToScore adaptive".into(),
                };
                Some(format!(
                    "not evaluated: Filter stopped after finding {} feasible node(s) of {} ({pct})",
                    self.record.to_find, self.record.searched
                ))
            } else {
                None
            };
        }
    }

    /// Every Filter plugin's verdict on every node, for display (the
    /// decision needed only each node's first rejection).
    fn display_verdicts(&self, nodes: &[&NodeInfo]) -> Vec<Vec<(FilterVerdict, bool)>> {
        let mut rows = vec![Vec::with_capacity(self.profile.filter.len()); nodes.len()];
        let mut out: Vec<Option<Rejection>> = vec![None; nodes.len()];
        for (position, f) in self.profile.filter.iter().enumerate() {
            let skipped = self.skip_filter.get(position) == Some(&true);
            if !skipped {
                out.iter_mut().for_each(|o| *o = None);
                f.filter_batch(&self.ctx, &self.state, nodes, &mut out);
            }
            for (row, verdict) in rows.iter_mut().zip(&out) {
                row.push(match (skipped, verdict) {
                    (true, _) => (FilterVerdict::Skip, false),
                    (false, None) => (FilterVerdict::Pass, false),
                    (false, Some(r)) => {
                        (FilterVerdict::Reject(r.reasons.join(", ")), r.unresolvable)
                    }
                });
            }
        }
        rows
    }

    /// Where the decision evaluated a node, its verdicts are the ones shown.
    fn apply_decision(&self, nodes: &[&NodeInfo], rows: &mut [Vec<(FilterVerdict, bool)>]) {
        let row_of = |index: u32| nodes.iter().position(|n| n.index == index);
        for &index in &self.record.evaluated {
            let Some(row) = row_of(index).map(|i| &mut rows[i]) else {
                continue;
            };
            let rejected = self
                .record
                .rejections
                .iter()
                .find(|(i, _)| *i == index)
                .map(|(_, r)| r);
            let upto = rejected.map_or(row.len(), |r| r.plugin);
            for v in row.iter_mut().take(upto) {
                if v.0 != FilterVerdict::Skip {
                    *v = (FilterVerdict::Pass, false);
                }
            }
            if let Some(r) = rejected {
                row[r.plugin] = (FilterVerdict::Reject(r.reasons.join(", ")), r.unresolvable);
            }
        }
        // Nodes outside the PreFilterResult: never filtered, rejected with
        // its reason.
        let evaluated: HashSet<u32> = self.record.evaluated.iter().copied().collect();
        for (index, r) in &self.record.rejections {
            if evaluated.contains(index) {
                continue;
            }
            if let Some(row) = row_of(*index).map(|i| &mut rows[i]) {
                if let Some(v) = row.get_mut(r.plugin) {
                    *v = (FilterVerdict::Reject(r.reasons.join(", ")), r.unresolvable);
                }
            }
        }
    }

    fn explain_scores(&self, nodes: &[&NodeInfo], out: &mut Explanation) {
        for (k, &index) in self.record.feasible.iter().enumerate() {
            let Some(row) = nodes.iter().position(|n| n.index == index) else {
                continue;
            };
            let entry = &mut out.nodes[row];
            for (position, scores) in &self.record.scores {
                let s = &self.profile.score[*position];
                entry.scores.push(ScoreDetail {
                    plugin: s.plugin.name().to_string(),
                    raw: Some(scores.raw[k]),
                    normalized: Some(scores.normalized[k]),
                    weighted: Some(scores.normalized[k] * s.weight),
                    error: None,
                });
            }
            entry.total = self.record.totals.as_ref().map(|t| t[k]);
        }
    }
}
