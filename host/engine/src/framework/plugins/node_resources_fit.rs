//! NodeResourcesFit: the node must have room for the pod's requests (and
//! one more pod); among fitting nodes, score by how allocated they would be
//! (`LeastAllocated` spreads, `MostAllocated` packs).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::framework::interface::MAX_NODE_SCORE;
use crate::framework::{
    CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, PluginError, Rejection, ScorePlugin,
};
use crate::model::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use crate::model::Pod;

use super::helpers::{
    allocatable_and_requested, args_object, int_in, is_extended_resource, is_scalar_resource,
    json_type, reject_unknown,
};

pub const NAME: &str = "NodeResourcesFit";

/// How fitting nodes are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScoringStrategy {
    /// Prefer the node with the most free capacity left (spreading).
    #[default]
    LeastAllocated,
    /// Prefer the node with the least free capacity left (bin-packing).
    MostAllocated,
    /// Score each resource's utilization by a broken-line shape
    /// ([`FitArgs::shape`]).
    RequestedToCapacityRatio,
}

impl ScoringStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeastAllocated => "LeastAllocated",
            Self::MostAllocated => "MostAllocated",
            Self::RequestedToCapacityRatio => "RequestedToCapacityRatio",
        }
    }
}

/// A resource the score looks at, and how much it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceWeight {
    pub name: String,
    pub weight: i64,
}

impl ResourceWeight {
    pub fn new(name: &str, weight: i64) -> Self {
        Self {
            name: name.to_string(),
            weight,
        }
    }
}

/// Upstream's default scored resources: cpu and memory, weight 1 each.
pub fn default_resources() -> Vec<ResourceWeight> {
    vec![ResourceWeight::new(CPU, 1), ResourceWeight::new(MEMORY, 1)]
}

/// Parsed `NodeResourcesFitArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitArgs {
    pub strategy: ScoringStrategy,
    pub resources: Vec<ResourceWeight>,
    /// Extended resources the filter does not check.
    pub ignored_resources: BTreeSet<String>,
    /// Extended-resource domains (`example.com`) the filter does not check.
    pub ignored_resource_groups: BTreeSet<String>,
    /// RequestedToCapacityRatio's shape: (utilization 0..=100, score
    /// 0..=100, the configured 0..=10 times 10), utilization increasing.
    pub shape: Vec<(i64, i64)>,
}

impl Default for FitArgs {
    fn default() -> Self {
        Self {
            strategy: ScoringStrategy::LeastAllocated,
            resources: default_resources(),
            ignored_resources: BTreeSet::new(),
            ignored_resource_groups: BTreeSet::new(),
            shape: Vec::new(),
        }
    }
}

const STRATEGY_TYPES: &str = "LeastAllocated, MostAllocated, RequestedToCapacityRatio";

impl FitArgs {
    /// Parses upstream's args shape:
    /// `{"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]},
    ///   "ignoredResources": [...], "ignoredResourceGroups": [...]}`.
    /// Unknown fields and values are rejected, naming the field, so that a
    /// typo does not silently fall back to the default.
    pub fn parse(args: Option<&Value>) -> Result<Self, String> {
        let mut out = Self::default();
        let Some(obj) = args_object(NAME, args)? else {
            return Ok(out);
        };
        reject_unknown(
            &obj,
            &[
                "scoringStrategy",
                "ignoredResources",
                "ignoredResourceGroups",
            ],
            "",
        )?;
        if let Some(s) = obj.get("scoringStrategy") {
            let s = s.as_object().ok_or_else(|| {
                format!("scoringStrategy: expected an object, got {}", json_type(s))
            })?;
            parse_strategy(s, &mut out)?;
        }
        out.ignored_resources = string_set(obj.get("ignoredResources"), "ignoredResources")?;
        out.ignored_resource_groups =
            string_set(obj.get("ignoredResourceGroups"), "ignoredResourceGroups")?;
        for g in &out.ignored_resource_groups {
            if g.contains('/') {
                return Err(format!(
                    "ignoredResourceGroups: {g:?} must be a domain without '/'"
                ));
            }
        }
        Ok(out)
    }
}

/// `requestedToCapacityRatio: {shape: [{utilization, score}, ...]}`, as
/// upstream's `validateFunctionShape` checks it: at least one point,
/// utilization in 0..=100 and strictly increasing, score in 0..=10.
fn parse_shape(r: &Value) -> Result<Vec<(i64, i64)>, String> {
    const FIELD: &str = "scoringStrategy.requestedToCapacityRatio";
    let o = r
        .as_object()
        .ok_or_else(|| format!("{FIELD}: expected an object, got {}", json_type(r)))?;
    reject_unknown(o, &["shape"], &format!("{FIELD}."))?;
    parse_shape_points(o.get("shape"), &format!("{FIELD}.shape"))
}

