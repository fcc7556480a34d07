//! PodTopologySpread: `topologySpreadConstraints`. DoNotSchedule
//! constraints filter nodes whose domain would become too crowded
//! compared with the emptiest domain; ScheduleAnyway constraints score
//! less crowded domains higher.
//!
//! A pod without constraints of its own gets the plugin's default ones
//! (upstream's `defaultingType: System` by default: spread over hostnames
//! with maxSkew 3 and zones with maxSkew 5, ScheduleAnyway), selecting the
//! pods of its Services and controller (`model::workload`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::framework::interface::MAX_NODE_SCORE;
use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PluginError,
    PreFilterPlugin, PreScorePlugin, Rejection, ScorePlugin, Snapshot,
};
use crate::model::pod::{tolerated, SpreadConstraint, WhenUnsatisfiable};
use crate::model::selector::LabelSelector;
use crate::model::workload::Workloads;
use crate::model::{Node, Pod, TaintEffect};

use super::helpers::{
    args_object, json_type, matches_required_node_affinity, reject_unknown, split_over_nodes,
};

pub const NAME: &str = "PodTopologySpread";

/// Upstream `ErrReasonConstraintsNotMatch`.
pub const ERR_CONSTRAINTS: &str = "node(s) didn't match pod topology spread constraints";
/// Upstream `ErrReasonNodeLabelNotMatch`.
pub const ERR_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// `v1.LabelHostname`: each node is its own domain, so counts are taken per
/// node at Score time rather than aggregated.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

const PRE_FILTER_KEY: &str = "PreFilterPodTopologySpread";
const PRE_SCORE_KEY: &str = "PreScorePodTopologySpread";

/// The PodTopologySpread plugin. `Default` has no default constraints
/// (`defaultingType: List` with none); the registry's factory without
/// arguments gives upstream's default, [`PodTopologySpread::system`].
#[derive(Debug, Clone, Default)]
pub struct PodTopologySpread {
    /// For pods without constraints of their own; their selectors are
    /// filled per pod.
    defaults: Vec<SpreadConstraint>,
    /// `defaultingType: System`: nodes lacking a topology key are still
    /// scored (a missing zone is the domain `""`), so that hostname
    /// spreading works on nodes without zones.
    system_defaulted: bool,
}

/// Upstream's `systemDefaultConstraints`.
fn system_constraints() -> Vec<SpreadConstraint> {
    [(HOSTNAME, 3), ("topology.kubernetes.io/zone", 5)]
        .into_iter()
        .map(|(key, max_skew)| SpreadConstraint {
            max_skew,
            topology_key: key.to_string(),
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            selector: None,
            honor_node_affinity: true,
            honor_taints: false,
            min_domains: None,
        })
        .collect()
}

impl PodTopologySpread {
    /// Upstream's default arguments (`defaultingType: System`).
    pub fn system() -> Self {
        Self {
            defaults: system_constraints(),
            system_defaulted: true,
        }
    }

    /// Upstream `PodTopologySpreadArgs`: `defaultingType` System (the
    /// default; `defaultConstraints` must then be empty) or List (the
    /// `defaultConstraints` given, validated as upstream validates them).
    pub fn from_args(args: Option<&Value>) -> Result<Self, String> {
        let Some(obj) = args_object(NAME, args)? else {
            return Ok(Self::system());
        };
        reject_unknown(&obj, &["defaultingType", "defaultConstraints"], "")?;
        let system = match obj.get("defaultingType") {
            None => true,
            Some(v) if v.as_str() == Some("System") => true,
            Some(v) if v.as_str() == Some("List") => false,
            Some(v) => {
                return Err(format!(
                    "defaultingType: unsupported value {v} (System or List)"
                ))
            }
        };
        let listed = match obj.get("defaultConstraints") {
            None => Vec::new(),
            Some(v @ Value::Array(_)) => crate::model::workload::default_spread_constraints(v)?,
            Some(v) => {
                return Err(format!(
                    "defaultConstraints: expected an array, got {}",
                    json_type(v)
                ))
            }
        };
        if system {
            if !listed.is_empty() {
                return Err("defaultConstraints: must be empty with defaultingType: System".into());
            }
            return Ok(Self::system());
        }
        Ok(Self {
            defaults: listed,
            system_defaulted: false,
        })
    }

    /// The pod's constraints of `kind`: its own, or (when it has none) the
    /// defaults with the selector of its Services and controller (none
    /// when that selector is empty). Upstream's `getConstraints` and
    /// `buildDefaultConstraints`.
    fn constraints_for(
        &self,
        pod: &Pod,
        workloads: &Workloads,
        kind: WhenUnsatisfiable,
    ) -> Vec<SpreadConstraint> {
        if !pod.spread.is_empty() {
            return constraints_of(pod, kind);
        }
        if !self.defaults.iter().any(|c| c.when_unsatisfiable == kind) {
            return Vec::new();
        }
        let selector = workloads.default_selector(pod);
        if selector.requirements.is_empty() {
            return Vec::new();
        }
        self.defaults
            .iter()
            .filter(|c| c.when_unsatisfiable == kind)
            .map(|c| SpreadConstraint {
                selector: Some(selector.clone()),
                ..c.clone()
            })
            .collect()
    }

    /// Whether a node must have every topology key to be scored (upstream:
    /// own constraints, or defaults that are not the system's).
    fn require_all_topologies(&self, pod: &Pod) -> bool {
        !pod.spread.is_empty() || !self.system_defaulted
    }
}

