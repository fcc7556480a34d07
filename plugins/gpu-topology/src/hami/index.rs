//! Per-device usage of HAMi nodes, kept from the cluster changes the host
//! streams (`observe`), so Filter and Score read a node's devices without
//! decoding its pods' annotations every cycle. Rebuilt exactly from the
//! pods' `hami.io/vgpu-devices-allocated` whenever an instance starts.

use std::collections::{HashMap, HashSet};

use wasmsched_plugin_sdk::types::{Delta, Node, Pod};
use wasmsched_plugin_sdk::{NodeExt, PodExt};
use wasmsched_shared::hami::request::CONTAINER_RESOURCES;
use wasmsched_shared::hami::{
    parse_cordon, parse_pair_scores, parse_register, pod_usage, DeviceUse, NodeUsage, PairScores,
    ALLOCATED, CORDON_ANNOTATION, REGISTER_ANNOTATION, SCORE_ANNOTATION,
};

/// A HAMi node as the plugin sees it.
#[derive(Debug, Clone)]
pub struct HamiNode {
    /// Devices and usage; `Err`: the register annotation is invalid.
    pub usage: Result<NodeUsage, String>,
    pub pairs: PairScores,
    /// Each device's link centrality (`fit::centralities`).
    pub central: Vec<i64>,
    /// Placed pods whose device annotation is invalid: their usage is
    /// unknown, so no new vGPU goes to the node.
    pub bad_pods: usize,
    /// What DCGM says of each device now (node metrics `METRIC/UUID`),
    /// in the node's device order.
    pub live: Vec<DeviceLive>,
    /// The annotations the entry was built from.
    register: String,
    score: Option<String>,
    cordon: Option<String>,
}

/// One device's live metrics, from the host's node metrics named
/// `METRIC/UUID` (the node-metrics source's per-device values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceLive {
    /// GPU utilization in percent (0..=100), when known.
    pub util: Option<u32>,
    /// Free framebuffer memory in MiB, when known.
    pub fb_free_mib: Option<u64>,
}

/// The node metrics a device's live values are read from.
#[derive(Debug, Clone, Copy)]
pub struct LiveMetrics<'a> {
    /// Percent (`DCGM_FI_DEV_GPU_UTIL`).
    pub utilization: &'a str,
    /// MiB (`DCGM_FI_DEV_FB_FREE`).
    pub free_memory: &'a str,
}

impl LiveMetrics<'_> {
    /// Each device's values on `node`.
    fn read(&self, node: &Node, usage: &Result<NodeUsage, String>) -> Vec<DeviceLive> {
        let Ok(u) = usage else { return Vec::new() };
        if node.metrics.is_empty() {
            return vec![DeviceLive::default(); u.devices.len()];
        }
        let value = |metric: &str, id: &str| {
            node.metric(&format!("{metric}/{id}"))
                .filter(|v| v.is_finite() && *v >= 0.0)
        };
        u.devices
            .iter()
            .map(|d| DeviceLive {
                util: value(self.utilization, &d.device.id).map(|v| v.min(100.0).round() as u32),
                fb_free_mib: value(self.free_memory, &d.device.id).map(|v| v.round() as u64),
            })
            .collect()
    }
}

/// What one placed pod holds.
#[derive(Debug, Clone)]
struct PodUse {
    node: u32,
    /// `None`: the annotation is invalid.
    uses: Option<Vec<(String, DeviceUse)>>,
}

/// The index: HAMi nodes by node index, placed pods with a device
/// annotation by uid.
#[derive(Debug, Default)]
pub struct Index {
    nodes: HashMap<u32, HamiNode>,
    pods: HashMap<String, PodUse>,
    on_node: HashMap<u32, HashSet<String>>,
}

/// The number of init containers, from the host's per-container
/// annotation (0 without it).
fn num_init(pod: &Pod) -> usize {
    pod.annotation(CONTAINER_RESOURCES)
        .map(|v| v.split(';').filter(|c| c.starts_with("init:")).count())
        .unwrap_or(0)
}

