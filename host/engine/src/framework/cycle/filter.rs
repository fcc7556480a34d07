//! PreFilter and Filter: the feasible nodes, found in parallel waves from
//! where the previous cycle stopped, until numFeasibleNodesToFind.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use rayon::prelude::*;

use crate::framework::interface::{Decision, Rejection};
use crate::framework::node_info::NodeInfo;
use crate::framework::profile::num_feasible_nodes_to_find;

use super::phase::Cycle;
use super::verdict::{Found, NodeRejection, Timed};

impl<'a> Cycle<'a> {
    /// Every PreFilter plugin in order; remembers which Filter plugins
    /// said Skip. A rejection is the pod's reason (and whether it counts
    /// once per node, and the rejecting plugin's position).
    pub(super) fn pre_filter(&mut self) -> Result<(), (String, bool, usize)> {
        let mut skipped = Vec::new();
        let mut subset: Option<BTreeSet<String>> = None;
        let mut with_nodes: Vec<&str> = Vec::new();
        for (position, p) in self.profile.pre_filter.iter().enumerate() {
            let _t = Timed::start(self.timings, p.name(), "PreFilter");
            match p.pre_filter(&self.ctx, &mut self.state) {
                Ok(Decision::Run) => {
                    let Some(names) = p.pre_filter_nodes(&self.ctx, &self.state) else {
                        continue;
                    };
                    with_nodes.push(p.name());
                    let merged = match subset.take() {
                        None => names,
                        Some(s) => s.intersection(&names).cloned().collect(),
                    };
                    if merged.is_empty() {
                        // Upstream's RunPreFilterPlugins, word for word.
                        with_nodes.sort_unstable();
                        let msg = match with_nodes.as_slice() {
                            [one] => format!("node(s) didn't satisfy plugin {one}"),
                            many => format!(
                                "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                                many.join(" ")
                            ),
                        };
                        return Err((msg, false, position));
                    }
                    subset = Some(merged);
                }
                Ok(Decision::Skip) => skipped.push(p.name().to_string()),
                Err(r) => return Err((r.reasons.join(", "), p.rejection_counts_nodes(), position)),
            }
        }
        with_nodes.sort_unstable();
        self.node_subset = subset.map(|s| {
            let reason = format!(
                "node(s) didn't satisfy plugin(s) [{}]",
                with_nodes.join(" ")
            );
            (s, reason)
        });
        self.skip_filter = self
            .profile
            .filter
            .iter()
            .map(|f| skipped.iter().any(|s| s == f.name()))
            .collect();
        Ok(())
    }

    /// Filter, in waves of one chunk per worker, in round-robin order from
    /// where the previous cycle stopped (deterministic for a seed).
    pub(super) fn find_feasible(&mut self) -> Found<'a> {
        let snapshot = self.ctx.snapshot;
        let num_nodes = snapshot.num_nodes();
        let next_start = self.next_start.load(Ordering::Relaxed);
        let mut found = Found {
            feasible: Vec::new(),
            rejections: Vec::new(),
            processed: 0,
        };
        // Upstream filters the PreFilterResult's nodes only; the others
        // fail with its reason, unresolvable. Without a subset the cycle
        // walks the snapshot's slots (no list of every node per pod).
        let subset: Option<Vec<&'a NodeInfo>> = match &self.node_subset {
            None => None,
            Some((names, reason)) => {
                let (inside, outside): (Vec<&'a NodeInfo>, Vec<&'a NodeInfo>) =
                    snapshot.nodes().partition(|n| names.contains(n.name()));
                let plugin = self
                    .profile
                    .filter
                    .iter()
                    .position(|f| reason.contains(f.name()))
                    .unwrap_or(0);
                found.rejections = outside
                    .iter()
                    .map(|n| {
                        let rejection = NodeRejection {
                            plugin,
                            reasons: vec![reason.clone()],
                            unresolvable: true,
                            error: false,
                        };
                        (n.index, rejection)
                    })
                    .collect();
                Some(inside)
            }
        };
        let live = snapshot.live_slots();
        let len = subset.as_ref().map_or(live.len(), Vec::len);
        if len == 0 {
            if self.recording {
                self.record.rejections = found.rejections.clone();
            }
            return found;
        }
        let start = next_start % len;
        // The k-th node in round-robin order from `start`.
        let at = |k: usize| -> &'a NodeInfo {
            let k = (start + k) % len;
            match &subset {
                Some(nodes) => nodes[k],
                None => snapshot.get(live[k]).expect("a live slot holds a node"),
            }
        };
        let to_find = num_feasible_nodes_to_find(len, self.profile.percentage_of_nodes_to_score);
        if self.recording {
            self.record.searched = len;
            self.record.to_find = to_find;
        }
        let workers = self.workers();
        let chunk = (to_find / workers).clamp(16, 256);
        let mut wave: Vec<&'a NodeInfo> = Vec::with_capacity(chunk * workers);
        let mut next = 0;
        while next < len && found.feasible.len() < to_find {
            wave.clear();
            wave.extend((next..len.min(next + chunk * workers)).map(at));
            next += wave.len();
            let this = &*self;
            let results: Vec<Vec<Option<NodeRejection>>> = if workers > 1 {
                self.pool.install(|| {
                    wave.par_chunks(chunk)
                        .map(|nodes| this.filter_nodes(nodes))
                        .collect()
                })
            } else {
                vec![this.filter_nodes(&wave)]
            };
            for (node, verdict) in wave.iter().zip(results.into_iter().flatten()) {
                if found.feasible.len() >= to_find {
                    break;
                }
                found.processed += 1;
                match verdict {
                    None => found.feasible.push(node),
                    Some(r) => found.rejections.push((node.index, r)),
                }
            }
        }
        self.next_start.store(
            (next_start + found.processed) % num_nodes,
            Ordering::Relaxed,
        );
        if self.recording {
            self.record.rejections = found.rejections.clone();
            self.record.evaluated = (0..found.processed).map(|k| at(k).index).collect();
        }
        found
    }

    /// Runs the Filter plugins in order over `nodes`; each node stops at
    /// its first rejection, as upstream.
    pub(super) fn filter_nodes(&self, nodes: &[&NodeInfo]) -> Vec<Option<NodeRejection>> {
        let mut verdicts: Vec<Option<NodeRejection>> = vec![None; nodes.len()];
        let mut alive: Vec<usize> = (0..nodes.len()).collect();
        let mut batch: Vec<&NodeInfo> = Vec::with_capacity(nodes.len());
        let mut out: Vec<Option<Rejection>> = Vec::with_capacity(nodes.len());
        for (position, plugin) in self.profile.filter.iter().enumerate() {
            if alive.is_empty() {
                break;
            }
            if self.skip_filter.get(position) == Some(&true) {
                continue;
            }
            let _t = Timed::start(self.timings, plugin.name(), "Filter");
            batch.clear();
            batch.extend(alive.iter().map(|&i| nodes[i]));
            out.clear();
            out.resize(batch.len(), None);
            plugin.filter_batch(&self.ctx, &self.state, &batch, &mut out);
            let mut k = 0;
            alive.retain(|&i| {
                let verdict = out[k].take();
                k += 1;
                match verdict {
                    None => true,
                    Some(r) => {
                        verdicts[i] = Some(NodeRejection {
                            plugin: position,
                            reasons: r.reasons,
                            unresolvable: r.unresolvable,
                            error: r.error,
                        });
                        false
                    }
                }
            });
        }
        if !self.ctx.snapshot.nominator.is_empty() {
            self.check_nominated(nodes, &mut verdicts);
        }
        verdicts
    }
}
