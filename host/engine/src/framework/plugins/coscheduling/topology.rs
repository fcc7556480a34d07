//! Topology domains: a PodGroup annotation names a node label (an NVLink
//! domain, rack or zone); the whole group's placement is planned before
//! its first member is reserved, so a group never fills a domain halfway.
//!
//! The plan packs the members still to place (largest first, first fit)
//! onto each domain's free capacity, after the members other groups have
//! planned but not yet reserved (their claims). `required`: the tightest
//! domain that holds them all, or the group waits. `preferred`: that
//! domain if there is one, else the fewest domains (most members first)
//! that hold them together, else no restriction. A member then passes
//! Filter only on nodes of its plan's domains.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::framework::node_info::{NodeInfo, Snapshot};
use crate::framework::plugins::helpers::matches_required_node_affinity;
use crate::model::node::UNSCHEDULABLE_TAINT_KEY as TAINT_KEY;
use crate::model::pod::tolerated;
use crate::model::pod_group::{Topology, TopologyMode};
use crate::model::resources::{CPU, GPU, MEMORY, PODS};
use crate::model::{Node, Pod, Resources, Taint, TaintEffect};

/// Where a group's members may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub label: String,
    pub mode: TopologyMode,
    pub domains: BTreeSet<String>,
}

impl Plan {
    pub fn admits(&self, node: &Node) -> bool {
        node.labels
            .get(&self.label)
            .is_some_and(|v| self.domains.contains(v))
    }
}

/// Members another group planned into domains but has not reserved yet.
#[derive(Debug, Clone)]
pub struct Claim {
    pub plan: Arc<Plan>,
    pub pods: Vec<Arc<Pod>>,
}

/// What the planner is given about one group.
pub struct Request<'a> {
    pub key: &'a str,
    pub topology: &'a Topology,
    /// Members neither bound nor reserved (the cycle's pod among them).
    pub pending: Vec<Arc<Pod>>,
    /// Nodes of the members already bound or reserved.
    pub assigned_nodes: &'a [String],
}

/// A node's free capacity during the packing.
struct Slot<'a> {
    node: &'a Node,
    free: Resources,
    pods_free: i64,
}

/// The plan for `req`; `Ok(None)`: no restriction (preferred, and no set
/// of domains holds the group). `Err`: a required group cannot be placed.
pub fn plan(req: Request, snapshot: &Snapshot, claims: &[Claim]) -> Result<Option<Plan>, String> {
    let label = &req.topology.label;
    let mut domains: BTreeMap<&str, Vec<&NodeInfo>> = BTreeMap::new();
    for n in snapshot.nodes() {
        if let Some(v) = n.node.labels.get(label) {
            domains.entry(v.as_str()).or_default().push(n);
        }
    }
    let fixed: BTreeSet<String> = req
        .assigned_nodes
        .iter()
        .filter_map(|n| snapshot.by_name(n))
        .filter_map(|n| n.node.labels.get(label).cloned())
        .collect();
    let mut pods = req.pending.clone();
    pods.sort_by(|a, b| size(b).cmp(&size(a)).then(a.uid.cmp(&b.uid)));
    let make = |domains: BTreeSet<String>| Plan {
        label: label.clone(),
        mode: req.topology.mode,
        domains,
    };
    if pods.is_empty() {
        return Ok((!fixed.is_empty()).then(|| make(fixed)));
    }
    let dominant = if pods.iter().any(|p| p.requests.get(GPU) > 0) {
        GPU
    } else {
        CPU
    };
    let mut best: Option<(i64, &str)> = None;
    let mut largest = 0;
    for (name, nodes) in &domains {
        if !fixed.is_empty() && !fixed.contains(*name) {
            continue;
        }
        let mut slots = room(name, nodes, claims, label);
        let placed = fill(&mut slots, &pods).len();
        largest = largest.max(placed);
        if placed == pods.len() {
            let slack: i64 = slots.iter().map(|s| s.free.get(dominant).max(0)).sum();
            if best.is_none_or(|(b, _)| slack < b) {
                best = Some((slack, name));
            }
        }
    }
    if let Some((_, name)) = best {
        return Ok(Some(make(BTreeSet::from([name.to_string()]))));
    }
    match req.topology.mode {
        TopologyMode::Required => Err(no_domain(&req, domains.len(), largest, pods.len())),
        TopologyMode::Preferred => {
            Ok(fewest_domains(&domains, &pods, fixed, claims, label).map(make))
        }
    }
}

