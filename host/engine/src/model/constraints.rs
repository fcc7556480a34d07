//! A pod's scheduling constraints as the scheduler holds them:
//! tolerations, node affinity, inter-pod affinity and topology spread
//! (parsed from the spec by `pod_spec`, re-exported by `pod`).

use std::collections::BTreeMap;

use super::namespace::Namespaces;
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
    /// Namespaces the term looks in by name; the pod's own namespace when
    /// neither names nor a `namespaceSelector` are given (resolved at
    /// parse time).
    pub namespaces: Vec<String>,
    /// `namespaceSelector`: the namespaces whose labels it matches, added
    /// to `namespaces` (`{}`: every namespace; `None`: none).
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether a placed pod in `namespace` with `labels` is matched by
    /// this term (upstream `AffinityTerm.Matches`); `namespaces` gives the
    /// namespace's labels for the `namespaceSelector`.
    pub fn matches(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        namespaces: &Namespaces,
    ) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
            && (self.namespaces.iter().any(|n| n == namespace)
                || self
                    .namespace_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(namespaces.labels(namespace))))
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
