//! A profile: the plugins one scheduler name runs, in order, with weights.

use std::sync::Arc;

use crate::wasm::WasmPlugin;

use super::interface::{FilterPlugin, ScorePlugin};

/// A Filter plugin, native or wasm.
#[derive(Clone)]
pub enum FilterEntry {
    Native(Arc<dyn FilterPlugin>),
    Wasm(Arc<WasmPlugin>),
}

/// A Score plugin, native or wasm.
#[derive(Clone)]
pub enum ScoreEntry {
    Native(Arc<dyn ScorePlugin>),
    Wasm(Arc<WasmPlugin>),
}

impl FilterEntry {
    pub fn name(&self) -> &str {
        match self {
            Self::Native(p) => p.name(),
            Self::Wasm(p) => &p.name,
        }
    }
}

impl ScoreEntry {
    pub fn name(&self) -> &str {
        match self {
            Self::Native(p) => p.name(),
            Self::Wasm(p) => &p.name,
        }
    }
}

/// A Score plugin and its weight (kube-scheduler's `plugins.score.enabled[].weight`).
#[derive(Clone)]
pub struct WeightedScore {
    pub plugin: ScoreEntry,
    pub weight: i64,
}

/// Everything one `schedulerName` runs.
#[derive(Clone)]
pub struct Profile {
    pub scheduler_name: String,
    pub filters: Vec<FilterEntry>,
    pub scores: Vec<WeightedScore>,
    /// `percentageOfNodesToScore`; `None` or 0 means upstream's adaptive rule.
    pub percentage_of_nodes_to_score: Option<u32>,
}

impl Profile {
    /// Each wasm plugin of the chain once, in chain order.
    pub fn wasm_plugins(&self) -> Vec<Arc<WasmPlugin>> {
        let mut out: Vec<Arc<WasmPlugin>> = Vec::new();
        let filters = self.filters.iter().filter_map(|f| match f {
            FilterEntry::Wasm(w) => Some(w),
            FilterEntry::Native(_) => None,
        });
        let scores = self.scores.iter().filter_map(|s| match &s.plugin {
            ScoreEntry::Wasm(w) => Some(w),
            ScoreEntry::Native(_) => None,
        });
        for w in filters.chain(scores) {
            if !out.iter().any(|o| Arc::ptr_eq(o, w)) {
                out.push(w.clone());
            }
        }
        out
    }
}

/// Upstream's `numFeasibleNodesToFind`.
pub fn num_feasible_nodes_to_find(num_all_nodes: usize, percentage: Option<u32>) -> usize {
    const MIN_FEASIBLE: usize = 100;
    const MIN_PERCENTAGE: i64 = 5;
    if num_all_nodes < MIN_FEASIBLE {
        return num_all_nodes;
    }
    let pct = match percentage {
        Some(p) if p > 0 => {
            if p >= 100 {
                return num_all_nodes;
            }
            p as i64
        }
        _ => (50 - num_all_nodes as i64 / 125).max(MIN_PERCENTAGE),
    };
    let n = num_all_nodes as i64 * pct / 100;
    (n as usize).max(MIN_FEASIBLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_feasible_matches_upstream_anchors() {
        assert_eq!(num_feasible_nodes_to_find(50, None), 50);
        assert_eq!(num_feasible_nodes_to_find(500, None), 230);
        assert_eq!(num_feasible_nodes_to_find(5000, None), 500);
        assert_eq!(num_feasible_nodes_to_find(5000, Some(100)), 5000);
        assert_eq!(num_feasible_nodes_to_find(1000, Some(1)), 100);
    }
}
