//! InterPodAffinity: required pod affinity/anti-affinity (of the incoming
//! pod, and existing pods' anti-affinity towards it) filter nodes by
//! topology domain; preferred terms (both directions) score them.
//!
//! PreFilter and PreScore count, once per cycle, how many placed pods match
//! each term per topology pair (`key=value` of the placed pod's node), so
//! that Filter and Score only look up the node's labels.

use std::sync::Arc;

use serde_json::Value;

use crate::framework::interface::MAX_NODE_SCORE;
use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PluginError,
    PreFilterPlugin, PreScorePlugin, Rejection, ScorePlugin, Snapshot,
};
use crate::model::namespace::Namespaces;
use crate::model::pod::PodAffinityTerm;
use crate::model::{Node, Pod};

use super::helpers::{
    args_object, int_in, json_type, reject_unknown, split_over_nodes, TopologyCounts,
};

pub const NAME: &str = "InterPodAffinity";

/// Upstream `ErrReasonAffinityRulesNotMatch`.
pub const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// Upstream `ErrReasonAntiAffinityRulesNotMatch`.
pub const ERR_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// Upstream `ErrReasonExistingAntiAffinityRulesNotMatch`.
pub const ERR_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

const PRE_FILTER_KEY: &str = "PreFilterInterPodAffinity";
const PRE_SCORE_KEY: &str = "PreScoreInterPodAffinity";

/// Upstream's default `hardPodAffinityWeight`.
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;

