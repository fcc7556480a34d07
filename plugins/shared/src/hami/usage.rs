//! A node's devices with what the pods on it hold.

use std::collections::HashSet;

use super::node::{parse_cordon, parse_register, Device};
use super::pod::DeviceUse;
use super::HamiError;

/// One device and its usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceState {
    pub device: Device,
    /// vGPUs placed on it.
    pub used: u32,
    /// MiB held.
    pub mem: u64,
    /// Percent of SMs held.
    pub cores: u64,
    /// Listed in `hami.io/device-cordon`: no new vGPU goes there.
    pub cordoned: bool,
}

impl DeviceState {
    pub fn free_mem(&self) -> u64 {
        self.device.devmem.saturating_sub(self.mem)
    }

    pub fn free_cores(&self) -> u64 {
        u64::from(self.device.devcore).saturating_sub(self.cores)
    }

    /// No vGPU on it.
    pub fn untouched(&self) -> bool {
        self.used == 0 && self.mem == 0 && self.cores == 0
    }
}

/// A node's devices, in the order the node registered them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    pub devices: Vec<DeviceState>,
}

impl NodeUsage {
    pub fn new(devices: Vec<Device>, cordoned: &HashSet<String>) -> Self {
        NodeUsage {
            devices: devices
                .into_iter()
                .map(|device| DeviceState {
                    cordoned: cordoned.contains(&device.id),
                    device,
                    used: 0,
                    mem: 0,
                    cores: 0,
                })
                .collect(),
        }
    }

    /// From the node's register and cordon annotations.
    pub fn from_annotations(register: &str, cordon: Option<&str>) -> Result<Self, HamiError> {
        let devices = parse_register(register)?;
        let cordoned = cordon.map(parse_cordon).unwrap_or_default();
        Ok(Self::new(devices, &cordoned))
    }

    pub fn position(&self, uuid: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.device.id == uuid)
    }

    /// Adds (`sign` true) or removes a pod's usage; devices the node does
    /// not have are skipped.
    pub fn apply(&mut self, uses: &[(String, DeviceUse)], add: bool) {
        for (uuid, u) in uses {
            let Some(i) = self.position(uuid) else {
                continue;
            };
            let d = &mut self.devices[i];
            if add {
                d.used = d.used.saturating_add(u.count);
                d.mem = d.mem.saturating_add(u.mem);
                d.cores = d.cores.saturating_add(u.cores);
            } else {
                d.used = d.used.saturating_sub(u.count);
                d.mem = d.mem.saturating_sub(u.mem);
                d.cores = d.cores.saturating_sub(u.cores);
            }
        }
    }

    /// Devices without any vGPU.
    pub fn untouched(&self) -> usize {
        self.devices.iter().filter(|d| d.untouched()).count()
    }
}
