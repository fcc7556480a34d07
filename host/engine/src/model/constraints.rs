//! A pod's scheduling constraints as the scheduler holds them:
//! tolerations, node affinity, inter-pod affinity and topology spread
//! (parsed from the spec by `pod_spec`, re-exported by `pod`).

use std::collections::BTreeMap;

use super::node::Taint;
use super::selector::{LabelSelector, NodeSelectorTerm};
use super::TaintEffect;

/// How a toleration compares values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOp {
    Equal,
    Exists,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// `None`: with `Exists`, tolerates every key.
    pub key: Option<String>,
    pub op: TolerationOp,
    pub value: String,
    /// `None` matches every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Upstream `Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.as_ref().is_some_and(|k| *k != taint.key) {
            return false;
        }
        match self.op {
            TolerationOp::Exists => true,
            TolerationOp::Equal => self.value == taint.value,
        }
    }
}

/// `true` when some toleration in `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// Required and preferred node affinity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAffinity {
    /// ORed terms; `None` when no required affinity is set.
    pub required: Option<Vec<NodeSelectorTerm>>,
    pub preferred: Vec<(i32, NodeSelectorTerm)>,
}

/// One pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq)]
pub struct PodAffinityTerm {
    /// `None`: the term's selector was absent, which matches no pod.
    pub selector: Option<LabelSelector>,
    /// Namespaces the term looks in; empty with `all_namespaces` false
    /// means the pod's own namespace (resolved at parse time).
    pub namespaces: Vec<String>,
    /// `namespaceSelector: {}`: every namespace.
    pub all_namespaces: bool,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether a placed pod in `namespace` with `labels` is matched by
    /// this term.
    pub fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.all_namespaces || self.namespaces.iter().any(|n| n == namespace))
            && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// Inter-pod affinity and anti-affinity, required and preferred.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodAffinity {
    pub required_affinity: Vec<PodAffinityTerm>,
    pub required_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_affinity: Vec<(i32, PodAffinityTerm)>,
    pub preferred_anti_affinity: Vec<(i32, PodAffinityTerm)>,
}

impl PodAffinity {
    pub fn is_empty(&self) -> bool {
        self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }
}

/// What to do when a spread constraint cannot be met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// A `topologySpreadConstraints[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub selector: Option<LabelSelector>,
    /// `nodeAffinityPolicy` (default Honor): only nodes matching the pod's
    /// required node affinity and selector count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy` (default Ignore): with Honor, only nodes whose
    /// NoSchedule/NoExecute taints the pod tolerates count.
    pub honor_taints: bool,
    /// `minDomains` (DoNotSchedule only): with fewer eligible domains the
    /// global minimum is taken as 0.
    pub min_domains: Option<i32>,
}