/// The InterPodAffinity plugin.
#[derive(Debug, Clone)]
pub struct InterPodAffinity {
    /// Score weight given to an existing pod's *required* affinity term the
    /// incoming pod matches (symmetry: such pods attract the incoming pod).
    pub hard_pod_affinity_weight: i32,
    /// Skip existing pods' preferred terms when the incoming pod has no
    /// preferred terms of its own (a scoring shortcut upstream offers).
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinity {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

impl InterPodAffinity {
    /// Upstream `InterPodAffinityArgs`:
    /// `{"hardPodAffinityWeight": 0..=100, "ignorePreferredTermsOfExistingPods": bool}`.
    pub fn from_args(args: Option<&Value>) -> Result<Self, String> {
        let mut out = Self::default();
        let Some(obj) = args_object(NAME, args)? else {
            return Ok(out);
        };
        reject_unknown(
            &obj,
            &[
                "hardPodAffinityWeight",
                "ignorePreferredTermsOfExistingPods",
            ],
            "",
        )?;
        if let Some(w) = obj.get("hardPodAffinityWeight") {
            let w = int_in(w, 0..=100, "hardPodAffinityWeight")?;
            out.hard_pod_affinity_weight =
                i32::try_from(w).unwrap_or(DEFAULT_HARD_POD_AFFINITY_WEIGHT);
        }
        if let Some(b) = obj.get("ignorePreferredTermsOfExistingPods") {
            out.ignore_preferred_terms_of_existing_pods = b.as_bool().ok_or_else(|| {
                format!(
                    "ignorePreferredTermsOfExistingPods: expected a boolean, got {}",
                    json_type(b)
                )
            })?;
        }
        Ok(out)
    }
}

/// Upstream `podMatchesAllAffinityTerms`: false for no terms.
fn matches_all(pod: &Pod, terms: &[PodAffinityTerm], ns: &Namespaces) -> bool {
    !terms.is_empty()
        && terms
            .iter()
            .all(|t| t.matches(&pod.namespace, &pod.labels, ns))
}

/// What Filter needs, computed once per cycle.
#[derive(Debug, Default, Clone)]
struct FilterState {
    /// Pairs holding existing pods whose required anti-affinity matches the
    /// incoming pod.
    existing_anti: TopologyCounts,
    /// Pairs holding existing pods that match *all* the incoming pod's
    /// required affinity terms.
    affinity: TopologyCounts,
    /// Pairs holding existing pods that match an incoming required
    /// anti-affinity term.
    anti: TopologyCounts,
    /// The incoming pod matches all its own required affinity terms.
    self_affine: bool,
}

impl FilterState {
    fn compute(pod: &Pod, snapshot: &Snapshot, pool: Option<&rayon::ThreadPool>) -> Self {
        // Without required terms of its own, only the nodes holding a pod
        // with affinity terms can count (see `count`).
        let own = !pod.pod_affinity.required_affinity.is_empty()
            || !pod.pod_affinity.required_anti_affinity.is_empty();
        let nodes: Vec<&NodeInfo> = if own {
            snapshot.nodes().collect()
        } else {
            snapshot.nodes_with_affinity_pods().collect()
        };
        let ns = &*snapshot.namespaces;
        let mut s = split_over_nodes(
            &nodes,
            pool,
            |chunk| Self::count(pod, chunk, ns),
            Self::merged,
        );
        s.self_affine = matches_all(pod, &pod.pod_affinity.required_affinity, ns);
        s
    }

    fn merged(self, other: Self) -> Self {
        Self {
            existing_anti: self.existing_anti.merged(other.existing_anti),
            affinity: self.affinity.merged(other.affinity),
            anti: self.anti.merged(other.anti),
            self_affine: self.self_affine || other.self_affine,
        }
    }

    /// The counts over `nodes`.
    fn count(pod: &Pod, nodes: &[&NodeInfo], ns: &Namespaces) -> Self {
        let required_affinity = &pod.pod_affinity.required_affinity;
        let required_anti = &pod.pod_affinity.required_anti_affinity;
        let mut s = Self::default();
        // Without required terms of its own, only placed pods with required
        // anti-affinity can constrain the pod (upstream's
        // `PodsWithRequiredAntiAffinity`).
        let all = !required_affinity.is_empty() || !required_anti.is_empty();
        for info in nodes {
            let node = &info.node;
            let pods = if all {
                &info.pods
            } else {
                &info.pods_with_required_anti_affinity
            };
            // The incoming pod itself may still be recorded (a retry of an
            // assumed pod); it must not attract or repel itself.
            for existing in pods.iter().filter(|p| p.uid != pod.uid) {
                for t in &existing.pod_affinity.required_anti_affinity {
                    if t.matches(&pod.namespace, &pod.labels, ns) {
                        s.existing_anti.add_for_node(node, &t.topology_key, 1);
                    }
                }
                if matches_all(existing, required_affinity, ns) {
                    for t in required_affinity {
                        s.affinity.add_for_node(node, &t.topology_key, 1);
                    }
                }
                for t in required_anti {
                    if t.matches(&existing.namespace, &existing.labels, ns) {
                        s.anti.add_for_node(node, &t.topology_key, 1);
                    }
                }
            }
        }
        s
    }

    /// Upstream `updateWithPod`: `pod` joins (`delta` 1) or leaves (-1)
    /// `node` in a what-if evaluation of the cycle's pod `incoming`.
    fn update(&mut self, pod: &Pod, incoming: &Pod, node: &Node, delta: i64, ns: &Namespaces) {
        for t in &pod.pod_affinity.required_anti_affinity {
            if t.matches(&incoming.namespace, &incoming.labels, ns) {
                self.existing_anti
                    .add_for_node_dropping_zero(node, &t.topology_key, delta);
            }
        }
        let required_affinity = &incoming.pod_affinity.required_affinity;
        if matches_all(pod, required_affinity, ns) {
            for t in required_affinity {
                self.affinity
                    .add_for_node_dropping_zero(node, &t.topology_key, delta);
            }
        }
        for t in &incoming.pod_affinity.required_anti_affinity {
            if t.matches(&pod.namespace, &pod.labels, ns) {
                self.anti
                    .add_for_node_dropping_zero(node, &t.topology_key, delta);
            }
        }
    }

    /// Upstream `satisfyPodAffinity`, including the first-pod special case:
    /// when no placed pod matches the terms and the pod matches its own
    /// terms, it may go to any node that has all the topology keys (else a
    /// group of pods with affinity to each other could never start).
    fn satisfies_affinity(&self, pod: &Pod, node: &Node) -> bool {
        let terms = &pod.pod_affinity.required_affinity;
        let mut pods_exist = true;
        for t in terms {
            match node.labels.get(&t.topology_key) {
                None => return false,
                Some(v) => {
                    if self.affinity.get(&t.topology_key, v) <= 0 {
                        pods_exist = false;
                    }
                }
            }
        }
        pods_exist || (self.affinity.is_empty() && self.self_affine)
    }

    /// Upstream `satisfyPodAntiAffinity`.
    fn satisfies_anti_affinity(&self, pod: &Pod, node: &Node) -> bool {
        pod.pod_affinity
            .required_anti_affinity
            .iter()
            .all(|t| self.anti.get_for_node(node, &t.topology_key) <= 0)
    }

    /// Upstream `satisfyExistingPodsAntiAffinity`.
    fn satisfies_existing_anti_affinity(&self, node: &Node) -> bool {
        self.existing_anti.is_empty() || !self.existing_anti.any_positive_for_labels(node)
    }

    fn check(&self, pod: &Pod, node: &Node) -> Result<(), Rejection> {
        if !self.satisfies_affinity(pod, node) {
            // Preempting pods cannot create the pods the affinity needs.
            return Err(Rejection::unresolvable(ERR_AFFINITY));
        }
        if !self.satisfies_anti_affinity(pod, node) {
            return Err(Rejection::new(ERR_ANTI_AFFINITY));
        }
        if !self.satisfies_existing_anti_affinity(node) {
            return Err(Rejection::new(ERR_EXISTING_ANTI_AFFINITY));
        }
        Ok(())
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &str {
        NAME
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let s = FilterState::compute(ctx.pod, ctx.snapshot, ctx.pool);
        // Upstream: no placed pod's required anti-affinity matches the pod
        // and it has no required terms of its own: a Skip (no Filter, no
        // AddPod/RemovePod for this pod).
        let affinity = &ctx.pod.pod_affinity;
        if s.existing_anti.is_empty()
            && affinity.required_affinity.is_empty()
            && affinity.required_anti_affinity.is_empty()
        {
            return Ok(Decision::Skip);
        }
        state.write(PRE_FILTER_KEY, s);
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
            s.update(pod, ctx.pod, &node.node, 1, &ctx.snapshot.namespaces);
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
            s.update(pod, ctx.pod, &node.node, -1, &ctx.snapshot.namespaces);
        }
        Ok(())
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        _feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError> {
        state.write(
            PRE_SCORE_KEY,
            self.compute_scores(ctx.pod, ctx.snapshot, ctx.pool),
        );
        Ok(Decision::Run)
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        match state.read::<FilterState>(PRE_FILTER_KEY) {
            Some(s) => s.check(ctx.pod, &node.node),
            // PreFilter did not run (a caller filtering one node): compute
            // the same answer the slow way rather than guess.
            None => FilterState::compute(ctx.pod, ctx.snapshot, None).check(ctx.pod, &node.node),
        }
    }
}

/// What Score needs: the summed weights per topology pair.
#[derive(Debug, Default, Clone)]
struct ScoreState {
    topology_score: TopologyCounts,
}

/// Upstream `scoreMap.processTerm`: if `target` matches `term`, the pair
/// formed by `node` and the term's key gains `weight * multiplier`.
fn process_term(
    scores: &mut TopologyCounts,
    term: &PodAffinityTerm,
    weight: i32,
    target: &Pod,
    node: &Node,
    multiplier: i64,
    ns: &Namespaces,
) {
    if term.matches(&target.namespace, &target.labels, ns) {
        scores.add_for_node(
            node,
            &term.topology_key,
            i64::from(weight).saturating_mul(multiplier),
        );
    }
}

impl InterPodAffinity {
    fn compute_scores(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        pool: Option<&rayon::ThreadPool>,
    ) -> ScoreState {
        let mine = &pod.pod_affinity;
        let has_preferred =
            !mine.preferred_affinity.is_empty() || !mine.preferred_anti_affinity.is_empty();
        if self.ignore_preferred_terms_of_existing_pods && !has_preferred {
            return ScoreState::default();
        }
        // Without preferred terms of its own, only nodes with placed pods
        // with affinity can contribute (upstream `PodsWithAffinity`).
        let nodes: Vec<&NodeInfo> = if has_preferred {
            snapshot.nodes().collect()
        } else {
            snapshot.nodes_with_affinity_pods().collect()
        };
        let topology_score = split_over_nodes(
            &nodes,
            pool,
            |chunk| self.score_counts(pod, has_preferred, chunk, &snapshot.namespaces),
            TopologyCounts::merged,
        );
        ScoreState { topology_score }
    }

    /// The summed weights per topology pair over `nodes`.
    fn score_counts(
        &self,
        pod: &Pod,
        has_preferred: bool,
        nodes: &[&NodeInfo],
        ns: &Namespaces,
    ) -> TopologyCounts {
        let mine = &pod.pod_affinity;
        let mut s = ScoreState::default();
        for info in nodes {
            let node = &info.node;
            if node.labels.is_empty() {
                continue;
            }
            // Without preferred terms of its own, only placed pods with
            // affinity can contribute (upstream `PodsWithAffinity`).
            let pods = if has_preferred {
                &info.pods
            } else {
                &info.pods_with_affinity
            };
            for existing in pods.iter().filter(|p| p.uid != pod.uid) {
                let theirs = &existing.pod_affinity;
                // Without preferred terms of its own, only placed pods with
                // affinity can contribute (upstream `PodsWithAffinity`).
                if !has_preferred && theirs.is_empty() {
                    continue;
                }
                let scores = &mut s.topology_score;
                for (w, t) in &mine.preferred_affinity {
                    process_term(scores, t, *w, existing, node, 1, ns);
                }
                for (w, t) in &mine.preferred_anti_affinity {
                    process_term(scores, t, *w, existing, node, -1, ns);
                }
                if self.hard_pod_affinity_weight > 0 {
                    for t in &theirs.required_affinity {
                        process_term(scores, t, self.hard_pod_affinity_weight, pod, node, 1, ns);
                    }
                }
                for (w, t) in &theirs.preferred_affinity {
                    process_term(scores, t, *w, pod, node, 1, ns);
                }
                for (w, t) in &theirs.preferred_anti_affinity {
                    process_term(scores, t, *w, pod, node, -1, ns);
                }
            }
        }
        s.topology_score
    }
}

impl ScorePlugin for InterPodAffinity {
    /// The summed weights of the pairs the node is in: positive for
    /// affinity, negative for anti-affinity.
    fn score(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let s = state
            .read::<ScoreState>(PRE_SCORE_KEY)
            .ok_or_else(|| PluginError(format!("{NAME}: PreScore state missing")))?;
        Ok(s.topology_score.sum_for_node(&node.node))
    }

    /// Upstream: min-max scaling onto 0..=100 (the lowest raw score, which
    /// may be negative, maps to 0). Left as is (all 0) when no term matched
    /// anything, as upstream skips the plugin then.
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
        if s.topology_score.is_empty() {
            return Ok(Decision::Run);
        }
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
            return Ok(Decision::Run);
        };
        let diff = max.saturating_sub(min);
        for v in scores.iter_mut() {
            let f = if diff > 0 {
                MAX_NODE_SCORE as f64 * (v.saturating_sub(min) as f64 / diff as f64)
            } else {
                0.0
            };
            *v = f as i64;
        }
        Ok(Decision::Run)
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    let p = InterPodAffinity::from_args(args).map_err(|e| format!("{NAME} args: {e}"))?;
    let p = Arc::new(p);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_pre_score(&p)
        .with_score(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::framework::plugins::testutil::*;

    const HOST: &str = "kubernetes.io/hostname";
    const ZONE: &str = "topology.kubernetes.io/zone";

    fn term(key: &str, values: &[&str], topology_key: &str) -> Value {
        json!({
            "labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": values}]},
            "topologyKey": topology_key
        })
    }

