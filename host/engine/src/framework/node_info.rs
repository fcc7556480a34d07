//! NodeInfo and the cluster snapshot the plugins read during a cycle.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::metric_values::MetricValues;
use super::volumes::VolumeStore;
use crate::model::pod::HostPort;
use crate::model::{Node, Pod, Resources};

/// A node plus what is already placed on it (bound, or assumed by this
/// scheduler), as upstream's `framework.NodeInfo`.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node's slot in the snapshot; also the `node-index` plugins see.
    pub index: u32,
    pub node: Arc<Node>,
    /// The node's live metrics (empty without a node-metrics source).
    pub metrics: MetricValues,
    pub pods: Vec<Arc<Pod>>,
    /// Sum of the placed pods' effective requests.
    pub requested: Resources,
    /// Sum of the placed pods' cpu/memory requests with non-zero defaults
    /// (scoring only).
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    pub used_ports: Vec<HostPort>,
    /// The placed pods with any pod (anti-)affinity term (upstream's
    /// `PodsWithAffinity`), so InterPodAffinity need not walk every pod.
    pub pods_with_affinity: Vec<Arc<Pod>>,
    /// The placed pods with a required anti-affinity term (upstream's
    /// `PodsWithRequiredAntiAffinity`).
    pub pods_with_required_anti_affinity: Vec<Arc<Pod>>,
}

impl NodeInfo {
    pub fn new(index: u32, node: Arc<Node>) -> Self {
        Self {
            index,
            node,
            metrics: MetricValues::default(),
            pods: Vec::new(),
            requested: Resources::default(),
            non_zero_milli_cpu: 0,
            non_zero_memory: 0,
            used_ports: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.node.name
    }

    pub fn add_pod(&mut self, pod: Arc<Pod>) {
        self.requested.add(&pod.requests);
        self.non_zero_milli_cpu += pod.non_zero_milli_cpu;
        self.non_zero_memory += pod.non_zero_memory;
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if !pod.pod_affinity.is_empty() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.pod_affinity.required_anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
    }

    /// Removes the pod with `uid`; returns it when it was there.
    pub fn remove_pod(&mut self, uid: &str) -> Option<Arc<Pod>> {
        let pos = self.pods.iter().position(|p| p.uid == uid)?;
        let pod = self.pods.swap_remove(pos);
        self.pods_with_affinity.retain(|p| p.uid != uid);
        self.pods_with_required_anti_affinity
            .retain(|p| p.uid != uid);
        self.requested.sub(&pod.requests);
        self.non_zero_milli_cpu -= pod.non_zero_milli_cpu;
        self.non_zero_memory -= pod.non_zero_memory;
        for hp in &pod.host_ports {
            if let Some(i) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(i);
            }
        }
        Some(pod)
    }
}

/// One change to the snapshot, kept so that wasm plugin instances (which
/// hold their own copy of the cluster) can catch up by deltas.
#[derive(Debug, Clone)]
pub enum Change {
    /// The node, with its metrics.
    NodeSet(u32, Arc<Node>, MetricValues),
    /// The node's metrics changed and nothing else (a node-metrics
    /// source's pass): the node as it is now, its new metrics, and whether
    /// their names are those it had, in the same order (only values
    /// changed). A plugin that declared its metric interests gets only
    /// those values; others get a whole node.
    NodeMetrics {
        index: u32,
        node: Arc<Node>,
        metrics: MetricValues,
        same_names: bool,
    },
    NodeRemove(u32),
    PodAdd(u32, Arc<Pod>),
    PodRemove(u32, String),
}