/// A `shape` list of `{utilization, score}` points (RequestedToCapacityRatio's
/// and VolumeBinding's), as upstream's `validateFunctionShape` checks it: at
/// least one point, utilization in 0..=100 and strictly increasing, score in
/// 0..=10 (scaled onto MaxNodeScore). `field` names the list in errors.
pub(crate) fn parse_shape_points(
    list: Option<&Value>,
    field: &str,
) -> Result<Vec<(i64, i64)>, String> {
    let list = match list {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) | None => {
            return Err(format!("{field}: at least one point is required"))
        }
        Some(v) => return Err(format!("{field}: expected an array, got {}", json_type(v))),
    };
    let mut shape: Vec<(i64, i64)> = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let o = p
            .as_object()
            .ok_or_else(|| format!("{path}: expected an object, got {}", json_type(p)))?;
        reject_unknown(o, &["utilization", "score"], &format!("{path}."))?;
        let utilization = match o.get("utilization") {
            None => 0,
            Some(v) => int_in(v, 0..=100, &format!("{path}.utilization"))?,
        };
        let score = match o.get("score") {
            None => 0,
            Some(v) => int_in(v, 0..=10, &format!("{path}.score"))?,
        };
        if shape.last().is_some_and(|&(u, _)| utilization <= u) {
            return Err(format!(
                "{path}.utilization: must be greater than the previous point's"
            ));
        }
        // Upstream scales the 0..=10 scores onto MaxNodeScore.
        shape.push((utilization, score * (MAX_NODE_SCORE / 10)));
    }
    Ok(shape)
}

/// Upstream `helper.BuildBrokenLinearFunction`: the shape's score at
/// utilization `p`, linear between points, flat beyond the ends.
fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, score)) in shape.iter().enumerate() {
        if p <= u {
            if i == 0 {
                return score;
            }
            let (u0, s0) = shape[i - 1];
            return s0 + (score - s0) * (p - u0) / (u - u0);
        }
    }
    shape.last().map_or(0, |&(_, s)| s)
}

/// Upstream `buildRequestedToCapacityRatioScorerFunction`'s per-resource
/// score: a request beyond capacity (or no capacity) scores as full.
pub fn requested_to_capacity_ratio_score(
    shape: &[(i64, i64)],
    requested: i64,
    capacity: i64,
) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, 100);
    }
    broken_linear(shape, requested.saturating_mul(100) / capacity)
}

fn parse_strategy(s: &Map<String, Value>, out: &mut FitArgs) -> Result<(), String> {
    reject_unknown(
        s,
        &["type", "resources", "requestedToCapacityRatio"],
        "scoringStrategy.",
    )?;
    out.strategy = match s.get("type").map(|t| (t, t.as_str())) {
        None => {
            return Err(format!(
                "scoringStrategy.type: required (one of {STRATEGY_TYPES})"
            ))
        }
        Some((_, Some("LeastAllocated"))) => ScoringStrategy::LeastAllocated,
        Some((_, Some("MostAllocated"))) => ScoringStrategy::MostAllocated,
        Some((_, Some("RequestedToCapacityRatio"))) => ScoringStrategy::RequestedToCapacityRatio,
        Some((t, _)) => {
            return Err(format!(
                "scoringStrategy.type: unsupported value {t} (supported: {STRATEGY_TYPES})"
            ))
        }
    };
    let ratio = s.get("requestedToCapacityRatio");
    match (out.strategy, ratio) {
        (ScoringStrategy::RequestedToCapacityRatio, None) => {
            return Err("scoringStrategy.requestedToCapacityRatio: required with type RequestedToCapacityRatio".into())
        }
        (ScoringStrategy::RequestedToCapacityRatio, Some(r)) => out.shape = parse_shape(r)?,
        (_, Some(_)) => {
            return Err("scoringStrategy.requestedToCapacityRatio: only valid with type RequestedToCapacityRatio".into())
        }
        (_, None) => {}
    }
    if let Some(r) = s.get("resources") {
        let list = r.as_array().ok_or_else(|| {
            format!(
                "scoringStrategy.resources: expected an array, got {}",
                json_type(r)
            )
        })?;
        let mut resources = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let path = format!("scoringStrategy.resources[{i}]");
            let o = item
                .as_object()
                .ok_or_else(|| format!("{path}: expected an object, got {}", json_type(item)))?;
            reject_unknown(o, &["name", "weight"], &format!("{path}."))?;
            let name = match o.get("name").and_then(Value::as_str) {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => return Err(format!("{path}.name: required, a resource name")),
            };
            let weight = match o.get("weight") {
                // Upstream defaults an omitted weight to 1.
                None => 1,
                Some(w) => int_in(w, 1..=100, &format!("{path}.weight"))?,
            };
            if resources.iter().any(|r: &ResourceWeight| r.name == name) {
                return Err(format!("{path}.name: duplicate resource {name:?}"));
            }
            resources.push(ResourceWeight { name, weight });
        }
        // Upstream defaults an empty list to cpu and memory.
        if !resources.is_empty() {
            out.resources = resources;
        }
    }
    Ok(())
}

fn string_set(v: Option<&Value>, path: &str) -> Result<BTreeSet<String>, String> {
    let Some(v) = v else {
        return Ok(BTreeSet::new());
    };
    let list = v
        .as_array()
        .ok_or_else(|| format!("{path}: expected an array of strings, got {}", json_type(v)))?;
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{path}[{i}]: expected a string, got {}", json_type(s)))
        })
        .collect()
}

/// The NodeResourcesFit plugin.
#[derive(Debug, Clone, Default)]
pub struct NodeResourcesFit {
    args: FitArgs,
    /// Extended resources DeviceClasses serve (DRAExtendedResource).
    dra: super::dynamic_resources::extended::Resolver,
}

impl NodeResourcesFit {
    pub fn new(args: FitArgs) -> Self {
        Self {
            args,
            dra: Default::default(),
        }
    }

    /// Builds the plugin from `pluginConfig[].args` (see [`FitArgs::parse`]).
    pub fn from_args(args: &Value) -> Result<Self, String> {
        FitArgs::parse(Some(args)).map(Self::new)
    }

    pub fn args(&self) -> &FitArgs {
        &self.args
    }

