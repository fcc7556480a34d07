//! What a pod asks of HAMi's GPUs, read once per cycle.

use wasmsched_plugin_sdk::types::Pod;
use wasmsched_plugin_sdk::PodExt;
use wasmsched_shared::hami::request::CONTAINER_RESOURCES;
use wasmsched_shared::hami::{
    decode_container_resources, ContainerResources, Request, GPU_POLICY, NODE_POLICY,
    NOUSE_GPUTYPE, NOUSE_GPUUUID, NUMA_BIND, RESOURCE_CORES, RESOURCE_COUNT, RESOURCE_MEMORY,
    RESOURCE_MEMORY_PERCENTAGE, USE_GPUTYPE, USE_GPUUUID, VGPU_MODE,
};

use super::config::{GpuPolicy, HamiConfig, NodePolicy};

/// A pod's vGPU requests and the annotations that steer them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HamiDemand {
    /// One entry per container, init containers first (HAMi's slot order);
    /// `None` for a container without vGPUs.
    pub containers: Vec<Option<Request>>,
    pub num_init: usize,
    pub node_policy: NodePolicy,
    pub gpu_policy: GpuPolicy,
    /// Upper-cased `use-gputype` / `nouse-gputype` entries.
    pub use_types: Vec<String>,
    pub nouse_types: Vec<String>,
    pub use_uuids: Vec<String>,
    pub nouse_uuids: Vec<String>,
    /// `nvidia.com/numa-bind: "true"`: a container's vGPUs on one NUMA node.
    pub numa_bind: bool,
    /// `nvidia.com/vgpu-mode`: the device's mode must be part of it.
    pub mode: Option<String>,
    /// The pod asks for HAMi-only resources (memory, percentage, cores):
    /// nodes without HAMi's devices cannot run it.
    pub hami_only: bool,
}

impl HamiDemand {
    /// vGPUs over all containers.
    pub fn vgpus(&self) -> u32 {
        self.containers.iter().flatten().map(|r| r.nums).sum()
    }

    /// The largest vGPU count of one container (the GPUs a node needs).
    pub fn widest(&self) -> u32 {
        self.containers
            .iter()
            .flatten()
            .map(|r| r.nums)
            .max()
            .unwrap_or(0)
    }
}

fn list(pod: &Pod, key: &str, upper: bool) -> Vec<String> {
    pod.annotation(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    if upper {
                        s.to_ascii_uppercase()
                    } else {
                        s.to_string()
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The containers from the host's per-container annotation; without it,
/// one app container with the pod's effective requests.
fn containers(pod: &Pod) -> Result<Vec<ContainerResources>, String> {
    if let Some(v) = pod.annotation(CONTAINER_RESOURCES) {
        return decode_container_resources(v).map_err(|e| e.to_string());
    }
    let resources = [
        RESOURCE_COUNT,
        RESOURCE_MEMORY,
        RESOURCE_MEMORY_PERCENTAGE,
        RESOURCE_CORES,
    ]
    .iter()
    .filter_map(|r| {
        let v = pod.request(r).max(pod.limit(r));
        let given = pod.requests.iter().chain(&pod.limits).any(|a| a.name == *r);
        given.then(|| (r.to_string(), v))
    })
    .collect();
    Ok(vec![ContainerResources {
        init: false,
        resources,
    }])
}

/// The pod's HAMi demand, or `None` when no container asks for a vGPU. A
/// malformed annotation is an error naming it.
pub fn demand(pod: &Pod, cfg: &HamiConfig) -> Result<Option<HamiDemand>, String> {
    if pod.request(RESOURCE_COUNT).max(pod.limit(RESOURCE_COUNT)) <= 0 {
        return Ok(None);
    }
    let cs = containers(pod)?;
    let reqs: Vec<Option<Request>> = cs
        .iter()
        .map(|c| Request::from_container(c, &cfg.defaults))
        .collect();
    if reqs.iter().all(Option::is_none) {
        return Ok(None);
    }
    let hami_only = cs.iter().any(|c| {
        [RESOURCE_MEMORY, RESOURCE_MEMORY_PERCENTAGE, RESOURCE_CORES]
            .iter()
            .any(|r| c.get(r).is_some())
    });
    let node_policy = match pod.annotation(NODE_POLICY) {
        None => cfg.node_policy,
        Some(v) => NodePolicy::parse(v).ok_or_else(|| {
            format!("invalid annotation {NODE_POLICY}={v:?}: expected binpack or spread")
        })?,
    };
    let gpu_policy = pod
        .annotation(GPU_POLICY)
        .and_then(GpuPolicy::parse)
        .unwrap_or(cfg.gpu_policy);
    let numa_bind = matches!(
        pod.annotation(NUMA_BIND),
        Some("1" | "t" | "T" | "TRUE" | "true" | "True")
    );
    Ok(Some(HamiDemand {
        num_init: cs.iter().filter(|c| c.init).count(),
        containers: reqs,
        node_policy,
        gpu_policy,
        use_types: list(pod, USE_GPUTYPE, true),
        nouse_types: list(pod, NOUSE_GPUTYPE, true),
        use_uuids: list(pod, USE_GPUUUID, false),
        nouse_uuids: list(pod, NOUSE_GPUUUID, false),
        numa_bind,
        mode: pod.annotation(VGPU_MODE).map(str::to_string),
        hami_only,
    }))
}

/// Pod annotation keys the demand reads.
pub const POD_KEYS: [&str; 10] = [
    CONTAINER_RESOURCES,
    NODE_POLICY,
    GPU_POLICY,
    USE_GPUTYPE,
    NOUSE_GPUTYPE,
    USE_GPUUUID,
    NOUSE_GPUUUID,
    NUMA_BIND,
    VGPU_MODE,
    wasmsched_shared::hami::ALLOCATED,
];
