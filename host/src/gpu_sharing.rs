//! Fractional GPUs with HAMi's device plugin, as the host reports them:
//! the GPUs each pod got (from its `hami.io/vgpu-devices-allocated`) and
//! what is left on each device of a HAMi node (`simulate`, `--explain`,
//! metrics, `bench`). The scheduling itself is GpuTopology's
//! (`plugins/gpu-topology/src/hami`); both read HAMi's annotations with
//! the same codec (`wasmsched_shared::hami`).

use serde::Serialize;
use wasmsched_shared::hami::request::decode_container_resources;
use wasmsched_shared::hami::{
    decode_pod_devices, pod_usage, NodeUsage, ALLOCATED, CORDON_ANNOTATION, REGISTER_ANNOTATION,
};

use crate::framework::{NodeInfo, Snapshot};
use crate::model::Pod;

/// One vGPU a pod got.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GpuShare {
    /// The container's position (init containers first, as HAMi counts).
    pub container: usize,
    pub uuid: String,
    pub memory_mib: u64,
    /// Percent of the GPU's SMs (100: exclusive).
    pub cores: u32,
}

/// The vGPUs a pod got (empty for a pod without a readable
/// `hami.io/vgpu-devices-allocated`).
pub fn pod_gpus(pod: &Pod) -> Vec<GpuShare> {
    let Some(v) = pod.annotations.get(ALLOCATED) else {
        return Vec::new();
    };
    let Ok(slots) = decode_pod_devices(v, ALLOCATED) else {
        return Vec::new();
    };
    slots
        .iter()
        .enumerate()
        .flat_map(|(i, slot)| {
            slot.iter().map(move |d| GpuShare {
                container: i,
                uuid: d.uuid.clone(),
                memory_mib: d.mem,
                cores: d.cores,
            })
        })
        .collect()
}

/// One device of a HAMi node and what is left on it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DeviceReport {
    pub node: String,
    pub uuid: String,
    pub index: u32,
    pub model: String,
    pub memory_mib: u64,
    pub memory_free_mib: u64,
    /// Percent of SMs (100 x core scaling).
    pub cores: u32,
    pub cores_free: u64,
    /// vGPUs placed and the most it takes.
    pub vgpus: u32,
    pub vgpus_max: u32,
    pub healthy: bool,
    pub cordoned: bool,
}

impl DeviceReport {
    /// No vGPU on it.
    pub fn untouched(&self) -> bool {
        self.vgpus == 0
            && self.memory_free_mib == self.memory_mib
            && self.cores_free == u64::from(self.cores)
    }
}

/// The number of init containers of a pod (HAMi counts their usage apart).
pub fn num_init(pod: &Pod) -> usize {
    pod.container_resources
        .as_deref()
        .and_then(|v| decode_container_resources(v).ok())
        .map(|cs| cs.iter().filter(|c| c.init).count())
        .unwrap_or(0)
}

/// A HAMi node's devices with the usage of the pods placed on it; `None`
/// for a node without (readable) HAMi devices. Pods with an unreadable
/// device string are skipped.
pub fn node_usage(n: &NodeInfo) -> Option<NodeUsage> {
    let reg = n.node.annotations.get(REGISTER_ANNOTATION)?;
    let cordon = n
        .node
        .annotations
        .get(CORDON_ANNOTATION)
        .map(String::as_str);
    let mut usage = NodeUsage::from_annotations(reg, cordon).ok()?;
    for p in &n.pods {
        if let Some(v) = p.annotations.get(ALLOCATED) {
            if let Ok(u) = pod_usage(v, num_init(p)) {
                usage.apply(&u, true);
            }
        }
    }
    Some(usage)
}

/// The devices of one node.
pub fn node_devices(n: &NodeInfo) -> Vec<DeviceReport> {
    let Some(usage) = node_usage(n) else {
        return Vec::new();
    };
    usage
        .devices
        .iter()
        .map(|d| DeviceReport {
            node: n.node.name.clone(),
            uuid: d.device.id.clone(),
            index: d.device.index,
            model: d.device.kind.clone(),
            memory_mib: d.device.devmem,
            memory_free_mib: d.free_mem(),
            cores: d.device.devcore,
            cores_free: d.free_cores(),
            vgpus: d.used,
            vgpus_max: d.device.count,
            healthy: d.device.health,
            cordoned: d.cordoned,
        })
        .collect()
}

/// Every device of every HAMi node, by node name.
pub fn devices(snapshot: &Snapshot) -> Vec<DeviceReport> {
    let mut nodes: Vec<&NodeInfo> = snapshot.nodes().collect();
    nodes.sort_by(|a, b| a.node.name.cmp(&b.node.name));
    nodes.into_iter().flat_map(node_devices).collect()
}

/// GPUs of HAMi nodes: (untouched, all), and nodes whose GPUs are all
/// untouched: (whole nodes, HAMi nodes).
pub fn whole(snapshot: &Snapshot) -> ((usize, usize), (usize, usize)) {
    let (mut gpus, mut all, mut nodes, mut hami) = (0, 0, 0, 0);
    for n in snapshot.nodes() {
        let Some(u) = node_usage(n) else { continue };
        hami += 1;
        all += u.devices.len();
        let w = u.untouched();
        gpus += w;
        if w == u.devices.len() {
            nodes += 1;
        }
    }
    ((gpus, all), (nodes, hami))
}
