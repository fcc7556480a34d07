//! The scheduling plugin: args, CycleState, Filter, Score, NormalizeScore.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::{Map, Value};
use wasmsched_plugin_sdk::types::{CyclePlan, Delta, KeyInterests, KeySelector, LogLevel, Pod};
use wasmsched_plugin_sdk::{
    export_plugin, log, reject_unresolvable, Cluster, NodeState, Plugin, Rejection,
};

use crate::index::{PeerIndex, Placed};
use crate::locality::{
    CostModel, Costs, LabelLookup, Location, MaxDistance, PeerSpec, LEGACY_REGION_LABEL,
    LEGACY_ZONE_LABEL, MAX_DISTANCE_ANNOTATION, PEERS_ANNOTATION, PEER_NAMESPACES_ANNOTATION,
    REGION_LABEL, ZONE_LABEL,
};

/// Largest cost an arg may set.
pub const MAX_COST: u64 = 1_000_000;

/// How many distinct peer annotations are kept parsed before the cache is
/// cleared.
const CACHE_LIMIT: usize = 4096;

/// Parses the plugin args: `{"costs": {"sameNode": 0, "sameZone": 1,
/// "sameRegion": 10, "crossRegion": 100, "unknown": 100}, "zoneCosts":
/// {"zone-a": {"zone-b": 5}}}`, every field optional. Errors name the field.
pub fn parse_args(text: &str) -> Result<CostModel, String> {
    let fail = |m: String| format!("network-locality args: {m}");
    let value: Value = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(text).map_err(|e| fail(format!("not valid JSON: {e}")))?
    };
    let empty = Map::new();
    let top = match &value {
        Value::Object(o) => o,
        Value::Null => &empty,
        _ => return Err(fail("must be a JSON object".to_string())),
    };
    let mut costs = Costs::default();
    let mut model_zones: Vec<(String, String, u64)> = Vec::new();
    for (key, v) in top {
        match key.as_str() {
            "costs" => {
                let obj = v
                    .as_object()
                    .ok_or_else(|| fail("costs: must be an object".to_string()))?;
                for (name, c) in obj {
                    let slot = match name.as_str() {
                        "sameNode" => &mut costs.same_node,
                        "sameZone" => &mut costs.same_zone,
                        "sameRegion" => &mut costs.same_region,
                        "crossRegion" => &mut costs.cross_region,
                        "unknown" => &mut costs.unknown,
                        _ => {
                            return Err(fail(format!(
                                "costs.{name}: unknown field (expected sameNode, sameZone, sameRegion, crossRegion, unknown)"
                            )))
                        }
                    };
                    *slot = cost_value(c).map_err(|m| fail(format!("costs.{name}: {m}")))?;
                }
            }
            "zoneCosts" => {
                let obj = v
                    .as_object()
                    .ok_or_else(|| fail("zoneCosts: must be an object".to_string()))?;
                for (from, row) in obj {
                    if from.is_empty() {
                        return Err(fail("zoneCosts: empty zone name".to_string()));
                    }
                    let row = row.as_object().ok_or_else(|| {
                        fail(format!("zoneCosts.{from}: must be an object of zone: cost"))
                    })?;
                    for (to, c) in row {
                        if to.is_empty() {
                            return Err(fail(format!("zoneCosts.{from}: empty zone name")));
                        }
                        let c = cost_value(c)
                            .map_err(|m| fail(format!("zoneCosts.{from}.{to}: {m}")))?;
                        model_zones.push((from.clone(), to.clone(), c));
                    }
                }
            }
            _ => {
                return Err(fail(format!(
                    "{key}: unknown field (expected costs, zoneCosts)"
                )))
            }
        }
    }
    let mut model = CostModel::new(costs);
    for (i, (from, to, c)) in model_zones.iter().enumerate() {
        let earlier = model_zones[..i]
            .iter()
            .find(|(f, t, _)| (f == from && t == to) || (f == to && t == from));
        if let Some((f, t, prev)) = earlier.filter(|(_, _, prev)| prev != c) {
            return Err(fail(format!(
                "zoneCosts.{from}.{to}: {c} conflicts with zoneCosts.{f}.{t}: {prev} (costs are symmetric)"
            )));
        }
        model.set_zone_cost(from, to, *c);
    }
    Ok(model)
}

fn cost_value(v: &Value) -> Result<u64, String> {
    match v.as_u64() {
        Some(c) if c <= MAX_COST => Ok(c),
        _ => Err(format!("must be an integer from 0 to {MAX_COST}, got {v}")),
    }
}

