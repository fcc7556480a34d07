//! PreScore, Score (in parallel chunks, beside the plugins that score on
//! the cycle's thread), NormalizeScore and weights over the feasible nodes.

use rayon::prelude::*;

use crate::framework::interface::{
    Decision, PluginError, SchedulingError, ScorePlugin, MAX_NODE_SCORE,
};
use crate::framework::node_info::NodeInfo;
use crate::framework::profile::WeightedScore;

use super::phase::Cycle;
use super::verdict::{PluginScores, Timed};

/// Feasible nodes per Score call: big enough that a batch amortizes a
/// call into a plugin, small enough to spread over the workers.
const SCORE_CHUNK: usize = 64;

/// One plugin's raw scores: `None` when it said Skip.
type Raw = Result<Option<Vec<i64>>, SchedulingError>;

impl Cycle<'_> {
    /// Weighted totals of the feasible nodes, in their order.
    pub(super) fn score_nodes(
        &mut self,
        feasible: &[&NodeInfo],
    ) -> Result<Vec<i64>, SchedulingError> {
        let mut skipped = self.pre_score(feasible)?;
        let mut totals = vec![0i64; feasible.len()];
        let this = &*self;
        let active: Vec<(usize, &WeightedScore)> = this
            .profile
            .score
            .iter()
            .enumerate()
            .filter(|(_, s)| !skipped.contains(&s.plugin.name().to_string()))
            .collect();
        let raws = this.raw_scores(&active, feasible);
        let mut recorded = Vec::new();
        for ((position, s), raw) in active.into_iter().zip(raws) {
            let Some(scores) = this.normalized(s.plugin.as_ref(), feasible, raw?)? else {
                skipped.push(s.plugin.name().to_string());
                continue;
            };
            for (t, v) in totals.iter_mut().zip(&scores.normalized) {
                *t += v * s.weight;
            }
            // klog's -v=10 (kube-scheduler logs each plugin's scores there).
            if tracing::enabled!(tracing::Level::TRACE) {
                for (node, v) in feasible.iter().zip(&scores.normalized) {
                    tracing::trace!(
                        v = 10,
                        pod = %this.ctx.pod.key(),
                        plugin = s.plugin.name(),
                        node = node.name(),
                        score = *v,
                        weight = s.weight,
                        "Plugin scored node for pod"
                    );
                }
            }
            if this.recording {
                recorded.push((position, scores));
            }
        }
        self.record.scores = recorded;
        self.record.score_skipped = skipped;
        Ok(totals)
    }

    /// Every PreScore plugin; returns the names of those that said Skip.
    fn pre_score(&mut self, feasible: &[&NodeInfo]) -> Result<Vec<String>, SchedulingError> {
        let mut skipped = Vec::new();
        for p in &self.profile.pre_score {
            let _t = Timed::start(self.timings, p.name(), "PreScore");
            match p.pre_score(&self.ctx, &mut self.state, feasible) {
                Ok(Decision::Run) => {}
                Ok(Decision::Skip) => skipped.push(p.name().to_string()),
                Err(e) => return Err(failed(p.name(), e)),
            }
        }
        Ok(skipped)
    }

    /// The raw scores of the `active` plugins, in their order. With more
    /// than one worker, the plugins that score on this thread (wasm
    /// instances holding the cycle) run while the workers score the
    /// parallel ones in chunks: both cores busy through Score.
    fn raw_scores(&self, active: &[(usize, &WeightedScore)], feasible: &[&NodeInfo]) -> Vec<Raw> {
        let mut out: Vec<Option<Raw>> = active.iter().map(|_| None).collect();
        let (mut here, mut pooled) = (Vec::new(), Vec::new());
        for (slot, (_, s)) in out.iter_mut().zip(active) {
            if s.plugin.parallel() && self.workers() > 1 {
                pooled.push((slot, s.plugin.as_ref()));
            } else {
                here.push((slot, s.plugin.as_ref()));
            }
        }
        self.pool.in_place_scope(|scope| {
            if !pooled.is_empty() {
                scope.spawn(|_| {
                    for (slot, plugin) in pooled {
                        *slot = Some(self.raw(plugin, feasible));
                    }
                });
            }
            for (slot, plugin) in here {
                *slot = Some(self.raw(plugin, feasible));
            }
        });
        out.into_iter()
            .zip(active)
            .map(|(r, (_, s))| {
                r.unwrap_or_else(|| Err(failed(s.plugin.name(), PluginError("did not run".into()))))
            })
            .collect()
    }

    /// One plugin's Score over every feasible node: in chunks over the
    /// workers (when there are more than one and the plugin can be split),
    /// or in one batch on this thread.
    fn raw(&self, plugin: &dyn ScorePlugin, feasible: &[&NodeInfo]) -> Raw {
        let mut raw = vec![0i64; feasible.len()];
        let _t = Timed::start(self.timings, plugin.name(), "Score");
        let decisions: Result<Vec<Decision>, PluginError> =
            if plugin.parallel() && self.workers() > 1 {
                self.pool.install(|| {
                    feasible
                        .par_chunks(SCORE_CHUNK)
                        .zip(raw.par_chunks_mut(SCORE_CHUNK))
                        .map(|(nodes, out)| plugin.score_batch(&self.ctx, &self.state, nodes, out))
                        .collect()
                })
            } else {
                plugin
                    .score_batch(&self.ctx, &self.state, feasible, &mut raw)
                    .map(|d| vec![d])
            };
        let decisions = decisions.map_err(|e| failed(plugin.name(), e))?;
        Ok((!decisions.contains(&Decision::Skip)).then_some(raw))
    }

    /// NormalizeScore over one plugin's raw scores (on this thread),
    /// checked to be in 0..=100. `None`: skipped.
    fn normalized(
        &self,
        plugin: &dyn ScorePlugin,
        feasible: &[&NodeInfo],
        raw: Option<Vec<i64>>,
    ) -> Result<Option<PluginScores>, SchedulingError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let name = plugin.name();
        let mut normalized = raw.clone();
        let decision = {
            let _t = Timed::start(self.timings, name, "NormalizeScore");
            plugin.normalize(&self.ctx, &self.state, feasible, &mut normalized)
        };
        match decision.map_err(|e| failed(name, e))? {
            Decision::Skip => return Ok(None),
            Decision::Run => {}
        }
        if let Some(bad) = normalized
            .iter()
            .find(|v| !(0..=MAX_NODE_SCORE).contains(*v))
        {
            return Err(SchedulingError::ScoreOutOfRange {
                plugin: name.to_string(),
                score: *bad,
            });
        }
        Ok(Some(PluginScores { raw, normalized }))
    }
}

/// A plugin error as the cycle reports it.
fn failed(plugin: &str, cause: PluginError) -> SchedulingError {
    SchedulingError::Score {
        plugin: plugin.to_string(),
        cause,
    }
}