/// The cluster as one scheduling cycle sees it. Nodes live in stable
/// slots so that their index can be shared with wasm plugins.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    slots: Vec<Option<NodeInfo>>,
    /// The occupied slots, ascending (the cycle walks them from where the
    /// previous one stopped without collecting every node per pod).
    live: Vec<u32>,
    by_name: HashMap<String, u32>,
    /// Where each placed pod is, by uid.
    pod_node: HashMap<String, u32>,
    /// Nodes with a placed pod that has a pod (anti-)affinity term
    /// (upstream's `HavePodsWithAffinityNodeInfoList`).
    affinity_nodes: BTreeSet<u32>,
    /// How many nodes report each image (upstream's
    /// `ImageStateSummary.NumNodes`), kept as nodes come and go so that
    /// ImageLocality does not walk every node per pod.
    image_holders: HashMap<String, usize>,
    /// Changes since generation `log_base`.
    log: Vec<Change>,
    log_base: u64,
    /// Pods nominated to nodes by preemption (not placed: no change is
    /// logged for them).
    pub nominator: super::nominator::Nominator,
    /// PodDisruptionBudgets, for preemption.
    pub budgets: crate::model::budget::Budgets,
    /// Namespaces and their labels, for affinity terms'
    /// `namespaceSelector`.
    pub namespaces: Arc<crate::model::namespace::Namespaces>,
    /// Services' and controllers' selectors, for PodTopologySpread's
    /// default constraints.
    pub workloads: Arc<crate::model::workload::Workloads>,
    /// PVs, claims, StorageClasses and CSINodes (shared by clones: it is
    /// the one volume store, with its assumed bindings).
    volumes: Arc<VolumeStore>,
}

impl Snapshot {
    /// Counts every change ever made; a plugin instance that has applied
    /// changes up to a generation asks for the ones after it.
    pub fn generation(&self) -> u64 {
        self.log_base + self.log.len() as u64
    }

    /// The changes after generation `since`, or `None` when they were
    /// compacted away (the instance must then be rebuilt from scratch).
    pub fn changes_since(&self, since: u64) -> Option<&[Change]> {
        let start = since.checked_sub(self.log_base)?;
        self.log.get(start as usize..)
    }

    /// Drops the change log when it has grown past the size of the state
    /// itself; lagging instances then rebuild, which costs about as much
    /// as replaying such a log.
    pub fn compact_log(&mut self) {
        if self.log.len() > 1024 + 4 * (self.by_name.len() + self.pod_node.len()) {
            self.log_base += self.log.len() as u64;
            self.log.clear();
        }
    }

    /// The whole state as changes, for a fresh plugin instance.
    pub fn as_changes(&self) -> Vec<Change> {
        let mut out = Vec::with_capacity(self.by_name.len() + self.pod_node.len());
        for info in self.nodes() {
            out.push(Change::NodeSet(
                info.index,
                info.node.clone(),
                info.metrics.clone(),
            ));
        }
        for info in self.nodes() {
            for p in &info.pods {
                out.push(Change::PodAdd(info.index, p.clone()));
            }
        }
        out
    }

    /// The volume objects the volume plugins read.
    pub fn volumes(&self) -> &Arc<VolumeStore> {
        &self.volumes
    }

