//! PreScore, Score (in parallel chunks), NormalizeScore and weights over
//! the feasible nodes.

use rayon::prelude::*;

use crate::framework::interface::{Decision, PluginError, ScorePlugin, MAX_NODE_SCORE};
use crate::framework::node_info::NodeInfo;

use super::{Cycle, Timed};

/// Feasible nodes per Score call: big enough that a batch amortizes a
/// call into a plugin, small enough to spread over the workers.
const SCORE_CHUNK: usize = 64;

/// One plugin's scores, raw and normalized.
pub(super) struct PluginScores {
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
}

impl Cycle<'_> {
    /// Weighted totals of the feasible nodes, in their order.
    pub(super) fn score_nodes(&mut self, feasible: &[&NodeInfo]) -> Result<Vec<i64>, String> {
        let mut skipped = self.pre_score(feasible)?;
        let mut totals = vec![0i64; feasible.len()];
        let this = &*self;
        let mut recorded = Vec::new();
        for (position, s) in this.profile.score.iter().enumerate() {
            if skipped.contains(&s.plugin.name().to_string()) {
                continue;
            }
            let Some(scores) = this.plugin_scores(s.plugin.as_ref(), feasible)? else {
                skipped.push(s.plugin.name().to_string());
                continue;
            };
            for (t, v) in totals.iter_mut().zip(&scores.normalized) {
                *t += v * s.weight;
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
    fn pre_score(&mut self, feasible: &[&NodeInfo]) -> Result<Vec<String>, String> {
        let mut skipped = Vec::new();
        for p in &self.profile.pre_score {
            let _t = Timed::start(&self.fw.timings, p.name(), "PreScore");
            match p.pre_score(&self.ctx, &mut self.state, feasible) {
                Ok(Decision::Run) => {}
                Ok(Decision::Skip) => skipped.push(p.name().to_string()),
                Err(e) => return Err(failed(p.name(), &e)),
            }
        }
        Ok(skipped)
    }

    /// One plugin's Score over every feasible node (chunks in parallel),
    /// then its NormalizeScore, checked to be in 0..=100. `None`: skipped.
    fn plugin_scores(
        &self,
        plugin: &dyn ScorePlugin,
        feasible: &[&NodeInfo],
    ) -> Result<Option<PluginScores>, String> {
        let name = plugin.name();
        let mut raw = vec![0i64; feasible.len()];
        let decisions: Result<Vec<Decision>, PluginError> = {
            let _t = Timed::start(&self.fw.timings, name, "Score");
            if plugin.parallel() {
                self.fw.pool.install(|| {
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
            }
        };
        let decisions = decisions.map_err(|e| failed(name, &e))?;
        if decisions.contains(&Decision::Skip) {
            return Ok(None);
        }
        let mut normalized = raw.clone();
        let decision = {
            let _t = Timed::start(&self.fw.timings, name, "NormalizeScore");
            plugin.normalize(&self.ctx, &self.state, feasible, &mut normalized)
        };
        match decision.map_err(|e| failed(name, &e))? {
            Decision::Skip => return Ok(None),
            Decision::Run => {}
        }
        if let Some(bad) = normalized
            .iter()
            .find(|v| !(0..=MAX_NODE_SCORE).contains(*v))
        {
            return Err(format!(
                "plugin {name} failed: score {bad} is outside 0..={MAX_NODE_SCORE}"
            ));
        }
        Ok(Some(PluginScores { raw, normalized }))
    }
}

/// A plugin error as the cycle reports it.
fn failed(plugin: &str, e: &PluginError) -> String {
    format!("plugin {plugin} failed: {e}")
}
