//! The cluster state every plugin instance keeps, updated by the host's
//! deltas. Keeping it resident is what makes per-node calls cheap: the host
//! passes node indices, never node records, on the hot path.

use std::collections::{BTreeMap, HashMap};

use crate::types::{Delta, Node, Pod};
use crate::view::NodeExt;

/// A node and the pods placed on it.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub index: u32,
    pub node: Node,
    pub pods: Vec<Pod>,
    requested: BTreeMap<String, i64>,
}

impl NodeState {
    /// Sum of the placed pods' requests of `resource`.
    pub fn requested(&self, resource: &str) -> i64 {
        self.requested.get(resource).copied().unwrap_or(0)
    }

    /// Allocatable minus requested (never negative).
    pub fn free(&self, resource: &str) -> i64 {
        (self.node.allocatable(resource) - self.requested(resource)).max(0)
    }

    fn add(&mut self, pod: Pod) {
        for r in &pod.requests {
            *self.requested.entry(r.name.clone()).or_insert(0) += r.amount;
        }
        self.pods.push(pod);
    }

    fn remove(&mut self, uid: &str) {
        if let Some(i) = self.pods.iter().position(|p| p.uid == uid) {
            let pod = self.pods.swap_remove(i);
            for r in &pod.requests {
                *self.requested.entry(r.name.clone()).or_insert(0) -= r.amount;
            }
        }
    }
}

/// Every node the host told this instance about, by node index.
#[derive(Debug, Default, Clone)]
pub struct Cluster {
    nodes: Vec<Option<NodeState>>,
    pod_node: HashMap<String, u32>,
}

impl Cluster {
    pub fn node(&self, index: u32) -> Option<&NodeState> {
        self.nodes.get(index as usize).and_then(|n| n.as_ref())
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.nodes.iter().flatten()
    }

    /// Every placed pod with its node.
    pub fn pods(&self) -> impl Iterator<Item = (&NodeState, &Pod)> {
        self.nodes()
            .flat_map(|n| n.pods.iter().map(move |p| (n, p)))
    }

    /// The node a pod is placed on.
    pub fn node_of(&self, pod_uid: &str) -> Option<&NodeState> {
        self.pod_node.get(pod_uid).and_then(|i| self.node(*i))
    }

    pub fn apply(&mut self, delta: Delta) {
        match delta {
            Delta::NodeSet((index, node)) => {
                let i = index as usize;
                if self.nodes.len() <= i {
                    self.nodes.resize_with(i + 1, || None);
                }
                match &mut self.nodes[i] {
                    Some(state) => state.node = node,
                    slot => {
                        *slot = Some(NodeState {
                            index,
                            node,
                            pods: Vec::new(),
                            requested: BTreeMap::new(),
                        })
                    }
                }
            }
            Delta::NodeRemove(index) => {
                if let Some(state) = self.nodes.get_mut(index as usize).and_then(|s| s.take()) {
                    for p in state.pods {
                        self.pod_node.remove(&p.uid);
                    }
                }
            }
            Delta::PodAdd(placement) => {
                let uid = placement.pod.uid.clone();
                self.remove_pod(&uid);
                if let Some(Some(state)) = self.nodes.get_mut(placement.node as usize) {
                    state.add(placement.pod);
                    self.pod_node.insert(uid, placement.node);
                }
            }
            Delta::PodRemove(removal) => {
                if let Some(Some(state)) = self.nodes.get_mut(removal.node as usize) {
                    state.remove(&removal.pod_uid);
                }
                self.pod_node.remove(&removal.pod_uid);
            }
        }
    }

    /// Replaces the metrics of the node at `index`; false when there is
    /// no such node.
    pub fn set_metrics(&mut self, index: u32, metrics: Vec<(String, f64)>) -> bool {
        match self.nodes.get_mut(index as usize) {
            Some(Some(state)) => {
                state.node.metrics = metrics;
                true
            }
            _ => false,
        }
    }

    /// New values for the metrics of the node at `index`, one per metric
    /// it has, in order (extra values are ignored, missing ones leave the
    /// old value); false when there is no such node.
    pub fn set_metric_values(&mut self, index: u32, values: &[f64]) -> bool {
        match self.nodes.get_mut(index as usize) {
            Some(Some(state)) => {
                for ((_, v), new) in state.node.metrics.iter_mut().zip(values) {
                    *v = *new;
                }
                true
            }
            _ => false,
        }
    }

    fn remove_pod(&mut self, uid: &str) {
        if let Some(i) = self.pod_node.remove(uid) {
            if let Some(Some(state)) = self.nodes.get_mut(i as usize) {
                state.remove(uid);
            }
        }
    }
}
