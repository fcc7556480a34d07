//! `--explain`: what one scheduling cycle saw, recorded by the cycle that
//! made the decision (so the two cannot disagree), plus, for the table,
//! the verdicts of the Filter plugins the cycle did not need to run (after
//! a node's first rejection, or on nodes it did not get to).

use serde::Serialize;

/// A Filter plugin's verdict on a node, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "verdict", content = "reason")]
pub enum FilterVerdict {
    Pass,
    /// The plugin skipped Filter for this pod (it passes every node).
    Skip,
    Reject(String),
    Error(String),
}

/// One score plugin on one node, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScoreDetail {
    pub plugin: String,
    pub raw: Option<i64>,
    pub normalized: Option<i64>,
    pub weighted: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything about one node, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeExplanation {
    pub node: String,
    pub filters: Vec<(String, FilterVerdict)>,
    pub scores: Vec<ScoreDetail>,
    /// The weighted total (null when the node was not scored: rejected or
    /// not evaluated). For the only feasible node, which the decision does
    /// not score (as upstream), it is computed for display.
    pub total: Option<i64>,
    /// Plugins whose rejection of this node no eviction can resolve
    /// (UnschedulableAndUnresolvable).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unresolvable: Vec<String>,
    /// Why a node no Filter plugin rejected has no score, or a score the
    /// decision did not use: not evaluated (the search stopped at
    /// `percentageOfNodesToScore`), the only feasible node (Score
    /// skipped), or the attempt failed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
}

/// The whole `--explain` answer for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Explanation {
    /// A reason that rejects the pod on every node.
    pub pod_reason: Option<String>,
    pub nodes: Vec<NodeExplanation>,
    /// (plugin, extension point) pairs that said Skip for this pod.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub skipped: Vec<(String, String)>,
    /// The cycle ended in an error (not a fit verdict): the message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// What preemption (PostFilter) considered, when the pod fit nowhere.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub preemption: Option<PreemptionExplanation>,
    /// What plugins chose beyond the node (plugin, line), such as the
    /// devices DynamicResources allocated and the sets it ranked.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<(String, String)>,
}

/// One preemption candidate, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateExplanation {
    pub node: String,
    /// `namespace/name` of each victim, in upstream's order.
    pub victims: Vec<String>,
    /// Victims whose eviction would violate a PodDisruptionBudget.
    pub budget_violations: u32,
    /// The priority of the first victim (upstream's "highest").
    pub highest_priority: i32,
    pub priority_sum: i64,
    /// Why this candidate is behind the one before it in the order (the
    /// first rule that tells them apart); `None` for the first.
    pub behind_because: Option<String>,
}

/// What preemption did for a pod that fit nowhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct PreemptionExplanation {
    /// The candidates, best first (after any advisor's advice).
    pub candidates: Vec<CandidateExplanation>,
    /// The node nominated, if any.
    pub nominated: Option<String>,
    /// Why preemption nominated that node, or why it did not preempt.
    pub summary: String,
}

impl Explanation {
    /// The entry of node `name`.
    pub fn node_mut(&mut self, name: &str) -> Option<&mut NodeExplanation> {
        self.nodes.iter_mut().find(|n| n.node == name)
    }
}