    fn required_affinity(terms: Value) -> Value {
        json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}})
    }

    fn required_anti(terms: Value) -> Value {
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}})
    }

    fn weighted(w: i32, t: Value) -> Value {
        json!({"weight": w, "podAffinityTerm": t})
    }

    /// Upstream's PreFilter says Skip when nothing can constrain the pod:
    /// no required terms of its own and no placed pod's required
    /// anti-affinity matching it; it runs otherwise, and Filter then keeps
    /// the pod off the guarded node.
    #[test]
    fn pre_filter_skips_when_nothing_can_constrain_the_pod() {
        let nodes = vec![
            N::new("a").labels(&[(HOST, "a")]).build(),
            N::new("b").labels(&[(HOST, "b")]).build(),
        ];
        let guard = P::new("guard")
            .labels(&[("colour", "red")])
            .affinity(required_anti(json!([term("colour", &["blue"], HOST)])))
            .build();
        let snap = cluster(nodes, vec![("a", guard)]);
        let plugin = InterPodAffinity::default();
        let decide = |pod: &Pod| {
            plugin
                .pre_filter(&ctx(pod, &snap), &mut CycleState::default())
                .unwrap()
        };
        let red = P::new("red").labels(&[("colour", "red")]).build();
        assert_eq!(decide(&red), Decision::Skip);
        let blue = P::new("blue").labels(&[("colour", "blue")]).build();
        assert_eq!(decide(&blue), Decision::Run);
        let verdicts = filter_all(&plugin, &blue, &snap);
        assert!(
            verdicts["a"].is_err() && verdicts["b"].is_ok(),
            "{verdicts:?}"
        );
        let own = P::new("own")
            .affinity(required_affinity(json!([term("colour", &["red"], HOST)])))
            .build();
        assert_eq!(decide(&own), Decision::Run);
    }

    /// PreFilter's and PreScore's walks split over the workers give the
    /// counts of the walk on one thread.
    #[test]
    fn counts_split_over_workers_equal_one_threads() {
        let names: &'static [String] = (0..1500)
            .map(|i| format!("n{i:04}"))
            .collect::<Vec<_>>()
            .leak();
        let nodes: Vec<Node> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                N::new(n)
                    .labels(&[(HOST, n), (ZONE, &format!("z{}", i % 5))])
                    .build()
            })
            .collect();
        let mut placed = Vec::new();
        for (i, n) in names.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
            let colour = ["red", "blue"][i % 4 / 2];
            let mut p = P::new(&format!("p{i}")).labels(&[("colour", colour)]);
            if i % 6 == 0 {
                p = p.affinity(required_anti(json!([term("colour", &["red"], ZONE)])));
            } else if i % 10 == 0 {
                p = p.affinity(
                    json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    weighted(3, term("colour", &["red"], HOST))]}}),
                );
            }
            placed.push((n.as_str(), p.build()));
        }
        let snap = cluster(nodes, placed);
        let pod = P::new("in")
            .labels(&[("colour", "red")])
            .affinity(json!({
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term("colour", &["blue"], ZONE)],
                    "preferredDuringSchedulingIgnoredDuringExecution": [weighted(5, term("colour", &["red"], ZONE))],
                },
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("colour", &["red"], HOST)]},
            }))
            .build();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let one = FilterState::compute(&pod, &snap, None);
        let split = FilterState::compute(&pod, &snap, Some(&pool));
        assert_eq!(one.existing_anti, split.existing_anti);
        assert_eq!(one.affinity, split.affinity);
        assert_eq!(one.anti, split.anti);
        assert!(!one.existing_anti.is_empty() && !one.affinity.is_empty() && !one.anti.is_empty());
        let plugin = InterPodAffinity::default();
        let one = plugin.compute_scores(&pod, &snap, None);
        let split = plugin.compute_scores(&pod, &snap, Some(&pool));
        assert_eq!(one.topology_score, split.topology_score);
        assert!(!one.topology_score.is_empty());
    }

    /// Three nodes: n1, n2 in zone a, n3 in zone b, each with its hostname.
    fn nodes() -> Vec<Node> {
        vec![
            N::new("n1").labels(&[(HOST, "n1"), (ZONE, "a")]).build(),
            N::new("n2").labels(&[(HOST, "n2"), (ZONE, "a")]).build(),
            N::new("n3").labels(&[(HOST, "n3"), (ZONE, "b")]).build(),
        ]
    }

    fn run(
        pod: P,
        placed: Vec<(&str, Pod)>,
    ) -> std::collections::BTreeMap<String, Result<(), Rejection>> {
        filter_all(
            &InterPodAffinity::default(),
            &pod.build(),
            &cluster(nodes(), placed),
        )
    }

    #[test]
    fn pod_without_affinity_fits_everywhere() {
        let res = run(
            P::new("p"),
            vec![("n1", P::new("x").labels(&[("app", "db")]).build())],
        );
        assert!(res.values().all(Result::is_ok));
    }

    #[test]
    fn required_affinity_follows_matching_pods_topology() {
        let pod = P::new("p").affinity(required_affinity(json!([term("app", &["db"], ZONE)])));
        let res = run(
            pod,
            vec![("n1", P::new("db").labels(&[("app", "db")]).build())],
        );
        assert_eq!(res["n1"], ok());
        assert_eq!(res["n2"], ok(), "same zone as the db pod");
        assert_eq!(res["n3"], unresolvable(ERR_AFFINITY));
    }

    #[test]
    fn required_affinity_needs_a_matching_pod_or_self_match() {
        // Nothing matches and the pod does not match its own term.
        let pod = P::new("p").affinity(required_affinity(json!([term("app", &["db"], ZONE)])));
        let res = run(
            pod,
            vec![("n1", P::new("web").labels(&[("app", "web")]).build())],
        );
        assert!(res.values().all(|r| r == &unresolvable(ERR_AFFINITY)));
    }

    #[test]
    fn first_pod_of_a_self_affine_group_may_go_anywhere_with_the_key() {
        let pod = || {
            P::new("p")
                .labels(&[("app", "cache")])
                .affinity(required_affinity(json!([term("app", &["cache"], ZONE)])))
        };
        let mut ns = nodes();
        ns.push(N::new("n4").labels(&[(HOST, "n4")]).build());
        let snap = cluster(ns, vec![]);
        let res = filter_all(&InterPodAffinity::default(), &pod().build(), &snap);
        assert_eq!(res["n1"], ok());
        assert_eq!(res["n3"], ok());
        assert_eq!(
            res["n4"],
            unresolvable(ERR_AFFINITY),
            "node without the topology key"
        );

        // Once a matching pod exists, the special case no longer applies.
        let res = run(
            pod(),
            vec![("n3", P::new("c1").labels(&[("app", "cache")]).build())],
        );
        assert_eq!(res["n1"], unresolvable(ERR_AFFINITY));
        assert_eq!(res["n3"], ok());
    }

    #[test]
    fn existing_pod_must_match_all_affinity_terms() {
        let pod = P::new("p").affinity(required_affinity(json!([
            term("app", &["db"], ZONE),
            term("tier", &["backend"], HOST)
        ])));
        // A pod matching only the first term does not count.
        let res = run(
            pod,
            vec![("n1", P::new("db").labels(&[("app", "db")]).build())],
        );
        assert!(res.values().all(|r| r == &unresolvable(ERR_AFFINITY)));

        let pod = P::new("p").affinity(required_affinity(json!([
            term("app", &["db"], ZONE),
            term("tier", &["backend"], HOST)
        ])));
        let res = run(
            pod,
            vec![(
                "n1",
                P::new("db")
                    .labels(&[("app", "db"), ("tier", "backend")])
                    .build(),
            )],
        );
        assert_eq!(res["n1"], ok());
        assert_eq!(
            res["n2"],
            unresolvable(ERR_AFFINITY),
            "same zone, other host"
        );
        assert_eq!(res["n3"], unresolvable(ERR_AFFINITY));
    }

    #[test]
    fn incoming_anti_affinity_is_repelled_by_matching_pods() {
        let pod = P::new("p").affinity(required_anti(json!([term("app", &["web"], HOST)])));
        let res = run(
            pod,
            vec![("n1", P::new("web").labels(&[("app", "web")]).build())],
        );
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        assert_eq!(res["n2"], ok());
        assert_eq!(res["n3"], ok());
        // With a zone key the whole zone is excluded.
        let pod = P::new("p").affinity(required_anti(json!([term("app", &["web"], ZONE)])));
        let res = run(
            pod,
            vec![("n1", P::new("web").labels(&[("app", "web")]).build())],
        );
        assert_eq!(res["n2"], unschedulable(ERR_ANTI_AFFINITY));
        assert_eq!(res["n3"], ok());
    }

    #[test]
    fn existing_pods_anti_affinity_repels_the_incoming_pod() {
        let guard = P::new("guard")
            .labels(&[("app", "guard")])
            .affinity(required_anti(json!([term("app", &["noisy"], ZONE)])))
            .build();
        let res = run(
            P::new("p").labels(&[("app", "noisy")]),
            vec![("n1", guard.clone())],
        );
        assert_eq!(res["n1"], unschedulable(ERR_EXISTING_ANTI_AFFINITY));
        assert_eq!(res["n2"], unschedulable(ERR_EXISTING_ANTI_AFFINITY));
        assert_eq!(res["n3"], ok());
        // A pod the term does not match is not repelled.
        let res = run(P::new("p").labels(&[("app", "quiet")]), vec![("n1", guard)]);
        assert!(res.values().all(Result::is_ok));
    }

    #[test]
    fn anti_affinity_is_symmetric() {
        // Replicas that refuse to share a host: both directions hold.
        let replica = |name: &str| {
            P::new(name)
                .labels(&[("app", "etcd")])
                .affinity(required_anti(json!([term("app", &["etcd"], HOST)])))
        };
        let res = run(
            replica("p"),
            vec![("n1", replica("e1").build()), ("n2", replica("e2").build())],
        );
        // The incoming pod's own term is checked before the existing pods'.
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        assert_eq!(res["n2"], unschedulable(ERR_ANTI_AFFINITY));
        assert_eq!(res["n3"], ok());
        // A pod without affinity is still kept away by the placed replicas.
        let res = run(
            P::new("p").labels(&[("app", "etcd")]),
            vec![("n1", replica("e1").build())],
        );
        assert_eq!(res["n1"], unschedulable(ERR_EXISTING_ANTI_AFFINITY));
        assert_eq!(res["n2"], ok());
    }

    #[test]
    fn terms_look_only_in_their_namespaces() {
        let pod = || P::new("p").affinity(required_anti(json!([term("app", &["web"], HOST)])));
        let other_ns = P::new("web").ns("other").labels(&[("app", "web")]).build();
        // Default: the pod's own namespace only.
        let res = run(pod(), vec![("n1", other_ns.clone())]);
        assert_eq!(res["n1"], ok());
        // Listed namespaces.
        let mut t = term("app", &["web"], HOST);
        t["namespaces"] = json!(["other"]);
        let res = run(
            P::new("p").affinity(required_anti(json!([t]))),
            vec![("n1", other_ns.clone())],
        );
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        // An empty namespaceSelector means all namespaces.
        let mut t = term("app", &["web"], HOST);
        t["namespaceSelector"] = json!({});
        let res = run(
            P::new("p").affinity(required_anti(json!([t]))),
            vec![("n1", other_ns)],
        );
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
    }

    /// Upstream `TestRequiredAffinitySingleNode`'s namespaceSelector
    /// cases: a selector adds the namespaces whose labels it matches to
    /// the listed ones, for the incoming pod's terms and for placed pods'.
    #[test]
    fn namespace_selectors_match_namespace_labels() {
        let labelled = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let mut namespaces = Namespaces::default();
        namespaces.set("team-a", labelled(&[("team", "a")]));
        namespaces.set("team-b", labelled(&[("team", "b")]));
        let run_in = |pod: P, placed: Vec<(&str, Pod)>| {
            let mut snap = cluster(nodes(), placed);
            snap.namespaces = Arc::new(namespaces.clone());
            filter_all(&InterPodAffinity::default(), &pod.build(), &snap)
        };
        let web_in = |ns: &str| P::new("web").ns(ns).labels(&[("app", "web")]).build();
        let anti = |selector: Value, names: Option<Value>| {
            let mut t = term("app", &["web"], HOST);
            t["namespaceSelector"] = selector;
            if let Some(n) = names {
                t["namespaces"] = n;
            }
            P::new("p").affinity(required_anti(json!([t])))
        };
        let team_b = json!({"matchLabels": {"team": "b"}});
        // The incoming pod's term selects team-b, not team-a.
        let res = run_in(anti(team_b.clone(), None), vec![("n1", web_in("team-b"))]);
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        let res = run_in(anti(team_b.clone(), None), vec![("n1", web_in("team-a"))]);
        assert_eq!(res["n1"], ok());
        // With a selector, the pod's own namespace is not implied...
        let res = run_in(anti(team_b.clone(), None), vec![("n1", web_in("default"))]);
        assert_eq!(res["n1"], ok());
        // ...and listed namespaces are added to the selected ones.
        let res = run_in(
            anti(team_b, Some(json!(["team-a"]))),
            vec![("n1", web_in("team-a"))],
        );
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        // A namespace the cluster does not list has no labels: only an
        // empty selector selects it.
        let res = run_in(anti(json!({}), None), vec![("n1", web_in("unlisted"))]);
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        let absent = json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]});
        let res = run_in(anti(absent, None), vec![("n1", web_in("unlisted"))]);
        assert_eq!(res["n1"], unschedulable(ERR_ANTI_AFFINITY));
        // A placed pod's term is matched against the incoming pod's
        // namespace labels (the symmetric case).
        let mut t = term("app", &["web"], HOST);
        t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
        let guard = P::new("guard")
            .ns("team-b")
            .affinity(required_anti(json!([t])))
            .build();
        let incoming = |ns: &str| P::new("w").ns(ns).labels(&[("app", "web")]);
        let res = run_in(incoming("team-a"), vec![("n1", guard.clone())]);
        assert_eq!(res["n1"], unschedulable(ERR_EXISTING_ANTI_AFFINITY));
        let res = run_in(incoming("team-b"), vec![("n1", guard)]);
        assert_eq!(res["n1"], ok());
    }

    #[test]
    fn a_term_without_selector_matches_no_pod() {
        let t = json!({"topologyKey": HOST});
        let res = run(
            P::new("p")
                .labels(&[("app", "x")])
                .affinity(required_anti(json!([t.clone()]))),
            vec![("n1", P::new("x").labels(&[("app", "x")]).build())],
        );
        assert!(res.values().all(Result::is_ok));
        // ...and an affinity term without selector can never be satisfied.
        let res = run(P::new("p").affinity(required_affinity(json!([t]))), vec![]);
        assert!(res.values().all(|r| r == &unresolvable(ERR_AFFINITY)));
    }

    #[test]
    fn filter_without_pre_filter_gives_the_same_answer() {
        let snap = cluster(
            nodes(),
            vec![("n1", P::new("web").labels(&[("app", "web")]).build())],
        );
        let pod = P::new("p")
            .affinity(required_anti(json!([term("app", &["web"], HOST)])))
            .build();
        let ctx = ctx(&pod, &snap);
        let state = CycleState::default();
        let plugin = InterPodAffinity::default();
        let n1 = snap.by_name("n1").unwrap();
        let n2 = snap.by_name("n2").unwrap();
        assert_eq!(
            plugin.filter(&ctx, &state, n1),
            unschedulable(ERR_ANTI_AFFINITY)
        );
        assert_eq!(plugin.filter(&ctx, &state, n2), ok());
    }

    // ---- scoring --------------------------------------------------------

    fn scores(plugin: &InterPodAffinity, pod: P, placed: Vec<(&str, Pod)>) -> (Vec<i64>, Vec<i64>) {
        let snap = cluster(nodes(), placed);
        let pod = pod.build();
        let raw = raw_scores(plugin, &pod, &snap);
        let norm = score_all(plugin, &pod, &snap);
        (
            raw.values().copied().collect(),
            norm.values().copied().collect(),
        )
    }

    #[test]
    fn preferred_affinity_prefers_the_domain_of_matching_pods() {
        let pod = P::new("p").affinity(
            json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                weighted(5, term("security", &["S1"], ZONE))
            ]}}),
        );
        let (raw, norm) = scores(
            &InterPodAffinity::default(),
            pod,
            vec![
                ("n1", P::new("s1").labels(&[("security", "S1")]).build()),
                ("n3", P::new("s2").labels(&[("security", "S2")]).build()),
            ],
        );
        assert_eq!(raw, vec![5, 5, 0]);
        assert_eq!(norm, vec![100, 100, 0]);
    }

    #[test]
    fn preferred_weights_add_up_and_anti_affinity_subtracts() {
        // Affinity (hostname, 3) to app=good, anti-affinity (hostname, 5) to
        // app=bad, affinity (zone, 1) to app=good.
        // Raw: n1 holds bad -> -5; n2 holds only a pod of another namespace
        // -> 0; n3 holds good -> 3 + 1 = 4.
        // Min-max: n1 0, n2 100 * 5/9 = 55.6 -> 55, n3 100.
        let pod = P::new("p").affinity(json!({
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                weighted(3, term("app", &["good"], HOST)),
                weighted(1, term("app", &["good"], ZONE))
            ]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                weighted(5, term("app", &["bad"], HOST))
            ]}
        }));
        let (raw, norm) = scores(
            &InterPodAffinity::default(),
            pod,
            vec![
                ("n1", P::new("bad").labels(&[("app", "bad")]).build()),
                ("n3", P::new("good").labels(&[("app", "good")]).build()),
                (
                    "n2",
                    P::new("good-elsewhere")
                        .ns("other")
                        .labels(&[("app", "good")])
                        .build(),
                ),
            ],
        );
        // The pod in namespace "other" is not seen by the default-namespace terms.
        assert_eq!(raw, vec![-5, 0, 4]);
        assert_eq!(norm, vec![0, 55, 100]);
    }

    #[test]
    fn existing_pods_preferred_terms_are_symmetric() {
        // An existing pod that prefers pods like the incoming one attracts it;
        // one with preferred anti-affinity repels it.
        let fan = P::new("fan")
            .affinity(
                json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    weighted(10, term("app", &["star"], HOST))
                ]}}),
            )
            .build();
        let hater = P::new("hater")
            .affinity(
                json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    weighted(4, term("app", &["star"], ZONE))
                ]}}),
            )
            .build();
        let (raw, norm) = scores(
            &InterPodAffinity::default(),
            P::new("p").labels(&[("app", "star")]),
            vec![("n1", fan), ("n3", hater)],
        );
        assert_eq!(raw, vec![10, 0, -4]);
        // 100 * (0 - -4) / 14 = 28.57 -> 28
        assert_eq!(norm, vec![100, 28, 0]);
    }

    #[test]
    fn existing_pods_required_affinity_counts_with_hard_weight() {
        let follower = || {
            P::new("follower")
                .affinity(required_affinity(json!([term("app", &["leader"], ZONE)])))
                .build()
        };
        let (raw, norm) = scores(
            &InterPodAffinity::default(),
            P::new("p").labels(&[("app", "leader")]),
            vec![("n3", follower())],
        );
        assert_eq!(raw, vec![0, 0, 1]);
        assert_eq!(norm, vec![0, 0, 100]);
        let heavy =
            InterPodAffinity::from_args(Some(&json!({"hardPodAffinityWeight": 7}))).unwrap();
        let (raw, _) = scores(
            &heavy,
            P::new("p").labels(&[("app", "leader")]),
            vec![("n3", follower())],
        );
        assert_eq!(raw, vec![0, 0, 7]);
        let off = InterPodAffinity::from_args(Some(&json!({"hardPodAffinityWeight": 0}))).unwrap();
        let (raw, norm) = scores(
            &off,
            P::new("p").labels(&[("app", "leader")]),
            vec![("n3", follower())],
        );
        assert_eq!(raw, vec![0, 0, 0]);
        assert_eq!(norm, vec![0, 0, 0]);
    }

    #[test]
    fn ignore_preferred_terms_of_existing_pods() {
        let fan = P::new("fan")
            .affinity(
                json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    weighted(10, term("app", &["star"], HOST))
                ]}}),
            )
            .build();
        let plugin =
            InterPodAffinity::from_args(Some(&json!({"ignorePreferredTermsOfExistingPods": true})))
                .unwrap();
        let (raw, norm) = scores(
            &plugin,
            P::new("p").labels(&[("app", "star")]),
            vec![("n1", fan)],
        );
        assert_eq!(raw, vec![0, 0, 0]);
        assert_eq!(norm, vec![0, 0, 0]);
    }

    #[test]
    fn no_affinity_anywhere_scores_zero() {
        let (raw, norm) = scores(
            &InterPodAffinity::default(),
            P::new("p"),
            vec![("n1", P::new("x").build())],
        );
        assert_eq!(raw, vec![0, 0, 0]);
        assert_eq!(norm, vec![0, 0, 0]);
    }

    #[test]
    fn args_are_validated() {
        assert!(
            InterPodAffinity::from_args(Some(&json!({"hardPodAffinityWeight": 101})))
                .unwrap_err()
                .starts_with("hardPodAffinityWeight")
        );
        assert!(InterPodAffinity::from_args(Some(
            &json!({"ignorePreferredTermsOfExistingPods": "yes"})
        ))
        .unwrap_err()
        .starts_with("ignorePreferredTermsOfExistingPods"));
        assert!(
            InterPodAffinity::from_args(Some(&json!({"hardPodAffinityWieght": 1})))
                .unwrap_err()
                .contains("unknown field")
        );
    }
}