/// `(peer-namespaces text, parsed spec or None when invalid)` for one
/// peers text.
type CacheRow = Vec<(Option<String>, Option<Rc<PeerSpec>>)>;

/// Parsed peer annotations of placed pods, by annotation text.
#[derive(Default)]
struct SpecCache {
    /// peers text -> [(peer-namespaces text, parsed or None when invalid)]
    by_text: HashMap<String, CacheRow>,
    len: usize,
}

impl SpecCache {
    fn get(&mut self, pod: &Pod, peers: &str) -> Option<Rc<PeerSpec>> {
        let namespaces = pod.annotations.lookup(PEER_NAMESPACES_ANNOTATION);
        if let Some(row) = self.by_text.get(peers) {
            if let Some((_, spec)) = row.iter().find(|(ns, _)| ns.as_deref() == namespaces) {
                return spec.clone();
            }
        }
        let spec = match PeerSpec::parse(peers, namespaces) {
            Ok(spec) => Some(Rc::new(spec)),
            Err(e) => {
                log(
                    LogLevel::Warn,
                    &format!(
                        "ignoring the peers of placed pod {}/{} (and of others with the same annotations): {e}",
                        pod.namespace, pod.name
                    ),
                );
                None
            }
        };
        if self.len >= CACHE_LIMIT {
            self.by_text.clear();
            self.len = 0;
        }
        self.len += 1;
        self.by_text
            .entry(peers.to_string())
            .or_default()
            .push((namespaces.map(str::to_string), spec.clone()));
        spec
    }
}

/// Where the placed pods of one of the pod's own peer entries are.
#[derive(Default)]
struct Reach {
    nodes: HashSet<u32>,
    zones: HashSet<String>,
    regions: HashSet<String>,
}

impl Reach {
    fn add(&mut self, node: &NodeState) {
        if self.nodes.insert(node.index) {
            let loc = Location::of(&node.node.name, node.node.labels.as_slice());
            if let Some(z) = loc.zone {
                self.zones.insert(z.to_string());
            }
            if let Some(r) = loc.region {
                self.regions.insert(r.to_string());
            }
        }
    }

    fn reaches(&self, node: &NodeState, loc: &Location<'_>, max: MaxDistance) -> bool {
        self.nodes.contains(&node.index)
            || (max >= MaxDistance::Zone && loc.zone.is_some_and(|z| self.zones.contains(z)))
            || (max >= MaxDistance::Region && loc.region.is_some_and(|r| self.regions.contains(r)))
    }
}

/// What `cycle_start` precomputes for one pod.
pub struct Cycle {
    /// Summed pair weight of the placed peers on each node.
    node_weight: HashMap<u32, u64>,
    /// Summed pair weight of the placed peers by interned location.
    peer_locs: Vec<(u32, u64)>,
    /// The weighted cost of a node at each interned location (peers on the
    /// node itself counted as two nodes of its zone).
    loc_cost: Vec<u128>,
    max_distance: Option<MaxDistance>,
    /// One per own peer entry that selects at least one placed pod.
    reach: Vec<Reach>,
}

impl Cycle {
    /// Whether any placed pod is a peer (either direction).
    pub fn has_peers(&self) -> bool {
        !self.node_weight.is_empty()
    }
}

/// Rejection reason of the max-distance Filter.
pub fn too_far_reason(max: MaxDistance) -> String {
    format!("node(s) too far from network peers (max-distance {max})")
}

pub struct NetworkLocality {
    model: CostModel,
    cache: RefCell<SpecCache>,
    /// Placed pods by label, declaring pods by what they select, and node
    /// locations (kept by `observe`).
    pub(crate) index: RefCell<PeerIndex>,
}

impl NetworkLocality {
    pub fn model(&self) -> &CostModel {
        &self.model
    }
}

impl Plugin for NetworkLocality {
    type Cycle = Cycle;

    fn interests(&self) -> KeyInterests {
        interests()
    }

    /// No node metric: passes of the node-metrics source never reach it.
    fn metric_interests(&self) -> Vec<String> {
        Vec::new()
    }

    fn init(args: &str) -> Result<Self, String> {
        Ok(Self {
            model: parse_args(args)?,
            cache: RefCell::new(SpecCache::default()),
            index: RefCell::new(PeerIndex::default()),
        })
    }