/// Upstream `countPodsMatchSelector`: pods of `namespace` the selector
/// matches, terminating ones left out. An absent selector matches
/// nothing; an empty one (which upstream turns into "everything") counts
/// nothing either, as upstream skips empty selectors.
fn count_matching(
    pods: &[Arc<Pod>],
    selector: Option<&LabelSelector>,
    namespace: &str,
    skip_uid: &str,
) -> i64 {
    let Some(sel) = selector.filter(|s| !s.requirements.is_empty()) else {
        return 0;
    };
    let n = pods
        .iter()
        .filter(|p| {
            p.namespace == namespace
                && p.uid != skip_uid
                && !p.terminating
                && sel.matches(&p.labels)
        })
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Upstream `nodeLabelsMatchSpreadConstraints`.
fn has_all_keys(node: &Node, constraints: &[SpreadConstraint]) -> bool {
    constraints
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

fn constraints_of(pod: &Pod, kind: WhenUnsatisfiable) -> Vec<SpreadConstraint> {
    pod.spread
        .iter()
        .filter(|c| c.when_unsatisfiable == kind)
        .cloned()
        .collect()
}

/// Upstream `MatchNodeInclusionPolicies`: whether `node` counts for
/// constraint `c` of `pod`: with `nodeAffinityPolicy: Honor` (the default)
/// it passes the pod's required node affinity and selector; with
/// `nodeTaintsPolicy: Honor` the pod tolerates its NoSchedule and
/// NoExecute taints (ignored by default).
fn included(pod: &Pod, node: &Node, c: &SpreadConstraint) -> bool {
    (!c.honor_node_affinity || matches_required_node_affinity(pod, node))
        && (!c.honor_taints
            || node
                .taints
                .iter()
                .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
                .all(|t| tolerated(&pod.tolerations, t)))
}

// ---------------------------------------------------------------------------
// Filter
// ---------------------------------------------------------------------------

/// What Filter needs, computed once per cycle (upstream's
/// `preFilterState`): per constraint, its matching pods per domain and its
/// two emptiest domains.
#[derive(Debug, Default, Clone)]
struct FilterState {
    /// The pod's DoNotSchedule constraints.
    constraints: Vec<SpreadConstraint>,
    /// Per constraint: matching pods per domain, over the counted nodes.
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: the two smallest counts (upstream's critical paths;
    /// the first is the minimum).
    paths: Vec<CriticalPaths>,
}

/// Upstream's `criticalPaths`: the two domains with the fewest matching
/// pods, kept up to date as pods are added and removed in what-if
/// evaluations (with upstream's approximation: a domain not among the two
/// is not reconsidered when one of them grows).
#[derive(Debug, Clone)]
struct CriticalPaths([(String, i64); 2]);

impl Default for CriticalPaths {
    fn default() -> Self {
        let none = (String::new(), i64::from(i32::MAX));
        Self([none.clone(), none])
    }
}

impl CriticalPaths {
    fn min(&self) -> i64 {
        self.0[0].1
    }

    fn update(&mut self, value: &str, num: i64) {
        let p = &mut self.0;
        let i = if value == p[0].0 {
            Some(0)
        } else if value == p[1].0 {
            Some(1)
        } else {
            None
        };
        match i {
            Some(i) => {
                p[i].1 = num;
                if p[0].1 > p[1].1 {
                    p.swap(0, 1);
                }
            }
            None if num < p[0].1 => {
                p[1] = p[0].clone();
                p[0] = (value.to_string(), num);
            }
            None if num < p[1].1 => p[1] = (value.to_string(), num),
            None => {}
        }
    }
}

/// Per constraint, matching pods per domain over `nodes` (the counted
/// ones): upstream's `calPreFilterState` loop.
fn count_nodes(
    pod: &Pod,
    constraints: &[SpreadConstraint],
    nodes: &[&NodeInfo],
) -> Vec<HashMap<String, i64>> {
    let mut counts = vec![HashMap::<String, i64>::new(); constraints.len()];
    for info in nodes {
        let node = &info.node;
        if !has_all_keys(node, constraints) {
            continue;
        }
        for (i, c) in constraints.iter().enumerate() {
            if !included(pod, node, c) {
                continue;
            }
            let Some(value) = node.labels.get(&c.topology_key) else {
                continue;
            };
            let n = count_matching(&info.pods, c.selector.as_ref(), &pod.namespace, &pod.uid);
            // Adds the domain even at 0: an empty domain is the minimum.
            let e = counts[i].entry(value.clone()).or_insert(0);
            *e = e.saturating_add(n);
        }
    }
    counts
}

fn merge_counts(
    mut a: Vec<HashMap<String, i64>>,
    b: Vec<HashMap<String, i64>>,
) -> Vec<HashMap<String, i64>> {
    for (into, from) in a.iter_mut().zip(b) {
        for (value, n) in from {
            let e = into.entry(value).or_insert(0);
            *e = e.saturating_add(n);
        }
    }
    a
}

impl FilterState {
    fn compute(
        constraints: Vec<SpreadConstraint>,
        pod: &Pod,
        snapshot: &Snapshot,
        pool: Option<&rayon::ThreadPool>,
    ) -> Self {
        let mut s = Self::default();
        if constraints.is_empty() {
            return s;
        }
        let nodes: Vec<&NodeInfo> = snapshot.nodes().collect();
        s.counts = split_over_nodes(
            &nodes,
            pool,
            |chunk| count_nodes(pod, &constraints, chunk),
            merge_counts,
        );
        // No counted domain: upstream's "infinite" minimum lets every node
        // with the key pass.
        s.paths = s
            .counts
            .iter()
            .map(|m| {
                let mut paths = CriticalPaths::default();
                for (value, n) in m {
                    paths.update(value, *n);
                }
                paths
            })
            .collect();
        s.constraints = constraints;
        s
    }

    /// Upstream `updateWithPod`: `pod` joins (`delta` 1) or leaves (-1)
    /// `node` in a what-if evaluation of the cycle's pod `incoming`.
    fn update(&mut self, pod: &Pod, incoming: &Pod, node: &Node, delta: i64) {
        if pod.namespace != incoming.namespace || !has_all_keys(node, &self.constraints) {
            return;
        }
        for (i, c) in self.constraints.iter().enumerate() {
            let matches = c
                .selector
                .as_ref()
                .is_some_and(|s| !s.requirements.is_empty() && s.matches(&pod.labels));
            if !matches || !included(incoming, node, c) {
                continue;
            }
            let Some(value) = node.labels.get(&c.topology_key) else {
                continue;
            };
            let e = self.counts[i].entry(value.clone()).or_insert(0);
            *e = e.saturating_add(delta);
            let n = *e;
            self.paths[i].update(value, n);
        }
    }

    fn check(&self, pod: &Pod, node: &Node) -> Result<(), Rejection> {
        for (i, c) in self.constraints.iter().enumerate() {
            let Some(value) = node.labels.get(&c.topology_key) else {
                return Err(Rejection::unresolvable(ERR_MISSING_LABEL));
            };
            let mut min = self.paths[i].min();
            // Upstream `minMatchNum`: fewer eligible domains than
            // `minDomains` make the global minimum 0.
            if let Some(m) = c.min_domains {
                if self.counts[i].len() < usize::try_from(m).unwrap_or(usize::MAX) {
                    min = 0;
                }
            }
            let self_match = i64::from(c.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)));
            let skew = self.counts[i]
                .get(value)
                .copied()
                .unwrap_or(0)
                .saturating_add(self_match)
                .saturating_sub(min);
            if skew > i64::from(c.max_skew) {
                // Removing pods from this domain could fix it.
                return Err(Rejection::new(ERR_CONSTRAINTS));
            }
        }
        Ok(())
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &str {
        NAME
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let constraints = self.constraints_for(
            ctx.pod,
            &ctx.snapshot.workloads,
            WhenUnsatisfiable::DoNotSchedule,
        );
        // Upstream: no constraint to filter by is a Skip (no Filter, no
        // AddPod/RemovePod for this pod).
        if constraints.is_empty() {
            return Ok(Decision::Skip);
        }
        state.write(
            PRE_FILTER_KEY,
            FilterState::compute(constraints, ctx.pod, ctx.snapshot, ctx.pool),
        );
        Ok(Decision::Run)
    }

    fn has_extensions(&self) -> bool {
        true
    }

    fn add_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        if let Some(s) = state.read_mut::<FilterState>(PRE_FILTER_KEY) {
            s.update(pod, ctx.pod, &node.node, 1);
        }
        Ok(())
    }

    fn remove_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        if let Some(s) = state.read_mut::<FilterState>(PRE_FILTER_KEY) {
            s.update(pod, ctx.pod, &node.node, -1);
        }
        Ok(())
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError> {
        let constraints = self.constraints_for(
            ctx.pod,
            &ctx.snapshot.workloads,
            WhenUnsatisfiable::ScheduleAnyway,
        );
        // Upstream: no constraint to spread by (none of the pod's, no
        // default with a selector) is a Skip.
        if constraints.is_empty() {
            return Ok(Decision::Skip);
        }
        state.write(
            PRE_SCORE_KEY,
            ScoreState::compute(
                constraints,
                self.require_all_topologies(ctx.pod),
                ctx.pod,
                ctx.snapshot,
                feasible,
            ),
        );
        Ok(Decision::Run)
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        match state.read::<FilterState>(PRE_FILTER_KEY) {
            Some(s) => s.check(ctx.pod, &node.node),
            // PreFilter did not run: compute the same answer the slow way.
            None => {
                let constraints = self.constraints_for(
                    ctx.pod,
                    &ctx.snapshot.workloads,
                    WhenUnsatisfiable::DoNotSchedule,
                );
                if constraints.is_empty() {
                    return Ok(());
                }
                FilterState::compute(constraints, ctx.pod, ctx.snapshot, None)
                    .check(ctx.pod, &node.node)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Score
// ---------------------------------------------------------------------------

/// What Score and NormalizeScore need.
#[derive(Debug, Default, Clone)]
struct ScoreState {
    /// The pod's ScheduleAnyway constraints; empty means "not scored".
    constraints: Vec<SpreadConstraint>,
    /// Feasible nodes lacking a constraint key (by snapshot index)...
    ignored_nodes: HashSet<u32>,
    /// ...and by position in the feasible list, for NormalizeScore.
    ignored_positions: Vec<bool>,
    /// Per constraint (non-hostname keys): matching pods per domain of the
    /// feasible nodes.
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: `ln(domains + 2)`, so that counts in topologies with
    /// few domains are not watered down by ones with many.
    weights: Vec<f64>,
}

impl ScoreState {
    /// Upstream's `initPreScoreState` and `PreScore`. Without
    /// `require_all` (system defaults) a node lacking a key is scored, and
    /// counts in the domain `""` of that key.
    fn compute(
        constraints: Vec<SpreadConstraint>,
        require_all: bool,
        pod: &Pod,
        snapshot: &Snapshot,
        feasible: &[&NodeInfo],
    ) -> Self {
        let mut s = Self::default();
        if constraints.is_empty() {
            return s;
        }
        s.counts = vec![HashMap::new(); constraints.len()];
        let mut domains = vec![0usize; constraints.len()];
        for n in feasible {
            let missing = require_all && !has_all_keys(&n.node, &constraints);
            s.ignored_positions.push(missing);
            if missing {
                s.ignored_nodes.insert(n.index);
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if c.topology_key == HOSTNAME {
                    continue;
                }
                let v = n
                    .node
                    .labels
                    .get(&c.topology_key)
                    .map_or("", String::as_str);
                if !s.counts[i].contains_key(v) {
                    s.counts[i].insert(v.to_string(), 0);
                    domains[i] += 1;
                }
            }
        }
        let scored = feasible.len() - s.ignored_nodes.len().min(feasible.len());
        s.weights = constraints
            .iter()
            .zip(&domains)
            .map(|(c, d)| {
                let size = if c.topology_key == HOSTNAME {
                    scored
                } else {
                    *d
                };
                (size as f64 + 2.0).ln()
            })
            .collect();
        for info in snapshot.nodes() {
            let node = &info.node;
            if require_all && !has_all_keys(node, &constraints) {
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if !included(pod, node, c) {
                    continue;
                }
                let v = node.labels.get(&c.topology_key).map_or("", String::as_str);
                // Only domains of feasible nodes matter; hostname counts
                // are taken per node at Score time.
                if let Some(cnt) = s.counts[i].get_mut(v) {
                    *cnt = cnt.saturating_add(count_matching(
                        &info.pods,
                        c.selector.as_ref(),
                        &pod.namespace,
                        &pod.uid,
                    ));
                }
            }
        }
        s.constraints = constraints;
        s
    }
}

impl ScorePlugin for PodTopologySpread {
    /// Upstream: `round(sum over constraints of count * weight + maxSkew - 1)`;
    /// more matching pods in the node's domains means a higher raw score,
    /// reversed by NormalizeScore.
    fn score(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let s = state
            .read::<ScoreState>(PRE_SCORE_KEY)
            .ok_or_else(|| PluginError(format!("{NAME}: PreScore state missing")))?;
        if s.constraints.is_empty() || s.ignored_nodes.contains(&node.index) {
            return Ok(0);
        }
        let mut score = 0.0f64;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(v) = node.node.labels.get(&c.topology_key) else {
                continue;
            };
            let cnt = if c.topology_key == HOSTNAME {
                count_matching(
                    &node.pods,
                    c.selector.as_ref(),
                    &ctx.pod.namespace,
                    &ctx.pod.uid,
                )
            } else {
                s.counts.get(i).and_then(|m| m.get(v)).copied().unwrap_or(0)
            };
            let weight = s.weights.get(i).copied().unwrap_or(0.0);
            score += cnt as f64 * weight + f64::from(c.max_skew) - 1.0;
        }
        Ok(score.round() as i64)
    }

    /// Upstream: `100 * (max + min - score) / max` over the scored nodes
    /// (ignored ones get 0), 100 everywhere when nothing matched.
    fn normalize(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        let s = state
            .read::<ScoreState>(PRE_SCORE_KEY)
            .ok_or_else(|| PluginError(format!("{NAME}: PreScore state missing")))?;
        if s.constraints.is_empty() {
            // Upstream skips the plugin: every node keeps 0.
            return Ok(Decision::Run);
        }
        let ignored = |i: usize| s.ignored_positions.get(i).copied().unwrap_or(false);
        let (mut min, mut max) = (i64::MAX, 0i64);
        for (i, v) in scores.iter().enumerate() {
            if !ignored(i) {
                min = min.min(*v);
                max = max.max(*v);
            }
        }
        for (i, v) in scores.iter_mut().enumerate() {
            *v = if ignored(i) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE.saturating_mul(max.saturating_add(min).saturating_sub(*v)) / max
            };
        }
        Ok(Decision::Run)
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    let p = PodTopologySpread::from_args(args).map_err(|e| format!("{NAME} args: {e}"))?;
    let p = Arc::new(p);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_pre_score(&p)
        .with_score(&p))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{json, Value};

    use super::*;
    use crate::framework::plugins::testutil::*;
    use crate::model::Pod;

    const ZONE: &str = "zone";
    const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";

    fn constraint(max_skew: i32, key: &str, when: &str) -> Value {
        json!({
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
        })
    }

    fn incoming(constraints: Value) -> P {
        P::new("p")
            .labels(&[("foo", "")])
            .spec("topologySpreadConstraints", constraints)
    }

    /// node-a, node-b in zone1; node-x, node-y in zone2.
    fn four_nodes() -> Vec<Node> {
        [
            ("node-a", "zone1"),
            ("node-b", "zone1"),
            ("node-x", "zone2"),
            ("node-y", "zone2"),
        ]
        .iter()
        .map(|(n, z)| N::new(n).labels(&[(HOSTNAME, n), (ZONE, z)]).build())
        .collect()
    }

    /// PreFilter's count split over the workers gives the counts and
    /// critical paths of the walk on one thread.
    #[test]
    fn counts_split_over_workers_equal_one_threads() {
        // `matching` takes 'static names.
        let names: &'static [String] = (0..1500)
            .map(|i| format!("n{i:04}"))
            .collect::<Vec<_>>()
            .leak();
        let nodes: Vec<Node> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let zone = format!("zone{}", i % 7);
                let mut node = N::new(n).labels(&[(HOSTNAME, n), (ZONE, &zone)]);
                if i % 11 == 0 {
                    // Outside the pod's node affinity: not counted.
                    node = node.labels(&[(HOSTNAME, n), (ZONE, &zone), ("pool", "other")]);
                }
                node.build()
            })
            .collect();
        let per_node: Vec<(&str, usize)> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(i, n)| (n.as_str(), i % 4))
            .collect();
        let snap = cluster(nodes, matching(&per_node));
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule"), constraint(3, HOSTNAME, "DoNotSchedule")]))
            .affinity(json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}]}}}))
            .build();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let constraints = constraints_of(&pod, WhenUnsatisfiable::DoNotSchedule);
        let one = FilterState::compute(constraints.clone(), &pod, &snap, None);
        let split = FilterState::compute(constraints, &pod, &snap, Some(&pool));
        assert_eq!(one.counts, split.counts);
        assert!(one.counts[0]["zone1"] > 0);
        for i in 0..2 {
            assert_eq!(one.paths[i].min(), split.paths[i].min(), "constraint {i}");
        }
    }

    /// `per_node[i]` pods labelled foo placed on the i-th named node.
    fn matching(per_node: &[(&'static str, usize)]) -> Vec<(&'static str, Pod)> {
        let mut out = Vec::new();
        for (node, n) in per_node {
            for i in 0..*n {
                out.push((
                    *node,
                    P::new(&format!("{node}-{i}"))
                        .labels(&[("foo", "")])
                        .build(),
                ));
            }
        }
        out
    }

    fn verdicts(
        pod: P,
        nodes: Vec<Node>,
        placed: Vec<(&str, Pod)>,
    ) -> BTreeMap<String, Result<(), Rejection>> {
        filter_all(
            &PodTopologySpread::default(),
            &pod.build(),
            &cluster(nodes, placed),
        )
    }

    fn passing(pod: P, nodes: Vec<Node>, placed: Vec<(&str, Pod)>) -> Vec<String> {
        let res = verdicts(pod, nodes, placed);
        for r in res.values() {
            if let Err(e) = r {
                assert!(
                    e == &Rejection::new(ERR_CONSTRAINTS)
                        || e == &Rejection::unresolvable(ERR_MISSING_LABEL),
                    "{e:?}"
                );
            }
        }
        res.into_iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| n)
            .collect()
    }

    /// Upstream's PreFilter says Skip when the pod has no DoNotSchedule
    /// constraint (its ScheduleAnyway ones are Score's), and runs with one.
    #[test]
    fn pre_filter_skips_without_a_do_not_schedule_constraint() {
        let snap = cluster(four_nodes(), vec![]);
        let decide = |pod: &Pod| {
            PodTopologySpread::default()
                .pre_filter(&ctx(pod, &snap), &mut CycleState::default())
                .unwrap()
        };
        assert_eq!(decide(&P::new("plain").build()), Decision::Skip);
        let anyway = incoming(json!([constraint(1, ZONE, "ScheduleAnyway")])).build();
        assert_eq!(decide(&anyway), Decision::Skip);
        let strict = incoming(json!([constraint(1, ZONE, "DoNotSchedule")])).build();
        assert_eq!(decide(&strict), Decision::Run);
    }

    #[test]
    fn no_constraints_no_filtering() {
        let res = verdicts(P::new("p"), four_nodes(), matching(&[("node-a", 3)]));
        assert!(res.values().all(Result::is_ok));
    }

    #[test]
    fn no_existing_pods_all_fit() {
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        assert_eq!(passing(pod, four_nodes(), vec![]).len(), 4);
    }

    #[test]
    fn zones_balanced_3_3_all_fit() {
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        let placed = matching(&[("node-a", 2), ("node-b", 1), ("node-x", 1), ("node-y", 2)]);
        assert_eq!(passing(pod, four_nodes(), placed).len(), 4);
    }

    #[test]
    fn zones_2_1_only_the_emptier_zone_fits() {
        // zone1 has 2, zone2 has 1: 2 + 1 - 1 = 2 > 1 for zone1.
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        let placed = matching(&[("node-a", 2), ("node-y", 1)]);
        let res = verdicts(pod, four_nodes(), placed);
        assert_eq!(res["node-a"], unschedulable(ERR_CONSTRAINTS));
        assert_eq!(res["node-b"], unschedulable(ERR_CONSTRAINTS));
        assert_eq!(res["node-x"], ok());
        assert_eq!(res["node-y"], ok());
    }

    #[test]
    fn three_zones_max_skew_1() {
        // a: 1, b: 1, c: 0 -> only c fits (1 + 1 - 0 = 2 > 1 elsewhere).
        let nodes = vec![
            N::new("a1").labels(&[(ZONE, "a")]).build(),
            N::new("b1").labels(&[(ZONE, "b")]).build(),
            N::new("c1").labels(&[(ZONE, "c")]).build(),
        ];
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        assert_eq!(
            passing(pod, nodes.clone(), matching(&[("a1", 1), ("b1", 1)])),
            vec!["c1"]
        );
        // a: 1, b: 1, c: 1 -> every zone fits.
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        assert_eq!(
            passing(pod, nodes, matching(&[("a1", 1), ("b1", 1), ("c1", 1)])).len(),
            3
        );
    }

    #[test]
    fn node_missing_the_key_is_unresolvable_and_not_a_domain() {
        let mut nodes = four_nodes();
        nodes[1] = N::new("node-b").labels(&[(HOSTNAME, "node-b")]).build();
        // node-b's pods do not count: zone1 has 1 (node-a), zone2 has 2.
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        let placed = matching(&[("node-a", 1), ("node-b", 5), ("node-x", 2)]);
        let res = verdicts(pod, nodes, placed);
        assert_eq!(res["node-a"], ok());
        assert_eq!(res["node-b"], unresolvable(ERR_MISSING_LABEL));
        assert_eq!(res["node-x"], unschedulable(ERR_CONSTRAINTS));
        assert_eq!(res["node-y"], unschedulable(ERR_CONSTRAINTS));
    }

    #[test]
    fn nodes_2_1_0_3_only_the_empty_node_fits() {
        let placed = || matching(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]);
        let pod = incoming(json!([constraint(1, HOSTNAME, "DoNotSchedule")]));
        assert_eq!(passing(pod, four_nodes(), placed()), vec!["node-x"]);
        // maxSkew 2: node-b (1 + 1 - 0 = 2) fits too.
        let pod = incoming(json!([constraint(2, HOSTNAME, "DoNotSchedule")]));
        assert_eq!(
            passing(pod, four_nodes(), placed()),
            vec!["node-b", "node-x"]
        );
        // A pod its own selector does not match adds nothing to the skew.
        let pod = P::new("p").spec(
            "topologySpreadConstraints",
            json!([constraint(1, HOSTNAME, "DoNotSchedule")]),
        );
        assert_eq!(
            passing(pod, four_nodes(), placed()),
            vec!["node-b", "node-x"]
        );
    }

    #[test]
    fn only_nodes_passing_node_affinity_are_counted() {
        // node-b and node-x are excluded by the pod's node affinity, so the
        // minimum is node-a's 2: node-a 2 + 1 - 2 = 1 fits, node-y 3 does not.
        let pod = incoming(json!([constraint(1, HOSTNAME, "DoNotSchedule")])).affinity(json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME, "operator": "NotIn", "values": ["node-b", "node-x"]}
            ]}]}
        }}));
        let res = verdicts(
            pod,
            four_nodes(),
            matching(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
        );
        assert_eq!(res["node-a"], ok());
        assert_eq!(res["node-y"], unschedulable(ERR_CONSTRAINTS));
    }

    /// Upstream filtering_test "NodeAffinityPolicy honored with labelSelectors"
    /// and its Ignore twin: with Ignore, nodes outside the pod's node
    /// affinity count too (node-x's 0 becomes the minimum).
    #[test]
    fn node_affinity_policy_ignore_counts_every_node() {
        let with = |policy: Option<&str>| {
            let mut c = constraint(1, HOSTNAME, "DoNotSchedule");
            if let Some(p) = policy {
                c["nodeAffinityPolicy"] = json!(p);
            }
            let pod = incoming(json!([c])).affinity(json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": HOSTNAME, "operator": "NotIn", "values": ["node-b", "node-x"]}
                ]}]}
            }}));
            verdicts(
                pod,
                four_nodes(),
                matching(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            )
        };
        assert_eq!(with(None)["node-a"], ok());
        assert_eq!(with(Some("Honor"))["node-a"], ok());
        assert_eq!(
            with(Some("Ignore"))["node-a"],
            unschedulable(ERR_CONSTRAINTS)
        );
    }

    /// `nodeTaintsPolicy: Honor` leaves out nodes whose NoSchedule taints
    /// the pod does not tolerate; the default (Ignore) counts them.
    #[test]
    fn node_taints_policy_honor_leaves_out_untolerated_nodes() {
        let nodes = || {
            let mut n = four_nodes();
            n[1] = N::new("node-b")
                .labels(&[(HOSTNAME, "node-b"), (ZONE, "zone1")])
                .taints(json!([{"key": "k", "value": "v", "effect": "NoSchedule"}]))
                .build();
            n
        };
        let placed = || matching(&[("node-a", 1), ("node-x", 1), ("node-y", 1)]);
        let mut c = constraint(1, HOSTNAME, "DoNotSchedule");
        let ignore = passing(incoming(json!([c.clone()])), nodes(), placed());
        // node-b (0 pods) is the minimum: the others (1 + 1 - 0) fail; node-b
        // itself passes this plugin (TaintToleration rejects it).
        assert_eq!(ignore, ["node-b"]);
        c["nodeTaintsPolicy"] = json!("Honor");
        // With Honor node-b is no domain: the minimum is 1 and every node
        // passes (node-b with its 0 too, as upstream; TaintToleration
        // rejects it).
        let honor = passing(incoming(json!([c.clone()])), nodes(), placed());
        assert_eq!(honor, ["node-a", "node-b", "node-x", "node-y"]);
        // A pod that tolerates the taint counts node-b again.
        let tolerant =
            incoming(json!([c])).tolerations(json!([{"key": "k", "operator": "Exists"}]));
        assert_eq!(passing(tolerant, nodes(), placed()), ["node-b"]);
    }

    /// Upstream filtering_test "minDomains": fewer eligible domains than
    /// `minDomains` make the global minimum 0.
    #[test]
    fn min_domains_above_the_domain_count_makes_the_minimum_zero() {
        let placed = || matching(&[("node-a", 1), ("node-x", 1)]);
        let c = constraint(1, ZONE, "DoNotSchedule");
        assert_eq!(
            passing(incoming(json!([c.clone()])), four_nodes(), placed()).len(),
            4
        );
        let mut c3 = c.clone();
        c3["minDomains"] = json!(3);
        assert!(passing(incoming(json!([c3])), four_nodes(), placed()).is_empty());
        let mut c2 = c;
        c2["minDomains"] = json!(2);
        assert_eq!(
            passing(incoming(json!([c2])), four_nodes(), placed()).len(),
            4
        );
    }

    /// `matchLabelKeys` narrows the selector to pods with the incoming
    /// pod's values (a new ReplicaSet revision spreads on its own).
    #[test]
    fn match_label_keys_count_only_the_same_revision() {
        let mut c = constraint(1, HOSTNAME, "DoNotSchedule");
        c["matchLabelKeys"] = json!(["pod-template-hash"]);
        let pod = P::new("p")
            .labels(&[("foo", ""), ("pod-template-hash", "new")])
            .spec("topologySpreadConstraints", json!([c]));
        let old = |name: &str| {
            P::new(name)
                .labels(&[("foo", ""), ("pod-template-hash", "old")])
                .build()
        };
        let new = |name: &str| {
            P::new(name)
                .labels(&[("foo", ""), ("pod-template-hash", "new")])
                .build()
        };
        // Old-revision pods on node-a and node-b do not count; the new one
        // on node-x does: every node but node-x passes.
        let placed = vec![
            ("node-a", old("o1")),
            ("node-b", old("o2")),
            ("node-a", old("o3")),
            ("node-x", new("n1")),
        ];
        assert_eq!(
            passing(pod, four_nodes(), placed),
            ["node-a", "node-b", "node-y"]
        );
    }

    #[test]
    fn bad_policies_name_their_field() {
        for (field, value, cause) in [
            (
                "nodeTaintsPolicy",
                json!("Sometimes"),
                "unknown value \"Sometimes\"",
            ),
            ("minDomains", json!(0), "must be greater than zero"),
        ] {
            let mut c = constraint(1, ZONE, "DoNotSchedule");
            c[field] = value;
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x"}], "topologySpreadConstraints": [c]}
            }))
            .unwrap();
            let e = Pod::from_k8s(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!("spec.topologySpreadConstraints[0].{field}"))
                    && e.contains(cause),
                "{e}"
            );
        }
    }

    #[test]
    fn pods_of_other_namespaces_and_non_matching_pods_do_not_count() {
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        let placed = vec![
            (
                "node-a",
                P::new("o1").ns("other").labels(&[("foo", "")]).build(),
            ),
            (
                "node-a",
                P::new("o2").ns("other").labels(&[("foo", "")]).build(),
            ),
            ("node-b", P::new("x").labels(&[("bar", "")]).build()),
        ];
        assert_eq!(passing(pod, four_nodes(), placed).len(), 4);
    }

    /// Upstream 1.37 counts per constraint: two constraints on one key
    /// with different selectors each see their own pods.
    #[test]
    fn two_constraints_on_one_key_count_their_own_pods() {
        let with_key = |key: &str| {
            json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}})
        };
        let pod = P::new("p").labels(&[("foo", ""), ("bar", "")]).spec(
            "topologySpreadConstraints",
            json!([with_key("foo"), with_key("bar")]),
        );
        // foo: zone1 2, zone2 0 (only zone2 fits); bar: zone1 0, zone2 1
        // (only zone1 fits): no node fits both.
        let mut placed = matching(&[("node-a", 2)]);
        placed.push(("node-x", P::new("bar-1").labels(&[("bar", "")]).build()));
        assert_eq!(passing(pod, four_nodes(), placed), Vec::<String>::new());
    }

    #[test]
    fn two_constraints_must_both_hold() {
        // zone: zone1 3, zone2 1 -> zone1 fails; hostname: a 2, b 1, x 0, y 1.
        let pod = incoming(json!([
            constraint(1, ZONE, "DoNotSchedule"),
            constraint(1, HOSTNAME, "DoNotSchedule")
        ]));
        let placed = matching(&[("node-a", 2), ("node-b", 1), ("node-y", 1)]);
        assert_eq!(passing(pod, four_nodes(), placed), vec!["node-x"]);
    }

    #[test]
    fn absent_selector_matches_nothing_and_empty_selector_counts_nothing() {
        let absent =
            json!([{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]);
        let placed = matching(&[("node-a", 5)]);
        assert_eq!(
            passing(incoming(absent), four_nodes(), placed.clone()).len(),
            4
        );
        let empty = json!([{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]);
        assert_eq!(passing(incoming(empty), four_nodes(), placed).len(), 4);
    }

    #[test]
    fn schedule_anyway_constraints_do_not_filter() {
        let pod = incoming(json!([constraint(1, ZONE, "ScheduleAnyway")]));
        let mut nodes = four_nodes();
        nodes.push(N::new("bare").build());
        let res = verdicts(pod, nodes, matching(&[("node-a", 5)]));
        assert!(res.values().all(Result::is_ok));
    }

    #[test]
    fn filter_without_pre_filter_gives_the_same_answer() {
        let snap = cluster(four_nodes(), matching(&[("node-a", 2), ("node-y", 1)]));
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")])).build();
        let ctx = ctx(&pod, &snap);
        let state = CycleState::default();
        assert_eq!(
            PodTopologySpread::default().filter(&ctx, &state, snap.by_name("node-a").unwrap()),
            unschedulable(ERR_CONSTRAINTS)
        );
        assert_eq!(
            PodTopologySpread::default().filter(&ctx, &state, snap.by_name("node-x").unwrap()),
            ok()
        );
    }

    // ---- scoring --------------------------------------------------------

    fn score(
        pod: P,
        nodes: Vec<Node>,
        placed: Vec<(&str, Pod)>,
    ) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
        let snap = cluster(nodes, placed);
        let pod = pod.build();
        (
            raw_scores(&PodTopologySpread::default(), &pod, &snap),
            score_all(&PodTopologySpread::default(), &pod, &snap),
        )
    }

    fn vals(m: &BTreeMap<String, i64>) -> Vec<i64> {
        m.values().copied().collect()
    }

    #[test]
    fn zone_spread_scores_emptier_zones_higher() {
        // zone1 has 2 matching pods, zone2 1; two domains: weight ln(4).
        // Raw: zone1 round(2 * 1.386) = 3, zone2 round(1.386) = 1.
        // Normalized: 100 * (3 + 1 - s) / 3 -> zone1 33, zone2 100.
        let pod = incoming(json!([constraint(1, ZONE, "ScheduleAnyway")]));
        let (raw, norm) = score(pod, four_nodes(), matching(&[("node-a", 2), ("node-y", 1)]));
        assert_eq!(vals(&raw), vec![3, 3, 1, 1]);
        assert_eq!(vals(&norm), vec![33, 33, 100, 100]);
    }

    #[test]
    fn hostname_spread_counts_per_node() {
        // a 2, b 1, x 0, y 3 over 4 scored nodes: weight ln(6) = 1.792.
        // Raw: a round(3.58) = 4, b round(1.79) = 2, x 0, y round(5.38) = 5.
        // Normalized: 100 * (5 + 0 - s) / 5 -> a 20, b 60, x 100, y 0.
        let pod = incoming(json!([constraint(1, HOSTNAME, "ScheduleAnyway")]));
        let (raw, norm) = score(
            pod,
            four_nodes(),
            matching(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
        );
        assert_eq!(vals(&raw), vec![4, 2, 0, 5]);
        assert_eq!(vals(&norm), vec![20, 60, 100, 0]);
    }

    #[test]
    fn max_skew_softens_differences() {
        // maxSkew 3 adds 2 to every raw score: zone1 3 + 2 = 5, zone2 1 + 2 = 3.
        // Normalized: 100 * (5 + 3 - s) / 5 -> zone1 60, zone2 100.
        let pod = incoming(json!([constraint(3, ZONE, "ScheduleAnyway")]));
        let (raw, norm) = score(pod, four_nodes(), matching(&[("node-a", 2), ("node-y", 1)]));
        assert_eq!(vals(&raw), vec![5, 5, 3, 3]);
        assert_eq!(vals(&norm), vec![60, 60, 100, 100]);
    }

    #[test]
    fn nodes_missing_a_key_score_zero() {
        let mut nodes = four_nodes();
        nodes.push(N::new("node-z").labels(&[(HOSTNAME, "node-z")]).build());
        let pod = incoming(json!([constraint(1, ZONE, "ScheduleAnyway")]));
        let (_, norm) = score(pod, nodes, matching(&[("node-a", 2), ("node-y", 1)]));
        assert_eq!(norm["node-z"], 0);
        assert_eq!(norm["node-x"], 100);
    }

    #[test]
    fn no_matching_pods_scores_all_max() {
        let pod = incoming(json!([constraint(1, ZONE, "ScheduleAnyway")]));
        let (raw, norm) = score(pod, four_nodes(), vec![]);
        assert_eq!(vals(&raw), vec![0, 0, 0, 0]);
        assert_eq!(vals(&norm), vec![100, 100, 100, 100]);
    }

    #[test]
    fn without_soft_constraints_scores_stay_zero() {
        let pod = incoming(json!([constraint(1, ZONE, "DoNotSchedule")]));
        let (_, norm) = score(pod, four_nodes(), matching(&[("node-a", 2)]));
        assert_eq!(vals(&norm), vec![0, 0, 0, 0]);
    }

    #[test]
    fn only_feasible_domains_are_scored() {
        // Only zone2 nodes are feasible: one domain, weight ln(3).
        // node-x zone2 count 1 (node-y's pod) -> round(1.0986) = 1 for both.
        let snap = cluster(four_nodes(), matching(&[("node-a", 4), ("node-y", 1)]));
        let pod = incoming(json!([constraint(1, ZONE, "ScheduleAnyway")])).build();
        let feasible = infos(&snap, &["node-x", "node-y"]);
        let raw = score_nodes(&PodTopologySpread::default(), &pod, &snap, &feasible, false);
        assert_eq!(vals(&raw), vec![1, 1]);
        let norm = score_nodes(&PodTopologySpread::default(), &pod, &snap, &feasible, true);
        assert_eq!(vals(&norm), vec![100, 100]);
    }

    // ---- default constraints -------------------------------------------

    fn with_workloads(snap: &mut Snapshot, w: Workloads) {
        snap.workloads = Arc::new(w);
    }

    /// Upstream's scoring test "default constraints with a Service"
    /// (system defaulting): matching pods 4/3/2/1 on nodes without zones;
    /// the zone constraint scores nothing on them, the hostname one gives
    /// the scores of a single constraint.
    #[test]
    fn system_defaults_spread_the_pods_of_a_service_over_hosts() {
        let nodes: Vec<Node> = ["node-a", "node-b", "node-c", "node-d"]
            .iter()
            .map(|n| N::new(n).labels(&[(HOSTNAME, n)]).build())
            .collect();
        let mut placed = Vec::new();
        for (node, n) in [("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)] {
            for i in 0..n {
                placed.push((
                    node,
                    P::new(&format!("p-{node}-{i}"))
                        .labels(&[("foo", "")])
                        .build(),
                ));
            }
        }
        let mut snap = cluster(nodes, placed);
        let pod = P::new("p").labels(&[("foo", "")]).build();
        let system = PodTopologySpread::system();
        // No Service selects the pod: nothing to spread by.
        assert_eq!(vals(&score_all(&system, &pod, &snap)), vec![0, 0, 0, 0]);
        let mut w = Workloads::default();
        w.set_service(
            "default",
            "svc",
            Some([("foo".to_string(), String::new())].into()),
        );
        with_workloads(&mut snap, w.clone());
        assert_eq!(
            vals(&score_all(&system, &pod, &snap)),
            vec![44, 66, 77, 100]
        );
        // A Service of another namespace, or one that does not select the
        // pod, does not count.
        let mut other = Workloads::default();
        other.set_service(
            "elsewhere",
            "svc",
            Some([("foo".to_string(), String::new())].into()),
        );
        other.set_service(
            "default",
            "web",
            Some([("app".to_string(), "web".to_string())].into()),
        );
        with_workloads(&mut snap, other);
        assert_eq!(vals(&score_all(&system, &pod, &snap)), vec![0, 0, 0, 0]);
        // List defaulting without constraints: none.
        with_workloads(&mut snap, w);
        assert_eq!(
            vals(&score_all(&PodTopologySpread::default(), &pod, &snap)),
            vec![0, 0, 0, 0]
        );
    }

    /// Upstream's PreScore test "system default constraints and a
    /// replicaset": nodes without a zone are not ignored, they form the
    /// zone `""`; the ReplicaSet is found by the pod's owner reference.
    #[test]
    fn system_defaults_use_the_replica_set_of_the_pod_and_score_nodes_without_zones() {
        let nodes = vec![
            N::new("node-a")
                .labels(&[(HOSTNAME, "node-a"), (TOPOLOGY_ZONE, "mars")])
                .build(),
            N::new("node-b")
                .labels(&[(HOSTNAME, "node-b"), (TOPOLOGY_ZONE, "mars")])
                .build(),
            N::new("node-c").labels(&[(HOSTNAME, "node-c")]).build(),
            N::new("node-d").labels(&[(HOSTNAME, "node-d")]).build(),
        ];
        let placed = vec![("node-a", P::new("old").labels(&[("foo", "x")]).build())];
        let mut snap = cluster(nodes, placed);
        let pod = P::new("p")
            .labels(&[("foo", "tar"), ("baz", "sup")])
            .owner("apps/v1", "ReplicaSet", "rs1")
            .build();
        let system = PodTopologySpread::system();
        let foo_exists = LabelSelector::parse(
            &serde_json::from_value(
                json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}),
            )
            .unwrap(),
        )
        .unwrap();
        let mut w = Workloads::default();
        w.set_controller(
            "default",
            crate::model::workload::ControllerKind::ReplicaSet,
            "rs1",
            Some(foo_exists.clone()),
        );
        with_workloads(&mut snap, w);
        // hostname: weight ln(4 + 2), zone: domains mars and "", ln(2 + 2).
        // node-a: 1 * 1.79 + 2 + 1 * 1.39 + 4 = 9; node-b: 2 + 1.39 + 4 = 7;
        // node-c/d: 2 (no zone label: the zone constraint adds nothing).
        assert_eq!(vals(&raw_scores(&system, &pod, &snap)), vec![9, 7, 2, 2]);
        assert_eq!(
            vals(&score_all(&system, &pod, &snap)),
            vec![22, 44, 100, 100]
        );
        // The same owner under another group is not a ReplicaSet.
        let other = P::new("p")
            .labels(&[("foo", "tar")])
            .owner("example.com/v1", "ReplicaSet", "rs1")
            .build();
        assert_eq!(vals(&raw_scores(&system, &other, &snap)), vec![0, 0, 0, 0]);
        // List defaults require every key: nodes without a zone are ignored
        // (hostname weight ln(2 + 2), zone ln(1 + 2): raw 8 and 7).
        let listed = PodTopologySpread::from_args(Some(&json!({"defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
                {"maxSkew": 5, "topologyKey": TOPOLOGY_ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]})))
        .unwrap();
        assert_eq!(vals(&score_all(&listed, &pod, &snap)), vec![87, 100, 0, 0]);
    }

    /// `defaultingType: List` with a DoNotSchedule default filters as the
    /// pod's own constraint would.
    #[test]
    fn listed_do_not_schedule_defaults_filter() {
        let listed = PodTopologySpread::from_args(Some(&json!({"defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]})))
        .unwrap();
        let mut snap = cluster(four_nodes(), matching(&[("node-a", 2)]));
        let mut w = Workloads::default();
        w.set_service(
            "default",
            "svc",
            Some([("foo".to_string(), String::new())].into()),
        );
        with_workloads(&mut snap, w);
        let pod = P::new("p").labels(&[("foo", "")]).build();
        let verdicts = filter_all(&listed, &pod, &snap);
        assert_eq!(verdicts["node-a"], unschedulable(ERR_CONSTRAINTS));
        assert_eq!(verdicts["node-x"], ok());
    }

    #[test]
    fn args() {
        assert!(PodTopologySpread::from_args(None).unwrap().system_defaulted);
        assert!(
            PodTopologySpread::from_args(Some(&json!({"defaultingType": "System"})))
                .unwrap()
                .system_defaulted
        );
        let list = PodTopologySpread::from_args(Some(&json!({"defaultingType": "List"}))).unwrap();
        assert!(!list.system_defaulted && list.defaults.is_empty());
        let err = |v: Value| PodTopologySpread::from_args(Some(&v)).unwrap_err();
        assert_eq!(
            err(
                json!({"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]})
            ),
            "defaultConstraints: must be empty with defaultingType: System"
        );
        assert_eq!(
            err(
                json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]})
            ),
            "defaultConstraints[0].maxSkew: must be at least 1, got 0"
        );
        assert!(err(
            json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1,
            "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}]})
        )
        .starts_with("defaultConstraints[0].labelSelector: must not be set"));
        assert!(err(json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]}))
        .starts_with("defaultConstraints[1]: duplicate topologyKey"));
        assert!(err(json!({"defaultingType": "Other"})).starts_with("defaultingType"));
        assert!(err(json!({"defaultConstraints": 1})).starts_with("defaultConstraints"));
        assert!(err(json!({"foo": 1})).contains("unknown field"));
    }
}