fn no_domain(req: &Request, domains: usize, largest: usize, wanted: usize) -> String {
    let label = &req.topology.label;
    if domains == 0 {
        return format!("pod group {}: no node has the label {label}", req.key);
    }
    format!(
        "pod group {}: no {label} domain has room for its {wanted} unplaced member(s) (the roomiest takes {largest})",
        req.key
    )
}

/// Greedy: the domains already used by the group's assigned members
/// first, then the domain that takes the most of the rest, until all are
/// placed. `None` when the domains together cannot hold them.
fn fewest_domains(
    domains: &BTreeMap<&str, Vec<&NodeInfo>>,
    pods: &[Arc<Pod>],
    fixed: BTreeSet<String>,
    claims: &[Claim],
    label: &str,
) -> Option<BTreeSet<String>> {
    let mut rest: Vec<Arc<Pod>> = pods.to_vec();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut chosen = fixed.clone();
    while !rest.is_empty() {
        let fixed_left = fixed
            .iter()
            .any(|f| !used.contains(f) && domains.contains_key(f.as_str()));
        let mut pick: Option<(&str, Vec<usize>)> = None;
        for (name, nodes) in domains {
            if used.contains(*name) || (fixed_left && !fixed.contains(*name)) {
                continue;
            }
            let mut slots = room(name, nodes, claims, label);
            let placed = fill(&mut slots, &rest);
            if pick.as_ref().is_none_or(|(_, p)| placed.len() > p.len()) {
                pick = Some((name, placed));
            }
        }
        let (name, placed) = pick?;
        used.insert(name.to_string());
        if placed.is_empty() {
            if fixed_left {
                continue;
            }
            return None;
        }
        chosen.insert(name.to_string());
        let placed: BTreeSet<usize> = placed.into_iter().collect();
        rest = rest
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !placed.contains(i))
            .map(|(_, p)| p)
            .collect();
    }
    Some(chosen)
}

/// The free capacity of one domain's nodes, after the claims of other
/// groups planned into it.
fn room<'a>(domain: &str, nodes: &[&'a NodeInfo], claims: &[Claim], label: &str) -> Vec<Slot<'a>> {
    let mut slots: Vec<Slot<'a>> = nodes
        .iter()
        .map(|n| {
            let mut free = n.node.allocatable.clone();
            free.sub(&n.requested);
            let pods_free = n.node.allocatable.get(PODS) - n.pods.len() as i64;
            Slot {
                node: &n.node,
                free,
                pods_free,
            }
        })
        .collect();
    for c in claims {
        if c.plan.label == label && c.plan.domains.contains(domain) {
            fill(&mut slots, &c.pods);
        }
    }
    slots
}

/// Places `pods` first fit; returns the indices of those placed.
fn fill(slots: &mut [Slot], pods: &[Arc<Pod>]) -> Vec<usize> {
    let mut placed = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        if let Some(s) = slots.iter_mut().find(|s| fits(s, pod)) {
            s.free.sub(&pod.requests);
            s.pods_free -= 1;
            placed.push(i);
        }
    }
    placed
}

fn fits(slot: &Slot, pod: &Pod) -> bool {
    slot.pods_free >= 1
        && eligible(slot.node, pod)
        && pod
            .requests
            .iter()
            .all(|(r, want)| want <= 0 || r == PODS || slot.free.get(r) >= want)
}

/// What resource fit alone misses: cordons, untolerated NoSchedule and
/// NoExecute taints, the pod's required node affinity.
fn eligible(node: &Node, pod: &Pod) -> bool {
    let cordon = Taint {
        key: TAINT_KEY.to_string(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    if node.unschedulable && !tolerated(&pod.tolerations, &cordon) {
        return false;
    }
    node.taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .all(|t| tolerated(&pod.tolerations, t))
        && matches_required_node_affinity(pod, node)
}

/// Packing order: GPUs, then cpu, then memory.
fn size(p: &Pod) -> (i64, i64, i64) {
    (
        p.requests.get(GPU),
        p.requests.get(CPU),
        p.requests.get(MEMORY),
    )
}