    /// Keeps the index of placed pods and node locations, so a cycle looks
    /// only at the pods its selectors (and the selectors that select it)
    /// can match rather than at every placed pod.
    fn observe(&self, delta: &Delta, cluster: &Cluster) {
        let mut index = self.index.borrow_mut();
        match delta {
            // The cluster ignores a pod on a node it does not know.
            Delta::PodAdd(placement) if cluster.node(placement.node).is_none() => {
                index.remove(&placement.pod.uid)
            }
            Delta::PodAdd(placement) => {
                let pod = &placement.pod;
                let spec = pod
                    .annotations
                    .lookup(PEERS_ANNOTATION)
                    .and_then(|peers| self.cache.borrow_mut().get(pod, peers));
                index.add(pod, placement.node, spec);
            }
            Delta::PodRemove(removal) => index.remove(&removal.pod_uid),
            Delta::NodeRemove(node) => index.remove_node(*node),
            Delta::NodeSet((i, node)) => index.set_node(*i, node),
        }
    }

    fn cycle_start(&self, pod: &Pod, cluster: &Cluster) -> Result<Cycle, String> {
        let own = PeerSpec::from_annotations(pod.annotations.as_slice())?;
        let max_distance = MaxDistance::from_annotations(pod.annotations.as_slice())?;
        let mut reach: Vec<Option<Reach>> = match &own {
            Some(spec) if max_distance.is_some() => spec.entries.iter().map(|_| None).collect(),
            _ => Vec::new(),
        };
        let index = self.index.borrow();
        let mut node_weight: HashMap<u32, u64> = HashMap::new();
        // The pod's own declarations: the placed pods they may select.
        if let Some(spec) = &own {
            let visit = |placed: &Placed| {
                if let Some(w) = selected(spec, pod, placed, cluster, &mut reach) {
                    *node_weight.entry(placed.node).or_insert(0) += w;
                }
            };
            match index.selected_candidates(spec) {
                Some(slots) => slots.iter().filter_map(|&s| index.get(s)).for_each(visit),
                None => index.all().for_each(visit),
            }
        }
        // Reverse dependencies: placed pods that declare this pod.
        for placed in index
            .declaring_candidates(&pod.labels)
            .into_iter()
            .filter_map(|s| index.get(s))
        {
            if placed.uid == pod.uid {
                continue;
            }
            if let Some(w) = placed.spec.as_ref().and_then(|spec| {
                spec.weight_for(&placed.namespace, &pod.namespace, pod.labels.as_slice())
            }) {
                *node_weight.entry(placed.node).or_insert(0) += u64::from(w);
            }
        }
        let peer_locs = peer_locations(&index, &node_weight);
        let loc_cost = if node_weight.is_empty() {
            Vec::new()
        } else {
            location_costs(&self.model, &index, &peer_locs)
        };
        Ok(Cycle {
            node_weight,
            peer_locs,
            loc_cost,
            max_distance,
            reach: reach.into_iter().flatten().collect(),
        })
    }

    /// Filter matters only with a max-distance; Score only when some
    /// placed pod is a peer (otherwise it scores every node 0).
    fn plan(&self, cycle: &Cycle, _pod: &Pod) -> CyclePlan {
        CyclePlan {
            filter: cycle.max_distance.is_some(),
            score: cycle.has_peers(),
        }
    }

