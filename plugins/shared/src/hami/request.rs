//! What a container asks of HAMi's GPUs (`pkg/device/nvidia/device.go`,
//! `GenerateResourceRequests`, and the webhook's exclusive-core default),
//! read from the per-container annotation the host adds to the pod record
//! it gives plugins.
//!
//! A plugin sees a pod's *effective* requests (summed over containers),
//! but HAMi places each container's vGPUs apart and writes one slot per
//! container. So the host adds `wasmsched.io/container-resources` to the
//! pod record of a pod whose containers ask for extended resources:
//! containers in HAMi's order (init containers first), separated by `;`,
//! each `init:` or `app:` and its extended resources as `name=amount`
//! separated by `,` (`init:;app:nvidia.com/gpu=1,nvidia.com/gpumem=3000`).
//! The annotation is never written to the API server.

use super::{
    bad, HamiError, RESOURCE_CORES, RESOURCE_COUNT, RESOURCE_MEMORY, RESOURCE_MEMORY_PERCENTAGE,
};

/// The host-provided per-container annotation (see the module docs).
pub const CONTAINER_RESOURCES: &str = "wasmsched.io/container-resources";

/// Most containers read from the annotation.
pub const MAX_CONTAINERS: usize = 256;

/// One container's extended resources.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerResources {
    pub init: bool,
    /// Extended resource name and amount (requests after defaulting from
    /// limits, rounded up as the scheduler counts them).
    pub resources: Vec<(String, i64)>,
}

impl ContainerResources {
    pub fn get(&self, name: &str) -> Option<i64> {
        self.resources
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

/// Writes the annotation (the host).
pub fn encode_container_resources(containers: &[ContainerResources]) -> String {
    containers
        .iter()
        .map(|c| {
            let res: Vec<String> = c
                .resources
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            format!("{}:{}", if c.init { "init" } else { "app" }, res.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn container(entry: &str) -> Result<ContainerResources, HamiError> {
    let err = |cause: String| bad(CONTAINER_RESOURCES, cause);
    let (kind, list) = entry
        .split_once(':')
        .ok_or_else(|| err(format!("container {entry:?} has no kind")))?;
    let init = match kind {
        "init" => true,
        "app" => false,
        other => return Err(err(format!("unknown container kind {other:?}"))),
    };
    let mut resources = Vec::new();
    for item in list.split(',').filter(|s| !s.is_empty()) {
        let (name, amount) = item
            .split_once('=')
            .ok_or_else(|| err(format!("resource {item:?} has no amount")))?;
        let amount = amount
            .parse::<i64>()
            .map_err(|_| err(format!("resource {name}: invalid amount {amount:?}")))?;
        resources.push((name.to_string(), amount));
    }
    Ok(ContainerResources { init, resources })
}

/// Reads the annotation.
pub fn decode_container_resources(value: &str) -> Result<Vec<ContainerResources>, HamiError> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let entries: Vec<&str> = value.split(';').collect();
    if entries.len() > MAX_CONTAINERS {
        return Err(bad(CONTAINER_RESOURCES, "too many containers"));
    }
    entries.into_iter().map(container).collect()
}

/// HAMi's defaults for what a container leaves out (its scheduler
/// configuration and its admission webhook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// `defaultMemory` (MiB) for a container that gives neither memory nor
    /// a percentage; 0: the whole device (100%).
    pub default_memory: u64,
    /// `defaultCores` for a container that gives no `gpucores`.
    pub default_cores: u32,
    /// The webhook's default since v2.7: a container asking only for
    /// `nvidia.com/gpu` (or for 100% of memory) gets `gpucores: 100`, an
    /// exclusive GPU.
    pub exclusive_by_default: bool,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            default_memory: 0,
            default_cores: 0,
            exclusive_by_default: true,
        }
    }
}

/// What one container asks for, per vGPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// vGPUs, each on a different physical GPU.
    pub nums: u32,
    /// MiB per vGPU; 0 when given as a percentage.
    pub mem: u64,
    /// Percent of the device's memory; 101 when not given.
    pub mem_pct: u32,
    /// Percent of the device's SMs; 100 is an exclusive GPU.
    pub cores: u32,
}

/// "No percentage given", as HAMi encodes it.
pub const NO_PERCENTAGE: u32 = 101;

fn clamp_u32(v: i64) -> u32 {
    v.clamp(0, i64::from(u32::MAX)) as u32
}

impl Request {
    /// The request of a container with these resources, or `None` when it
    /// asks for no vGPU.
    pub fn from_container(c: &ContainerResources, d: &Defaults) -> Option<Request> {
        let nums = clamp_u32(c.get(RESOURCE_COUNT)?);
        if nums == 0 {
            return None;
        }
        let given_mem = c.get(RESOURCE_MEMORY);
        let given_pct = c.get(RESOURCE_MEMORY_PERCENTAGE);
        let mut mem = given_mem.map_or(0, |m| m.max(0) as u64);
        let mut mem_pct = given_pct.map_or(NO_PERCENTAGE, clamp_u32);
        if mem_pct == NO_PERCENTAGE && mem == 0 {
            if d.default_memory != 0 {
                mem = d.default_memory;
            } else {
                mem_pct = 100;
            }
        }
        let exclusive = match given_pct {
            Some(p) => p == 100,
            None => given_mem.is_none(),
        };
        let cores = match c.get(RESOURCE_CORES) {
            Some(v) => clamp_u32(v),
            None if d.exclusive_by_default && exclusive => 100,
            None => d.default_cores,
        };
        Some(Request {
            nums,
            mem,
            mem_pct,
            cores,
        })
    }

    /// MiB per vGPU on a device with `devmem` MiB.
    pub fn memory_on(&self, devmem: u64) -> u64 {
        if self.mem > 0 {
            self.mem
        } else if self.mem_pct != NO_PERCENTAGE {
            devmem * u64::from(self.mem_pct) / 100
        } else {
            0
        }
    }

    /// Cores as HAMi writes them (capped at 100).
    pub fn cores_capped(&self) -> u32 {
        self.cores.min(100)
    }
}