impl Index {
    pub fn node(&self, index: u32) -> Option<&HamiNode> {
        self.nodes.get(&index)
    }

    /// Applies one change (before the SDK's cluster applies it).
    pub fn observe(&mut self, delta: &Delta, live: LiveMetrics<'_>) {
        match delta {
            Delta::NodeSet((index, node)) => self.node_set(*index, node, live),
            Delta::NodeRemove(index) => {
                self.nodes.remove(index);
                for uid in self.on_node.remove(index).unwrap_or_default() {
                    self.pods.remove(&uid);
                }
            }
            Delta::PodAdd(p) => {
                self.pod_remove(&p.pod.uid);
                self.pod_add(p.node, &p.pod);
            }
            Delta::PodRemove(r) => self.pod_remove(&r.pod_uid),
        }
    }

    /// The node's metrics changed and nothing else: its devices' live
    /// values are read again.
    pub fn metrics_changed(&mut self, index: u32, node: &Node, live: LiveMetrics<'_>) {
        if let Some(n) = self.nodes.get_mut(&index) {
            n.live = live.read(node, &n.usage);
        }
    }

    fn node_set(&mut self, index: u32, node: &Node, live: LiveMetrics<'_>) {
        let Some(register) = node.annotation(REGISTER_ANNOTATION) else {
            self.nodes.remove(&index);
            return;
        };
        let score = node.annotation(SCORE_ANNOTATION).map(str::to_string);
        let cordon = node.annotation(CORDON_ANNOTATION).map(str::to_string);
        if let Some(n) = self.nodes.get_mut(&index) {
            if n.register == register && n.score == score && n.cordon == cordon {
                // Only the metrics changed (every pass of the host's
                // node-metrics source).
                n.live = live.read(node, &n.usage);
                return;
            }
        }
        let cordoned = cordon.as_deref().map(parse_cordon).unwrap_or_default();
        let usage = parse_register(register)
            .map(|d| NodeUsage::new(d, &cordoned))
            .map_err(|e| e.to_string());
        let pairs = score
            .as_deref()
            .and_then(|s| parse_pair_scores(s).ok())
            .unwrap_or_default();
        let central = usage
            .as_ref()
            .map(|u| super::fit::centralities(u, &pairs))
            .unwrap_or_default();
        let mut entry = HamiNode {
            live: live.read(node, &usage),
            usage,
            pairs,
            central,
            bad_pods: 0,
            register: register.to_string(),
            score,
            cordon,
        };
        for uid in self.on_node.get(&index).into_iter().flatten() {
            match self.pods.get(uid).and_then(|p| p.uses.as_ref()) {
                Some(uses) => {
                    if let Ok(u) = &mut entry.usage {
                        u.apply(uses, true);
                    }
                }
                None => entry.bad_pods += 1,
            }
        }
        self.nodes.insert(index, entry);
    }

    fn pod_add(&mut self, node: u32, pod: &Pod) {
        let Some(allocated) = pod.annotation(ALLOCATED) else {
            return;
        };
        let uses = pod_usage(allocated, num_init(pod)).ok();
        if let Some(n) = self.nodes.get_mut(&node) {
            match &uses {
                Some(u) => {
                    if let Ok(usage) = &mut n.usage {
                        usage.apply(u, true);
                    }
                }
                None => n.bad_pods += 1,
            }
        }
        self.on_node
            .entry(node)
            .or_default()
            .insert(pod.uid.clone());
        self.pods.insert(pod.uid.clone(), PodUse { node, uses });
    }

    fn pod_remove(&mut self, uid: &str) {
        let Some(old) = self.pods.remove(uid) else {
            return;
        };
        if let Some(set) = self.on_node.get_mut(&old.node) {
            set.remove(uid);
        }
        if let Some(n) = self.nodes.get_mut(&old.node) {
            match &old.uses {
                Some(u) => {
                    if let Ok(usage) = &mut n.usage {
                        usage.apply(u, false);
                    }
                }
                None => n.bad_pods = n.bad_pods.saturating_sub(1),
            }
        }
    }
}
