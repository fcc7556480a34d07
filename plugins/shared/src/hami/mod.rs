//! HAMi's scheduler <-> device-plugin protocol: what a node advertises
//! about its GPUs, what a pod asks for, and what the scheduler writes on
//! the pod for HAMi's device plugin (Project-HAMi/HAMi, `pkg/device`,
//! `pkg/device/nvidia`, `pkg/util/nodelock`). Used by the GpuTopology
//! plugin (fit, scoring, the device choice) and by the host (the node
//! lock, metrics, `simulate`'s report).
//!
//! - [`node`]: the `hami.io/node-nvidia-register` annotation (the JSON form
//!   of HAMi 2.8+ and the older `uuid,count,mem,cores,type,numa,health[,index,mode]:`
//!   form), `hami.io/node-nvidia-score` (GPU pair link scores) and
//!   `hami.io/device-cordon`;
//! - [`pod`]: `hami.io/vgpu-devices-allocated` / `-to-allocate`, one slot
//!   per container (init containers first), and the usage a pod holds on
//!   each device (init containers counted as HAMi does: the larger of the
//!   app containers' sum and the largest init container);
//! - [`request`]: a container's `nvidia.com/gpu`, `gpumem`,
//!   `gpumem-percentage` and `gpucores` with HAMi's defaults, and the
//!   host-provided per-container annotation they are read from;
//! - [`usage`]: a node's devices with what the pods on it hold.

pub mod node;
pub mod pod;
pub mod request;
pub mod usage;

#[cfg(test)]
mod tests;

pub use node::{parse_cordon, parse_pair_scores, parse_register, Device, PairScores};
pub use pod::{decode_pod_devices, encode_pod_devices, pod_usage, ContainerDevice, DeviceUse};
pub use request::{
    decode_container_resources, encode_container_resources, ContainerResources, Defaults, Request,
};
pub use usage::{DeviceState, NodeUsage};

/// Node annotation: the devices HAMi's device plugin registered.
pub const REGISTER_ANNOTATION: &str = "hami.io/node-nvidia-register";
/// Node annotation: link scores between GPU pairs (JSON).
pub const SCORE_ANNOTATION: &str = "hami.io/node-nvidia-score";
/// Node annotation: device UUIDs new pods must not get (comma list).
pub const CORDON_ANNOTATION: &str = "hami.io/device-cordon";
/// Node annotation: HAMi's node lock, `<RFC3339>,<namespace>,<pod>`.
pub const LOCK_ANNOTATION: &str = "hami.io/mutex.lock";

/// Pod annotations the scheduler writes.
pub const ASSIGNED_NODE: &str = "hami.io/vgpu-node";
pub const ASSIGNED_TIME: &str = "hami.io/vgpu-time";
pub const TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";
pub const ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
pub const BIND_PHASE: &str = "hami.io/bind-phase";
pub const BIND_TIME: &str = "hami.io/bind-time";
pub const BIND_PHASE_ALLOCATING: &str = "allocating";
pub const BIND_PHASE_SUCCESS: &str = "success";
pub const BIND_PHASE_FAILED: &str = "failed";

/// Pod annotations users set to steer the device choice.
pub const USE_GPUTYPE: &str = "nvidia.com/use-gputype";
pub const NOUSE_GPUTYPE: &str = "nvidia.com/nouse-gputype";
pub const USE_GPUUUID: &str = "nvidia.com/use-gpuuuid";
pub const NOUSE_GPUUUID: &str = "nvidia.com/nouse-gpuuuid";
pub const NUMA_BIND: &str = "nvidia.com/numa-bind";
pub const VGPU_MODE: &str = "nvidia.com/vgpu-mode";
pub const NODE_POLICY: &str = "hami.io/node-scheduler-policy";
pub const GPU_POLICY: &str = "hami.io/gpu-scheduler-policy";

/// Extended resources a container asks for.
pub const RESOURCE_COUNT: &str = "nvidia.com/gpu";
pub const RESOURCE_MEMORY: &str = "nvidia.com/gpumem";
pub const RESOURCE_MEMORY_PERCENTAGE: &str = "nvidia.com/gpumem-percentage";
pub const RESOURCE_CORES: &str = "nvidia.com/gpucores";
/// HAMi resources nodes do not advertise: resource fit must ignore them
/// (NodeResourcesFit `ignoredResources`), as HAMi's `ignoredByScheduler`.
pub const UNADVERTISED_RESOURCES: [&str; 4] = [
    RESOURCE_MEMORY,
    RESOURCE_MEMORY_PERCENTAGE,
    RESOURCE_CORES,
    "nvidia.com/priority",
];

/// The device vendor HAMi writes in a pod's device string.
pub const VENDOR: &str = "NVIDIA";

/// Why a HAMi annotation could not be read. Messages name the annotation
/// and the cause, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HamiError {
    #[error("annotation {annotation}: {cause}")]
    Annotation {
        annotation: &'static str,
        cause: String,
    },
}

pub(crate) fn bad(annotation: &'static str, cause: impl Into<String>) -> HamiError {
    HamiError::Annotation {
        annotation,
        cause: cause.into(),
    }
}