    fn filter(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<(), Rejection> {
        let Some(max) = cycle.max_distance else {
            return Ok(());
        };
        let loc = Location::of(&node.node.name, node.node.labels.as_slice());
        if cycle.reach.iter().all(|r| r.reaches(node, &loc, max)) {
            Ok(())
        } else {
            Err(reject_unresolvable(too_far_reason(max)))
        }
    }

    /// The raw score is the weighted network cost of placing the pod on
    /// `node` (lower is better); `normalize` turns it into 0..=100.
    fn score(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<i64, String> {
        if !cycle.has_peers() {
            return Ok(0);
        }
        let index = self.index.borrow();
        let m = &self.model;
        let (mut cost, counted) = match index.node_location(node.index) {
            Some(id) if (id as usize) < cycle.loc_cost.len() => {
                let (zone, region) = index.location(id);
                (
                    cycle.loc_cost[id as usize],
                    m.topology_cost(zone, region, zone, region),
                )
            }
            // A node the index has not placed: its labels, read now.
            _ => {
                let loc = Location::of(&node.node.name, node.node.labels.as_slice());
                let cost = weighted_cost(m, &index, &cycle.peer_locs, loc.zone, loc.region);
                (
                    cost,
                    m.topology_cost(loc.zone, loc.region, loc.zone, loc.region),
                )
            }
        };
        // Peers on this very node were counted at the cost between two
        // nodes of its zone; they cost `sameNode`.
        if let Some(&w) = cycle.node_weight.get(&node.index) {
            cost = cost - u128::from(w) * u128::from(counted)
                + u128::from(w) * u128::from(m.costs.same_node);
        }
        Ok(i64::try_from(cost).unwrap_or(i64::MAX))
    }

    /// Lowest cost -> 100, highest -> 0, linear in between (rounded); all
    /// equal -> 100. A pod with no placed peers scores 0 everywhere.
    fn normalize(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        _nodes: &[u32],
        scores: &mut [i64],
    ) -> Result<(), String> {
        if !cycle.has_peers() {
            scores.iter_mut().for_each(|s| *s = 0);
            return Ok(());
        }
        normalize_costs(scores);
        Ok(())
    }
}

/// The weight of `placed` as a peer `spec` (the cycle's pod's own
/// declaration) selects, noting where it is in `reach`; `None` when
/// the spec does not select it.
fn selected(
    spec: &PeerSpec,
    pod: &Pod,
    placed: &Placed,
    cluster: &Cluster,
    reach: &mut [Option<Reach>],
) -> Option<u64> {
    if placed.uid == pod.uid || !spec.namespaces.contains(&pod.namespace, &placed.namespace) {
        return None;
    }
    let node = cluster.node(placed.node)?;
    let mut best = 0u32;
    for (i, entry) in spec.entries.iter().enumerate() {
        if entry.selector.matches(placed.labels.as_slice()) {
            best = best.max(entry.weight);
            if let Some(slot) = reach.get_mut(i) {
                slot.get_or_insert_with(Reach::default).add(node);
            }
        }
    }
    (best > 0).then_some(u64::from(best))
}

/// The peers' summed weight by interned location.
fn peer_locations(index: &PeerIndex, node_weight: &HashMap<u32, u64>) -> Vec<(u32, u64)> {
    let mut by_loc: Vec<(u32, u64)> = Vec::new();
    for (&node, &weight) in node_weight {
        let Some(id) = index.node_location(node) else {
            continue;
        };
        match by_loc.iter_mut().find(|(l, _)| *l == id) {
            Some((_, w)) => *w += weight,
            None => by_loc.push((id, weight)),
        }
    }
    by_loc
}

/// The weighted cost of a node with these labels to the peers.
fn weighted_cost(
    m: &CostModel,
    index: &PeerIndex,
    peer_locs: &[(u32, u64)],
    zone: Option<&str>,
    region: Option<&str>,
) -> u128 {
    peer_locs
        .iter()
        .map(|&(id, weight)| {
            let (z, r) = index.location(id);
            u128::from(weight) * u128::from(m.topology_cost(zone, region, z, r))
        })
        .sum()
}

/// [`weighted_cost`] for every interned location.
fn location_costs(m: &CostModel, index: &PeerIndex, peer_locs: &[(u32, u64)]) -> Vec<u128> {
    (0..index.locations() as u32)
        .map(|id| {
            let (zone, region) = index.location(id);
            weighted_cost(m, index, peer_locs, zone, region)
        })
        .collect()
}

/// `100 - 100 * (s - min) / (max - min)`, rounded to the nearest integer;
/// every score 100 when all are equal.
pub fn normalize_costs(scores: &mut [i64]) {
    let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    if max == min {
        scores.iter_mut().for_each(|s| *s = 100);
        return;
    }
    let range = i128::from(max) - i128::from(min);
    for s in scores.iter_mut() {
        let off = i128::from(*s) - i128::from(min);
        let scaled = (100 * off + range / 2) / range;
        *s = (100 - scaled) as i64;
    }
}

/// The keys the plugin reads: peers' selectors match any pod label; of
/// annotations only its own three, of nodes only the zone and region labels.
fn interests() -> KeyInterests {
    let keys = |k: &[&str]| KeySelector::Keys(k.iter().map(|s| s.to_string()).collect());
    KeyInterests {
        pod_labels: KeySelector::All,
        pod_annotations: keys(&[
            PEERS_ANNOTATION,
            PEER_NAMESPACES_ANNOTATION,
            MAX_DISTANCE_ANNOTATION,
        ]),
        node_labels: keys(&[
            ZONE_LABEL,
            REGION_LABEL,
            LEGACY_ZONE_LABEL,
            LEGACY_REGION_LABEL,
        ]),
        node_annotations: KeySelector::None,
    }
}

export_plugin!(NetworkLocality: filter, score, interests, metric_interests);