    fn ignored(&self, resource: &str) -> bool {
        is_extended_resource(resource)
            && (self.args.ignored_resources.contains(resource)
                || resource
                    .split_once('/')
                    .is_some_and(|(group, _)| self.args.ignored_resource_groups.contains(group)))
    }

    /// What `pod` asks that a node must have room for, in upstream order
    /// (cpu, memory, ephemeral-storage, then scalar resources by name),
    /// each with its rejection reason. Read once per Filter batch.
    fn wanted<'p>(&self, pod: &'p Pod) -> Vec<Wanted<'p>> {
        // Upstream `computePodResourceRequest`: the spec alone ("pod
        // hasn't scheduled yet"), no resize state.
        let req = &pod.spec_requests;
        let mut out = Vec::new();
        for (r, reason) in [
            (CPU, "Insufficient cpu"),
            (MEMORY, "Insufficient memory"),
            (EPHEMERAL_STORAGE, "Insufficient ephemeral-storage"),
        ] {
            let amount = req.get(r);
            if amount > 0 {
                out.push(Wanted {
                    resource: r,
                    amount,
                    reason: Cow::Borrowed(reason),
                    dra: false,
                });
            }
        }
        // `Resources` iterates in name order, which makes the scalar
        // reasons deterministic (upstream's map order is random).
        for (r, amount) in req.iter() {
            if amount == 0 || !is_scalar_resource(r) || self.ignored(r) {
                continue;
            }
            out.push(Wanted {
                resource: r,
                amount,
                reason: Cow::Owned(format!("Insufficient {r}")),
                dra: self.dra.backed(r),
            });
        }
        out
    }

    /// Upstream `fitsRequest`: every reason the pod does not fit, in
    /// upstream order (pods, cpu, memory, ephemeral-storage, then scalar
    /// resources by name).
    pub fn insufficient(&self, pod: &Pod, node: &NodeInfo) -> Vec<String> {
        insufficient(&self.wanted(pod), node)
    }
}

/// One amount the pod asks and the reason given when a node lacks it.
struct Wanted<'p> {
    resource: &'p str,
    amount: i64,
    reason: Cow<'static, str>,
    /// A DeviceClass serves it: on a node that does not advertise it,
    /// DynamicResources checks it (upstream's `shouldDelegateResourceToDRA`).
    dra: bool,
}

/// Whether the node can take one more pod.
fn room_for_a_pod(node: &NodeInfo) -> bool {
    let pods_on_node = i64::try_from(node.pods.len()).unwrap_or(i64::MAX);
    pods_on_node.saturating_add(1) <= node.node.allocatable.get(PODS)
}

fn lacks(w: &Wanted<'_>, node: &NodeInfo) -> bool {
    if w.dra && node.node.allocatable.get(w.resource) <= 0 {
        return false;
    }
    let free = node
        .node
        .allocatable
        .get(w.resource)
        .saturating_sub(node.requested.get(w.resource));
    w.amount > free
}

/// Every reason the pod asking `wanted` does not fit `node`.
fn insufficient(wanted: &[Wanted<'_>], node: &NodeInfo) -> Vec<String> {
    let mut reasons = Vec::new();
    if !room_for_a_pod(node) {
        reasons.push("Too many pods".to_string());
    }
    for w in wanted.iter().filter(|w| lacks(w, node)) {
        reasons.push(w.reason.to_string());
    }
    reasons
}

/// Upstream's Filter verdict: the node fits, or every reason it does not
/// (checked first without building reasons).
fn verdict(wanted: &[Wanted<'_>], node: &NodeInfo) -> Result<(), Rejection> {
    if room_for_a_pod(node) && !wanted.iter().any(|w| lacks(w, node)) {
        return Ok(());
    }
    // Unschedulable, so that preemption may free room; unresolvable
    // (upstream 1.31+) when the pod asks more of a resource than the node
    // has at all: no eviction can make it fit.
    let unresolvable = wanted
        .iter()
        .any(|w| lacks(w, node) && w.amount > node.node.allocatable.get(w.resource));
    Err(Rejection {
        reasons: insufficient(wanted, node),
        unresolvable,
        error: false,
    })
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        verdict(&self.wanted(ctx.pod), node)
    }

    /// The pod's requests are read once for the whole batch.
    fn filter_batch(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        nodes: &[&NodeInfo],
        out: &mut [Option<Rejection>],
    ) {
        let wanted = self.wanted(ctx.pod);
        for (node, v) in nodes.iter().zip(out) {
            *v = verdict(&wanted, node).err();
        }
    }
}

/// Upstream `leastRequestedScore`: the free share of `capacity`, 0..=100.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested).saturating_mul(MAX_NODE_SCORE) / capacity
}

/// Upstream `mostRequestedScore`: the used share of `capacity`, 0..=100.
/// Requests above capacity (possible with the non-zero defaults) count as
/// full.
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.clamp(0, capacity).saturating_mul(MAX_NODE_SCORE) / capacity
}

impl ScorePlugin for NodeResourcesFit {
    /// Upstream `leastResourceScorer`/`mostResourceScorer`: the weighted
    /// average of the per-resource scores, over the resources the node has.
    fn score(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        if self.args.strategy == ScoringStrategy::RequestedToCapacityRatio {
            return Ok(self.ratio_score(ctx.pod, node));
        }
        let per_resource = match self.args.strategy {
            ScoringStrategy::MostAllocated => most_requested_score,
            _ => least_requested_score,
        };
        let (mut total, mut weights) = (0i64, 0i64);
        for r in &self.args.resources {
            let (alloc, requested) = allocatable_and_requested(ctx.pod, node, &r.name, false);
            if alloc == 0 {
                continue;
            }
            total = total.saturating_add(per_resource(requested, alloc).saturating_mul(r.weight));
            weights = weights.saturating_add(r.weight);
        }
        Ok(if weights == 0 { 0 } else { total / weights })
    }
}

