//! What the plugin reads of a node's GPUs, parsed once per node change and
//! kept in the instance (`observe`): the GPU labels, the utilization and
//! the NVLink topology, and (computed on first use after a pod change on
//! the node) the per-GPU slot table. Filter and Score then read a node's
//! GPUs without parsing a label or allocating.

use std::cell::{Ref, RefCell};

use wasmsched_plugin_sdk::types::{Delta, Node};
use wasmsched_plugin_sdk::{Cluster, NodeState, Rejection};

use crate::args::Config;
use crate::gpus::{self, NodeGpus, Slot};

/// A node's GPU labels, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpus {
    pub capacity: u32,
    pub model: Option<String>,
    pub memory_mib: Option<u64>,
}

impl Gpus {
    pub fn view(&self) -> NodeGpus<'_> {
        NodeGpus {
            capacity: self.capacity,
            model: self.model.as_deref(),
            memory_mib: self.memory_mib,
        }
    }
}

/// The per-GPU slots of a node and its free whole GPUs, or why the placed
/// pods' annotations cannot be read.
pub type Slots = Result<(Vec<Slot>, u32), Rejection>;

/// What one node's labels and annotations say, each read as
/// [`GpuTopology::place`](crate::GpuTopology::place) reads it.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    pub gpus: Result<Gpus, Rejection>,
    /// Meaningful only when `gpus` is `Ok`.
    pub utilization: Result<Option<u32>, Rejection>,
    /// Meaningful only when `gpus` is `Ok`.
    pub domains: Result<Option<Vec<Vec<u32>>>, Rejection>,
}

impl NodeFacts {
    /// Reads a node.
    pub fn read(node: &Node, cfg: &Config) -> Self {
        let gpus = gpus::read_labels(node).map(|g| Gpus {
            capacity: g.capacity,
            model: g.model.map(str::to_string),
            memory_mib: g.memory_mib,
        });
        let capacity = gpus.as_ref().map_or(0, |g| g.capacity);
        NodeFacts {
            gpus,
            utilization: gpus::utilization_pct(node, cfg),
            domains: gpus::topology(node, capacity),
        }
    }
}

/// One node's entry.
struct Entry {
    facts: NodeFacts,
    /// `None` until first read after the node's pods changed.
    slots: RefCell<Option<Slots>>,
}

/// The facts of every node the host sent, by node index.
#[derive(Default)]
pub struct Facts {
    nodes: Vec<Option<Entry>>,
}

impl Facts {
    /// Applies one change (before the SDK's `cluster` applies it).
    pub fn observe(&mut self, delta: &Delta, cfg: &Config, cluster: &Cluster) {
        match delta {
            Delta::NodeSet((index, node)) => {
                let entry = Entry {
                    facts: NodeFacts::read(node, cfg),
                    slots: RefCell::new(None),
                };
                let i = *index as usize;
                if self.nodes.len() <= i {
                    self.nodes.resize_with(i + 1, || None);
                }
                self.nodes[i] = Some(entry);
            }
            Delta::NodeRemove(index) => {
                if let Some(slot) = self.nodes.get_mut(*index as usize) {
                    *slot = None;
                }
            }
            Delta::PodAdd(p) => {
                // A pod placed again leaves its old node.
                if let Some(old) = cluster.node_of(&p.pod.uid) {
                    self.forget_slots(old.index);
                }
                self.forget_slots(p.node);
            }
            Delta::PodRemove(r) => {
                if let Some(old) = cluster.node_of(&r.pod_uid) {
                    self.forget_slots(old.index);
                }
                self.forget_slots(r.node);
            }
        }
    }

    /// A node's metrics changed and nothing else: its utilization is read
    /// again (labels, topology and slots stay).
    pub fn metrics_changed(&mut self, index: u32, node: &Node, cfg: &Config) {
        if let Some(Some(e)) = self.nodes.get_mut(index as usize) {
            e.facts.utilization = gpus::utilization_pct(node, cfg);
        }
    }

    fn forget_slots(&mut self, node: u32) {
        if let Some(Some(e)) = self.nodes.get_mut(node as usize) {
            *e.slots.get_mut() = None;
        }
    }

    /// The facts of node `ns` and its slots (computed from `ns` when not
    /// kept); `None` for a node never sent.
    pub fn get(&self, ns: &NodeState, cfg: &Config) -> Option<(&NodeFacts, Ref<'_, Slots>)> {
        let e = self.nodes.get(ns.index as usize)?.as_ref()?;
        if e.slots.borrow().is_none() {
            *e.slots.borrow_mut() = Some(slots_of(&e.facts, ns, cfg));
        }
        let slots = Ref::map(e.slots.borrow(), |s| s.as_ref().expect("just computed"));
        Some((&e.facts, slots))
    }
}

/// The slots of a node with these facts.
pub fn slots_of(facts: &NodeFacts, ns: &NodeState, cfg: &Config) -> Slots {
    match &facts.gpus {
        Ok(g) => gpus::slots(ns, &g.view(), cfg),
        Err(r) => Err(r.clone()),
    }
}
