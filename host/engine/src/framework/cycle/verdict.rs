//! What a cycle finds and decides, as plain data: the placement or the
//! outcome, the nodes Filter found feasible and why the others failed,
//! the scores, the `--explain` record, and the timer of each call.

use std::time::{Duration, Instant};

use crate::framework::explain::PreemptionExplanation;
use crate::framework::fit_error::FitError;
use crate::framework::node_info::NodeInfo;
use crate::framework::status::SchedulingError;
use crate::framework::timings::Timings;

/// Where the pod goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub node_index: u32,
    /// Weighted total; `None` when only one node was feasible and scoring
    /// was skipped, as upstream.
    pub score: Option<i64>,
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
}

/// The result of a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Scheduled(Placement),
    Unschedulable(FitError),
    /// Something other than a fit verdict went wrong (upstream's "error"
    /// result).
    Error(SchedulingError),
}

/// One node's first rejection in the cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeRejection {
    /// Position of the rejecting plugin in the profile's Filter list (an
    /// index, not a name: rejections are made by the thousand per cycle).
    pub plugin: usize,
    pub reasons: Vec<String>,
    pub unresolvable: bool,
    /// The plugin failed rather than rejected (the attempt fails).
    pub error: bool,
}

/// What Filter found.
pub(crate) struct Found<'a> {
    pub feasible: Vec<&'a NodeInfo>,
    /// (node index, its first rejection), for the nodes evaluated.
    pub rejections: Vec<(u32, NodeRejection)>,
    /// Nodes evaluated.
    pub processed: usize,
}

/// One plugin's scores, raw and normalized.
pub(crate) struct PluginScores {
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
}

/// What the deciding cycle keeps when a recorder is attached.
#[derive(Default)]
pub(crate) struct Record {
    /// Nodes the Filter phase evaluated, in order.
    pub evaluated: Vec<u32>,
    pub rejections: Vec<(u32, NodeRejection)>,
    /// Feasible nodes, in the order of the score vectors.
    pub feasible: Vec<u32>,
    /// (position in the profile's Score list, scores) of each plugin
    /// that scored.
    pub scores: Vec<(usize, PluginScores)>,
    pub totals: Option<Vec<i64>>,
    /// Score plugins that said Skip at PreScore (or Score).
    pub score_skipped: Vec<String>,
    /// What preemption considered.
    pub preemption: Option<PreemptionExplanation>,
    /// The nodes Filter searched (the PreFilterResult's, else every
    /// node) and the feasible nodes it stopped at
    /// (numFeasibleNodesToFind).
    pub searched: usize,
    pub to_find: usize,
}

/// Records the time from its creation to its drop (so early returns are
/// timed too).
pub(crate) struct Timed<'a>(&'a Timings, &'a str, &'static str, Instant);

impl<'a> Timed<'a> {
    pub(crate) fn start(timings: &'a Timings, plugin: &'a str, point: &'static str) -> Self {
        Self(timings, plugin, point, Instant::now())
    }
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        let elapsed: Duration = self.3.elapsed();
        self.0.record(self.1, self.2, elapsed);
    }
}