    /// All nodes, in slot order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeInfo> + Clone {
        self.slots.iter().flatten()
    }

    /// The nodes with a placed pod that has a pod (anti-)affinity term,
    /// in slot order.
    pub fn nodes_with_affinity_pods(&self) -> impl Iterator<Item = &NodeInfo> {
        self.affinity_nodes.iter().filter_map(|&i| self.get(i))
    }

    /// The occupied slots' indexes, ascending (the order of `nodes`).
    pub fn live_slots(&self) -> &[u32] {
        &self.live
    }

    pub fn num_nodes(&self) -> usize {
        self.by_name.len()
    }

    /// How many nodes report `image` in `status.images`.
    pub fn image_holders(&self, image: &str) -> usize {
        self.image_holders.get(image).copied().unwrap_or(0)
    }

    fn count_images(&mut self, node: &Node, add: bool) {
        for image in node.images.keys() {
            if add {
                *self.image_holders.entry(image.clone()).or_default() += 1;
            } else if let Some(n) = self.image_holders.get_mut(image) {
                *n -= 1;
                if *n == 0 {
                    self.image_holders.remove(image);
                }
            }
        }
    }

    pub fn get(&self, index: u32) -> Option<&NodeInfo> {
        self.slots.get(index as usize).and_then(|s| s.as_ref())
    }

    pub fn index_of(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    pub fn by_name(&self, name: &str) -> Option<&NodeInfo> {
        self.index_of(name).and_then(|i| self.get(i))
    }

    /// Adds or replaces a node, keeping its pods and metrics. Returns its
    /// index.
    pub fn set_node(&mut self, node: Node) -> u32 {
        let node = Arc::new(node);
        if let Some(&i) = self.by_name.get(&node.name) {
            let mut metrics = MetricValues::default();
            if let Some(info) = self.slots[i as usize].as_mut() {
                let old = std::mem::replace(&mut info.node, node.clone());
                metrics = info.metrics.clone();
                self.count_images(&old, false);
                self.count_images(&node, true);
            }
            self.log.push(Change::NodeSet(i, node, metrics));
            return i;
        }
        let i = match self.slots.iter().position(|s| s.is_none()) {
            Some(free) => free as u32,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.by_name.insert(node.name.clone(), i);
        self.count_images(&node, true);
        if let Err(at) = self.live.binary_search(&i) {
            self.live.insert(at, i);
        }
        self.slots[i as usize] = Some(NodeInfo::new(i, node.clone()));
        self.log
            .push(Change::NodeSet(i, node, MetricValues::default()));
        i
    }

    /// Replaces the live metrics of the node named `name` (sorted by
    /// name), logged as a metrics-only change; the node itself is not
    /// copied. Returns its index; `None` for a node the snapshot does not
    /// have.
    pub fn set_node_metrics(&mut self, name: &str, metrics: Vec<(String, f64)>) -> Option<u32> {
        let i = *self.by_name.get(name)?;
        let info = self.slots[i as usize].as_mut()?;
        let (metrics, same_names) = info.metrics.next(metrics);
        info.metrics = metrics.clone();
        self.log.push(Change::NodeMetrics {
            index: i,
            node: info.node.clone(),
            metrics,
            same_names,
        });
        Some(i)
    }

    /// Removes a node and forgets its pods. Returns its former index.
    pub fn remove_node(&mut self, name: &str) -> Option<u32> {
        let i = self.by_name.remove(name)?;
        self.affinity_nodes.remove(&i);
        if let Ok(at) = self.live.binary_search(&i) {
            self.live.remove(at);
        }
        if let Some(info) = self.slots[i as usize].take() {
            self.count_images(&info.node, false);
            for p in info.pods {
                self.pod_node.remove(&p.uid);
            }
        }
        self.log.push(Change::NodeRemove(i));
        Some(i)
    }

    /// Places a pod on the node at `index`. A pod already placed elsewhere
    /// is moved.
    pub fn add_pod(&mut self, index: u32, pod: Arc<Pod>) -> bool {
        if self.get(index).is_none() {
            return false;
        }
        self.remove_pod(&pod.uid);
        self.pod_node.insert(pod.uid.clone(), index);
        self.log.push(Change::PodAdd(index, pod.clone()));
        if let Some(info) = self.slots[index as usize].as_mut() {
            info.add_pod(pod);
            if !info.pods_with_affinity.is_empty() {
                self.affinity_nodes.insert(index);
            }
        }
        true
    }

    /// Removes a placed pod; returns its node index and the pod.
    pub fn remove_pod(&mut self, uid: &str) -> Option<(u32, Arc<Pod>)> {
        let i = self.pod_node.remove(uid)?;
        let info = self.slots[i as usize].as_mut()?;
        let pod = info.remove_pod(uid)?;
        if info.pods_with_affinity.is_empty() {
            self.affinity_nodes.remove(&i);
        }
        self.log.push(Change::PodRemove(i, uid.to_string()));
        Some((i, pod))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::framework::plugins::testutil::{N, P};

    use super::Snapshot;

    #[test]
    fn affinity_lists_follow_adds_and_removes() {
        let mut snap = Snapshot::default();
        let i = snap.set_node(N::new("n1").build());
        let anti = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}});
        let pref = json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}}]}});
        snap.add_pod(i, Arc::new(P::new("plain").build()));
        snap.add_pod(i, Arc::new(P::new("anti").affinity(anti).build()));
        snap.add_pod(i, Arc::new(P::new("pref").affinity(pref).build()));
        let info = snap.get(i).unwrap();
        let names =
            |v: &Vec<Arc<crate::model::Pod>>| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&info.pods_with_affinity), ["anti", "pref"]);
        assert_eq!(names(&info.pods_with_required_anti_affinity), ["anti"]);
        snap.remove_pod("anti");
        let info = snap.get(i).unwrap();
        assert_eq!(names(&info.pods_with_affinity), ["pref"]);
        assert!(info.pods_with_required_anti_affinity.is_empty());
        assert_eq!(info.pods.len(), 2);
    }

    /// The per-image node counts, kept through node updates and removals,
    /// equal a scan of every node.
    #[test]
    fn image_holders_match_a_scan() {
        let node = |name: &str, images: &[&str]| {
            let mut n = N::new(name).build();
            n.images = images.iter().map(|i| (i.to_string(), 1 << 20)).collect();
            n
        };
        let mut snap = Snapshot::default();
        snap.set_node(node("n0", &["a", "b"]));
        snap.set_node(node("n1", &["a"]));
        snap.set_node(node("n2", &[]));
        assert_eq!(["a", "b", "c"].map(|i| snap.image_holders(i)), [2, 1, 0]);
        // An update replaces the node's images; a removal forgets them.
        snap.set_node(node("n1", &["b", "c"]));
        snap.set_node(node("n2", &["c"]));
        assert_eq!(["a", "b", "c"].map(|i| snap.image_holders(i)), [1, 2, 2]);
        snap.remove_node("n0");
        snap.remove_node("n2");
        assert_eq!(["a", "b", "c"].map(|i| snap.image_holders(i)), [0, 1, 1]);
        let scan = |i: &str| {
            snap.nodes()
                .filter(|n| n.node.images.contains_key(i))
                .count()
        };
        assert_eq!(["a", "b", "c"].map(scan), [0, 1, 1]);
        assert!(snap.image_holders.is_empty() || !snap.image_holders.contains_key("a"));
    }

    /// The set of nodes with affinity pods, kept through adds, moves and
    /// removals, equals a scan of every node.
    #[test]
    fn nodes_with_affinity_pods_match_a_scan() {
        let mut snap = Snapshot::default();
        for n in ["n0", "n1", "n2", "n3"] {
            snap.set_node(N::new(n).build());
        }
        let pref = json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}}]}});
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..600 {
            let name = format!("p{}", next(12));
            match next(8) {
                0 => {
                    snap.remove_pod(&name);
                }
                1 => {
                    let node = format!("n{}", next(4));
                    snap.remove_node(&node);
                    snap.set_node(N::new(&node).build());
                }
                k => {
                    let mut p = P::new(&name);
                    if k % 2 == 0 {
                        p = p.affinity(pref.clone());
                    }
                    snap.add_pod(next(4) as u32, Arc::new(p.build()));
                }
            }
            let kept: Vec<u32> = snap.nodes_with_affinity_pods().map(|n| n.index).collect();
            let scanned: Vec<u32> = snap
                .nodes()
                .filter(|n| !n.pods_with_affinity.is_empty())
                .map(|n| n.index)
                .collect();
            assert_eq!(kept, scanned, "step {step}");
            let live: Vec<u32> = snap.nodes().map(|n| n.index).collect();
            assert_eq!(snap.live_slots(), live, "step {step}");
        }
    }
}