impl NodeResourcesFit {
    /// RequestedToCapacityRatio: the weighted average of the resources
    /// that score above 0, rounded (upstream leaves the zeros out of the
    /// weights too).
    fn ratio_score(&self, pod: &Pod, node: &NodeInfo) -> i64 {
        let (mut total, mut weights) = (0i64, 0i64);
        for r in &self.args.resources {
            let (alloc, requested) = allocatable_and_requested(pod, node, &r.name, false);
            if alloc == 0 {
                continue;
            }
            let score = requested_to_capacity_ratio_score(&self.args.shape, requested, alloc);
            if score > 0 {
                total = total.saturating_add(score.saturating_mul(r.weight));
                weights = weights.saturating_add(r.weight);
            }
        }
        if weights == 0 {
            0
        } else {
            (total as f64 / weights as f64).round() as i64
        }
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&Value>,
    handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    let fit = FitArgs::parse(args).map_err(|e| format!("{NAME} args: {e}"))?;
    let mut fit = NodeResourcesFit::new(fit);
    fit.dra = super::dynamic_resources::extended::Resolver::new(
        handle.shared::<super::dynamic_resources::Store>(),
    );
    let p = Arc::new(fit);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_filter(&p)
        .with_score(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::framework::plugins::testutil::*;

    fn fit() -> NodeResourcesFit {
        NodeResourcesFit::default()
    }

    /// Node n1 with `alloc`, holding one pod that requests `used`, checked
    /// for `pod`.
    fn check(alloc: &[(&str, &str)], used: &[(&str, &str)], pod: P) -> Result<(), Rejection> {
        check_with(&fit(), alloc, used, pod)
    }

    fn check_with(
        plugin: &NodeResourcesFit,
        alloc: &[(&str, &str)],
        used: &[(&str, &str)],
        pod: P,
    ) -> Result<(), Rejection> {
        let snap = cluster(
            vec![N::new("n1").alloc(alloc).build()],
            vec![("n1", P::new("used").req(used).build())],
        );
        filter_all(plugin, &pod.build(), &snap)
            .remove("n1")
            .expect("n1")
    }

    const NODE_10_20: &[(&str, &str)] = &[("cpu", "10m"), ("memory", "20"), ("pods", "32")];

    fn reasons(r: &[&str]) -> Result<(), Rejection> {
        Err(Rejection {
            reasons: r.iter().map(|s| s.to_string()).collect(),
            unresolvable: false,
            error: false,
        })
    }

    /// The pod asks more than the node has at all (upstream's
    /// `Unresolvable`): no eviction helps.
    fn beyond_allocatable(r: &[&str]) -> Result<(), Rejection> {
        Err(Rejection {
            reasons: r.iter().map(|s| s.to_string()).collect(),
            unresolvable: true,
            error: false,
        })
    }

    /// A pod bound to n1 whose spec asks 1 cpu while the kubelet still
    /// holds 3 (a downsize not yet actuated).
    fn resizing(name: &str) -> Pod {
        P::new(name)
            .req(&[("cpu", "1"), ("memory", "1Gi")])
            .status(json!({"containerStatuses": [{
                "name": "c0", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                "allocatedResources": {"cpu": "3", "memory": "1Gi"},
                "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}))
            .build()
    }

    // Upstream: the cache counts a bound pod by `PodRequests` with its
    // resize state (types.go CalculateResource), Fit's PreFilter the
    // incoming pod's spec (`computePodResourceRequest`).
    #[test]
    fn a_bound_pod_counts_its_resize_state_and_the_incoming_pod_its_spec() {
        let snap = cluster(
            vec![N::new("n1")
                .alloc(&[("cpu", "4"), ("memory", "8Gi")])
                .build()],
            vec![("n1", resizing("holder"))],
        );
        assert_eq!(snap.by_name("n1").unwrap().requested.get(CPU), 3000);
        let two = P::new("p").req(&[("cpu", "2")]).build();
        assert_eq!(
            filter_all(&fit(), &two, &snap).remove("n1").unwrap(),
            reasons(&["Insufficient cpu"])
        );
        // The same holder as an incoming pod asks its spec's 1 cpu.
        let holder = resizing("again");
        assert_eq!(
            filter_all(&fit(), &holder, &snap).remove("n1").unwrap(),
            ok()
        );
        // LeastAllocated: (4000 - 3000 - 1000) * 100 / 4000 = 0 for cpu,
        // memory (8Gi - 2Gi) / 8Gi = 75: (0 + 75) / 2 = 37.
        assert_eq!(score_all(&fit(), &holder, &snap)["n1"], 37);
        // BalancedAllocation sees the node's 3 cpu held.
        let s = score_all(
            &super::super::BalancedAllocation::default(),
            &P::new("q").req(&[("cpu", "1"), ("memory", "1Gi")]).build(),
            &snap,
        );
        // with: cpu 4000/4000 = 1, memory 2/8 = 0.25: std 0.375 -> 62;
        // without: 0.75 and 0.125: std 0.3125 -> 68; 50 + (50 + 62 - 68) / 2.
        assert_eq!(s["n1"], 72);
    }

    #[test]
    fn pod_without_requests_fits_a_full_node() {
        assert_eq!(
            check(NODE_10_20, &[("cpu", "10m"), ("memory", "20")], P::new("p")),
            ok()
        );
    }

    #[test]
    fn fits_exactly_the_remaining_room() {
        let used = &[("cpu", "5m"), ("memory", "5")];
        assert_eq!(
            check(
                NODE_10_20,
                used,
                P::new("p").req(&[("cpu", "5m"), ("memory", "15")])
            ),
            ok()
        );
    }

    #[test]
    fn one_resource_short_gives_its_reason() {
        let used = &[("cpu", "9m"), ("memory", "19")];
        assert_eq!(
            check(
                NODE_10_20,
                used,
                P::new("p").req(&[("cpu", "2m"), ("memory", "1")])
            ),
            reasons(&["Insufficient cpu"])
        );
        let used = &[("cpu", "5m"), ("memory", "19")];
        assert_eq!(
            check(
                NODE_10_20,
                used,
                P::new("p").req(&[("cpu", "1m"), ("memory", "2")])
            ),
            reasons(&["Insufficient memory"])
        );
    }

    #[test]
    fn init_container_larger_than_the_containers_sets_the_request() {
        // Containers sum to 2m cpu, the init container needs 3m: 3m counts.
        let used = &[("cpu", "8m"), ("memory", "19")];
        let pod = P::new("p")
            .req(&[("cpu", "1m"), ("memory", "1")])
            .req(&[("cpu", "1m")])
            .init_req(&[("cpu", "3m")]);
        assert_eq!(check(NODE_10_20, used, pod), reasons(&["Insufficient cpu"]));
        // Without the init container the same pod fits.
        let pod = P::new("p")
            .req(&[("cpu", "1m"), ("memory", "1")])
            .req(&[("cpu", "1m")]);
        assert_eq!(check(NODE_10_20, used, pod), ok());
        // An init container smaller than the sum does not matter.
        let pod = P::new("p")
            .req(&[("cpu", "1m"), ("memory", "1")])
            .req(&[("cpu", "1m")])
            .init_req(&[("cpu", "1m")]);
        assert_eq!(check(NODE_10_20, used, pod), ok());
    }

    #[test]
    fn pod_overhead_is_added_to_the_request() {
        let used = &[("cpu", "5m"), ("memory", "5")];
        let pod = P::new("p").req(&[("cpu", "4m"), ("memory", "4")]);
        assert_eq!(check(NODE_10_20, used, pod), ok());
        let pod = P::new("p")
            .req(&[("cpu", "4m"), ("memory", "4")])
            .spec("overhead", json!({"cpu": "3m", "memory": "13"}));
        assert_eq!(
            check(NODE_10_20, used, pod),
            reasons(&["Insufficient cpu", "Insufficient memory"])
        );
    }

    /// DRAExtendedResource (upstream's `shouldDelegateResourceToDRA`): a
    /// resource a DeviceClass serves is left to DynamicResources on nodes
    /// that do not advertise it, and counted where they do (the device
    /// plugin wins).
    #[test]
    fn extended_resources_served_by_dra_are_skipped_where_not_advertised() {
        use crate::framework::plugins::dynamic_resources::{extended::Resolver, store, Store};
        let dra = Arc::new(Store::default());
        let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "fpga"}, "spec": {"extendedResourceName": "example.com/fpga"}});
        dra.apply(&store::DEVICE_CLASS, "v1", &class, "fpga");
        let mut plugin = fit();
        plugin.dra = Resolver::new(dra);
        let base = [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")];
        let fpga = |r: &'static str| P::new("p").req(&[(r, "2")]);
        assert_eq!(
            check_with(&plugin, &base, &[], fpga("example.com/fpga")),
            ok()
        );
        assert_eq!(
            check_with(
                &plugin,
                &base,
                &[],
                fpga("deviceclass.resource.kubernetes.io/fpga")
            ),
            ok()
        );
        // Advertised: counted as the device plugin's.
        let advertised = [
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "110"),
            ("example.com/fpga", "1"),
        ];
        assert_eq!(
            check_with(&plugin, &advertised, &[], fpga("example.com/fpga")),
            beyond_allocatable(&["Insufficient example.com/fpga"])
        );
        // No class serves it: a node resource as before.
        assert_eq!(
            check_with(&plugin, &base, &[], fpga("example.com/other")),
            beyond_allocatable(&["Insufficient example.com/other"])
        );
        assert_eq!(
            check(&base, &[], fpga("example.com/fpga")),
            beyond_allocatable(&["Insufficient example.com/fpga"])
        );
    }

    #[test]
    fn extended_resources_are_checked() {
        let alloc = &[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "2"),
        ];
        let gpu = |n: &'static str| P::new("p").req(&[("nvidia.com/gpu", n)]);
        assert_eq!(check(alloc, &[("nvidia.com/gpu", "1")], gpu("1")), ok());
        assert_eq!(
            check(alloc, &[("nvidia.com/gpu", "1")], gpu("2")),
            reasons(&["Insufficient nvidia.com/gpu"])
        );
        // A node without the resource cannot host it at all.
        assert_eq!(
            check(&[("cpu", "4"), ("memory", "8Gi")], &[], gpu("1")),
            beyond_allocatable(&["Insufficient nvidia.com/gpu"])
        );
        // A limit alone defaults the request (API-server defaulting).
        let limit_only = P::new("p").spec(
            "containers",
            json!([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]),
        );
        assert_eq!(
            check(alloc, &[], limit_only),
            beyond_allocatable(&["Insufficient nvidia.com/gpu"])
        );
    }

    #[test]
    fn extended_resources_can_be_ignored_by_name_or_group() {
        let alloc = &[("cpu", "4"), ("memory", "8Gi")];
        let pod = || P::new("p").req(&[("example.com/aaa", "1"), ("nvidia.com/gpu", "1")]);
        let by_name =
            NodeResourcesFit::from_args(&json!({"ignoredResources": ["example.com/aaa"]})).unwrap();
        assert_eq!(
            check_with(&by_name, alloc, &[], pod()),
            beyond_allocatable(&["Insufficient nvidia.com/gpu"])
        );
        let by_group = NodeResourcesFit::from_args(
            &json!({"ignoredResourceGroups": ["example.com", "nvidia.com"]}),
        )
        .unwrap();
        assert_eq!(check_with(&by_group, alloc, &[], pod()), ok());
        // kubernetes.io/ resources are not extended and cannot be ignored.
        let native =
            NodeResourcesFit::from_args(&json!({"ignoredResources": ["kubernetes.io/something"]}))
                .unwrap();
        let pod = P::new("p").req(&[("kubernetes.io/something", "1")]);
        assert_eq!(
            check_with(&native, alloc, &[], pod),
            beyond_allocatable(&["Insufficient kubernetes.io/something"])
        );
    }

    #[test]
    fn ephemeral_storage_is_checked() {
        let alloc = &[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("ephemeral-storage", "20Gi"),
        ];
        let pod = P::new("p").req(&[("ephemeral-storage", "15Gi")]);
        assert_eq!(
            check(alloc, &[("ephemeral-storage", "10Gi")], pod),
            reasons(&["Insufficient ephemeral-storage"])
        );
    }

    #[test]
    fn pod_count_is_checked_even_for_empty_pods() {
        let alloc = &[("cpu", "4"), ("memory", "8Gi"), ("pods", "1")];
        assert_eq!(check(alloc, &[], P::new("p")), reasons(&["Too many pods"]));
        let alloc = &[("cpu", "4"), ("memory", "8Gi"), ("pods", "2")];
        assert_eq!(check(alloc, &[], P::new("p")), ok());
    }

    #[test]
    fn all_reasons_are_reported_in_upstream_order() {
        let alloc = &[
            ("cpu", "1"),
            ("memory", "1Gi"),
            ("ephemeral-storage", "1Gi"),
            ("pods", "1"),
            ("nvidia.com/gpu", "1"),
        ];
        let pod = P::new("p").req(&[
            ("cpu", "2"),
            ("memory", "2Gi"),
            ("ephemeral-storage", "2Gi"),
            ("nvidia.com/gpu", "2"),
            ("example.com/aaa", "1"),
            ("hugepages-2Mi", "2Mi"),
        ]);
        assert_eq!(
            check(alloc, &[], pod),
            beyond_allocatable(&[
                "Too many pods",
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage",
                "Insufficient example.com/aaa",
                "Insufficient hugepages-2Mi",
                "Insufficient nvidia.com/gpu",
            ])
        );
    }

    #[test]
    fn zero_extended_request_is_not_checked() {
        let pod = P::new("p").req(&[("nvidia.com/gpu", "0")]);
        assert_eq!(check(&[("cpu", "4"), ("memory", "8Gi")], &[], pod), ok());
    }

    // ---- scoring --------------------------------------------------------

    fn two_nodes(
        a: &[(&str, &str)],
        b: &[(&str, &str)],
        placed: Vec<(&str, Pod)>,
    ) -> crate::framework::Snapshot {
        cluster(
            vec![N::new("a").alloc(a).build(), N::new("b").alloc(b).build()],
            placed,
        )
    }

    #[test]
    fn least_allocated_differently_sized_nodes() {
        // Upstream least_allocated_test "nothing scheduled, resources
        // requested, differently sized nodes":
        // a: cpu (4000-3000)*100/4000 = 25, memory (10000-5000)*100/10000 = 50 -> 37
        // b: cpu (6000-3000)*100/6000 = 50, memory 50 -> 50
        let snap = two_nodes(
            &[("cpu", "4"), ("memory", "10000")],
            &[("cpu", "6"), ("memory", "10000")],
            vec![],
        );
        let pod = P::new("p")
            .req(&[("cpu", "1"), ("memory", "2000")])
            .req(&[("cpu", "2"), ("memory", "3000")])
            .build();
        let s = score_all(&fit(), &pod, &snap);
        assert_eq!((s["a"], s["b"]), (37, 50));
    }

    /// Upstream requested_to_capacity_ratio_test.go, TestBrokenLinearFunction.
    #[test]
    fn broken_linear_function_is_upstreams() {
        type Points = &'static [(i64, i64)];
        let cases: [(Points, Points); 3] = [
            (
                &[(10, 1), (90, 9)],
                &[
                    (-10, 1),
                    (0, 1),
                    (9, 1),
                    (10, 1),
                    (15, 1),
                    (19, 1),
                    (20, 2),
                    (89, 8),
                    (90, 9),
                    (99, 9),
                    (100, 9),
                    (110, 9),
                ],
            ),
            (
                &[(0, 2), (40, 10), (100, 0)],
                &[
                    (-10, 2),
                    (0, 2),
                    (20, 6),
                    (30, 8),
                    (40, 10),
                    (70, 5),
                    (100, 0),
                    (110, 0),
                ],
            ),
            (
                &[(0, 2), (40, 2), (100, 2)],
                &[
                    (-10, 2),
                    (0, 2),
                    (20, 2),
                    (40, 2),
                    (70, 2),
                    (100, 2),
                    (110, 2),
                ],
            ),
        ];
        for (shape, points) in cases {
            for &(p, want) in points {
                assert_eq!(broken_linear(shape, p), want, "{shape:?} at {p}");
            }
        }
    }

    /// Upstream TestRequestedToCapacityRatioScoringStrategy (shape 0 -> 10,
    /// 100 -> 0; its pods without containers are pods requesting zero here).
    #[test]
    fn requested_to_capacity_ratio_scores_are_upstreams() {
        let p = NodeResourcesFit::from_args(&json!({"scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": [
                {"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}}}))
        .unwrap();
        let zero = |name| P::new(name).req(&[("cpu", "0"), ("memory", "0")]);
        let node1 = &[("cpu", "4000"), ("memory", "10000")];
        let node2 = &[("cpu", "6000"), ("memory", "10000")];
        // Nothing scheduled, nothing requested.
        let snap = two_nodes(
            node1,
            node1,
            vec![("a", zero("z1").build()), ("a", zero("z2").build())],
        );
        let s = score_all(&p, &zero("p").build(), &snap);
        assert_eq!((s["a"], s["b"]), (100, 100));
        // Resources requested, differently sized nodes: node1 cpu 75% ->
        // 25, memory 50% -> 50, (25 + 50) / 2 = 37.5 rounds to 38.
        let snap = two_nodes(
            node1,
            node2,
            vec![("a", zero("z1").build()), ("a", zero("z2").build())],
        );
        let pod = P::new("p")
            .req(&[("cpu", "1000"), ("memory", "2000")])
            .req(&[("cpu", "2000"), ("memory", "3000")])
            .build();
        let s = score_all(&p, &pod, &snap);
        assert_eq!((s["a"], s["b"]), (38, 50));
        // Nothing requested, pods scheduled with resources.
        let used = |name| {
            P::new(name)
                .req(&[("cpu", "3000"), ("memory", "5000")])
                .build()
        };
        let snap = two_nodes(node1, node2, vec![("a", used("u1")), ("b", used("u2"))]);
        let s = score_all(&p, &zero("p").build(), &snap);
        assert_eq!((s["a"], s["b"]), (38, 50));
        // A resource that scores 0 leaves the average: the non-zero
        // default memory (200Mi) is beyond 10000 bytes.
        let snap = two_nodes(node1, node1, vec![]);
        let s = score_all(&p, &P::new("p").req(&[("cpu", "2000")]).build(), &snap);
        assert_eq!(s["a"], 50);
    }

    #[test]
    fn least_allocated_counts_existing_pods_and_non_zero_defaults() {
        // The incoming pod requests nothing: scored as 100m cpu and 200Mi.
        // a holds a pod with 1 cpu / 2Gi; b is empty. Both 4 cpu / 8Gi.
        // a: cpu (4000-1100)*100/4000 = 72; memory
        //    (8589934592-2357198848)*100/8589934592 = 72 -> 72
        // b: cpu (4000-100)*100/4000 = 97; memory
        //    (8589934592-209715200)*100/8589934592 = 97 -> 97
        let alloc = &[("cpu", "4"), ("memory", "8Gi")];
        let snap = two_nodes(
            alloc,
            alloc,
            vec![(
                "a",
                P::new("used")
                    .req(&[("cpu", "1"), ("memory", "2Gi")])
                    .build(),
            )],
        );
        let s = score_all(&fit(), &P::new("p").build(), &snap);
        assert_eq!((s["a"], s["b"]), (72, 97));
    }

    #[test]
    fn least_allocated_over_capacity_scores_zero() {
        let snap = two_nodes(
            &[("cpu", "1"), ("memory", "1000")],
            &[("cpu", "1"), ("memory", "1000")],
            vec![],
        );
        let pod = P::new("p").req(&[("cpu", "2"), ("memory", "2000")]).build();
        let s = score_all(&fit(), &pod, &snap);
        assert_eq!((s["a"], s["b"]), (0, 0));
    }

    #[test]
    fn most_allocated_differently_sized_nodes() {
        // Upstream most_allocated_test "nothing scheduled, resources
        // requested, differently sized nodes":
        // a: cpu 1000*100/4000 = 25, memory 2000*100/10000 = 20 -> 22
        // b: cpu 1000*100/6000 = 16, memory 20 -> 18
        let most =
            NodeResourcesFit::from_args(&json!({"scoringStrategy": {"type": "MostAllocated"}}))
                .unwrap();
        let snap = two_nodes(
            &[("cpu", "4"), ("memory", "10000")],
            &[("cpu", "6"), ("memory", "10000")],
            vec![],
        );
        let pod = P::new("p").req(&[("cpu", "1"), ("memory", "2000")]).build();
        let s = score_all(&most, &pod, &snap);
        assert_eq!((s["a"], s["b"]), (22, 18));
    }

    #[test]
    fn most_allocated_caps_over_capacity_and_uses_weights() {
        // cpu weight 2, memory 1. a: cpu 5000 > 4000 -> 100, memory
        // 2000*100/10000 = 20 -> (200+20)/3 = 73. b: cpu 5000*100/6000 = 83,
        // memory 20 -> (166+20)/3 = 62.
        let most = NodeResourcesFit::from_args(&json!({"scoringStrategy": {
            "type": "MostAllocated",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]
        }}))
        .unwrap();
        let snap = two_nodes(
            &[("cpu", "4"), ("memory", "10000")],
            &[("cpu", "6"), ("memory", "10000")],
            vec![],
        );
        let pod = P::new("p").req(&[("cpu", "5"), ("memory", "2000")]).build();
        let s = score_all(&most, &pod, &snap);
        assert_eq!((s["a"], s["b"]), (73, 62));
    }

    #[test]
    fn most_allocated_packs_extended_resources() {
        // Only nvidia.com/gpu is scored: a has 1 of 4 GPUs used, b none.
        // a: (1+1)*100/4 = 50; b: 1*100/4 = 25.
        let most = NodeResourcesFit::from_args(&json!({"scoringStrategy": {
            "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]
        }}))
        .unwrap();
        let alloc = &[("cpu", "8"), ("memory", "8Gi"), ("nvidia.com/gpu", "4")];
        let snap = two_nodes(
            alloc,
            alloc,
            vec![("a", P::new("used").req(&[("nvidia.com/gpu", "1")]).build())],
        );
        let pod = P::new("p").req(&[("nvidia.com/gpu", "1")]).build();
        let s = score_all(&most, &pod, &snap);
        assert_eq!((s["a"], s["b"]), (50, 25));
        // A pod not asking for GPUs is not scored on them at all.
        let s = score_all(
            &most,
            &P::new("cpu-only").req(&[("cpu", "1")]).build(),
            &snap,
        );
        assert_eq!((s["a"], s["b"]), (0, 0));
    }

    #[test]
    fn per_resource_scores_match_upstream_formulas() {
        assert_eq!(least_requested_score(3000, 4000), 25);
        assert_eq!(least_requested_score(0, 0), 0);
        assert_eq!(least_requested_score(5, 4), 0);
        assert_eq!(most_requested_score(1000, 6000), 16);
        assert_eq!(most_requested_score(7000, 6000), 100);
        assert_eq!(most_requested_score(1, 0), 0);
    }

    // ---- args -----------------------------------------------------------

    #[test]
    fn args_default_to_least_allocated_cpu_memory() {
        let a = FitArgs::parse(None).unwrap();
        assert_eq!(a, FitArgs::default());
        assert_eq!(a.strategy, ScoringStrategy::LeastAllocated);
        assert_eq!(a.resources, default_resources());
        assert_eq!(
            NodeResourcesFit::from_args(&json!({})).unwrap().args(),
            &FitArgs::default()
        );
    }

    #[test]
    fn args_parse_upstream_shape() {
        let p = NodeResourcesFit::from_args(&json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "NodeResourcesFitArgs",
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 5}]
            },
            "ignoredResources": ["example.com/aaa"]
        }))
        .unwrap();
        assert_eq!(p.args().strategy, ScoringStrategy::MostAllocated);
        assert_eq!(
            p.args().resources,
            vec![
                ResourceWeight::new("cpu", 1),
                ResourceWeight::new("nvidia.com/gpu", 5)
            ]
        );
        assert!(p.args().ignored_resources.contains("example.com/aaa"));
        // An empty resource list keeps the default; an omitted weight is 1.
        let p = NodeResourcesFit::from_args(
            &json!({"scoringStrategy": {"type": "LeastAllocated", "resources": []}}),
        )
        .unwrap();
        assert_eq!(p.args().resources, default_resources());
        let p = NodeResourcesFit::from_args(&json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "memory"}]}})).unwrap();
        assert_eq!(p.args().resources, vec![ResourceWeight::new("memory", 1)]);
    }

    #[test]
    fn args_errors_name_the_field() {
        let err = |v: Value| NodeResourcesFit::from_args(&v).unwrap_err();
        assert!(err(json!({"scoringStrategi": {}})).starts_with("scoringStrategi: unknown field"));
        assert!(err(json!({"scoringStrategy": {"type": "Fancy"}}))
            .starts_with("scoringStrategy.type: unsupported value"));
        assert!(err(json!({"scoringStrategy": {}})).starts_with("scoringStrategy.type: required"));
        assert!(
            err(json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}))
                .starts_with("scoringStrategy.requestedToCapacityRatio: required")
        );
        let ratio = |shape: Value| {
            err(
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": shape}}}),
            )
        };
        assert!(ratio(json!([])).contains("at least one point"));
        assert!(ratio(json!([{"utilization": 101, "score": 1}]))
            .starts_with("scoringStrategy.requestedToCapacityRatio.shape[0].utilization"));
        assert!(ratio(json!([{"utilization": 10, "score": 11}]))
            .starts_with("scoringStrategy.requestedToCapacityRatio.shape[0].score"));
        assert!(
            ratio(json!([{"utilization": 50}, {"utilization": 50, "score": 1}]))
                .contains("shape[1].utilization: must be greater")
        );
        assert!(err(json!({"scoringStrategy": {"type": "MostAllocated",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0}]}}}))
        .contains("only valid with type RequestedToCapacityRatio"));
        assert!(
            err(json!({"scoringStrategy": {"type": "MostAllocated", "shape": []}}))
                .starts_with("scoringStrategy.shape: unknown field")
        );
        assert!(err(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}}))
            .starts_with("scoringStrategy.resources[0].weight: must be an integer in 1..=100"));
        assert!(err(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 101}]}}))
            .starts_with("scoringStrategy.resources[0].weight"));
        assert!(err(
            json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"weight": 1}]}})
        )
        .starts_with("scoringStrategy.resources[0].name"));
        assert!(err(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "wieght": 1}]}}))
            .starts_with("scoringStrategy.resources[0].wieght: unknown field"));
        assert!(err(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}, {"name": "cpu"}]}}))
            .contains("duplicate"));
        assert!(err(json!({"ignoredResources": "x"}))
            .starts_with("ignoredResources: expected an array"));
        assert!(err(json!({"ignoredResources": [1]})).starts_with("ignoredResources[0]"));
        assert!(err(json!({"scoringStrategy": "MostAllocated"}))
            .starts_with("scoringStrategy: expected an object"));
    }
}
