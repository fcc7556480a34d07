//! What the scheduler writes on a pod: `hami.io/vgpu-devices-allocated`
//! and `-to-allocate` (`pkg/device/devices.go`, `EncodePodSingleDevice`):
//! one slot per container, init containers first, each slot its devices
//! as `UUID,NVIDIA,<memMiB>,<cores>:` and ending in `;`; a container
//! without GPUs has an empty slot (`;;GPU-a,NVIDIA,2000,50:;`).

use std::collections::BTreeMap;

use super::{bad, HamiError, ALLOCATED};

/// Most slots and devices read from one pod's annotation.
pub const MAX_ENTRIES: usize = 1024;

/// One vGPU of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerDevice {
    pub uuid: String,
    /// The vendor (`NVIDIA`).
    pub vendor: String,
    /// Memory in MiB.
    pub mem: u64,
    /// Percent of the device's SMs.
    pub cores: u32,
}

fn decode_device(entry: &str, annotation: &'static str) -> Result<ContainerDevice, HamiError> {
    let f: Vec<&str> = entry.split(',').collect();
    if f.len() < 4 {
        return Err(bad(
            annotation,
            format!("device {entry:?} has {} fields, expected 4", f.len()),
        ));
    }
    if f[0].is_empty() || f[1].is_empty() {
        return Err(bad(
            annotation,
            format!("device {entry:?}: missing UUID or type"),
        ));
    }
    let mem = f[2].parse::<u32>().map_err(|_| {
        bad(
            annotation,
            format!("device {entry:?}: invalid memory {:?}", f[2]),
        )
    })?;
    let cores = f[3].parse::<u32>().map_err(|_| {
        bad(
            annotation,
            format!("device {entry:?}: invalid cores {:?}", f[3]),
        )
    })?;
    Ok(ContainerDevice {
        uuid: f[0].to_string(),
        vendor: f[1].to_string(),
        mem: u64::from(mem),
        cores,
    })
}

/// Decodes a pod device string into its slots, keeping empty ones (the
/// trailing `;` yields a last empty slot, as HAMi's `DecodePodDevices`).
pub fn decode_pod_devices(
    value: &str,
    annotation: &'static str,
) -> Result<Vec<Vec<ContainerDevice>>, HamiError> {
    let mut slots = Vec::new();
    let mut entries = 0usize;
    for slot in value.split(';') {
        let mut devices = Vec::new();
        for entry in slot.split(':').filter(|e| !e.is_empty()) {
            entries += 1;
            if entries > MAX_ENTRIES {
                return Err(bad(annotation, "too many devices"));
            }
            devices.push(decode_device(entry, annotation)?);
        }
        slots.push(devices);
        if slots.len() > MAX_ENTRIES {
            return Err(bad(annotation, "too many containers"));
        }
    }
    Ok(slots)
}

/// Encodes slots (one per container) as HAMi's device plugin reads them.
pub fn encode_pod_devices(slots: &[Vec<ContainerDevice>]) -> String {
    let mut out = String::new();
    for slot in slots {
        for d in slot {
            out.push_str(&format!("{},{},{},{}:", d.uuid, d.vendor, d.mem, d.cores));
        }
        out.push(';');
    }
    out
}

/// What a pod holds on one device: vGPUs, MiB, percent of SMs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceUse {
    pub count: u32,
    pub mem: u64,
    pub cores: u64,
}

impl DeviceUse {
    fn max(self, o: DeviceUse) -> DeviceUse {
        DeviceUse {
            count: self.count.max(o.count),
            mem: self.mem.max(o.mem),
            cores: self.cores.max(o.cores),
        }
    }

    fn add(&mut self, o: DeviceUse) {
        self.count = self.count.saturating_add(o.count);
        self.mem = self.mem.saturating_add(o.mem);
        self.cores = self.cores.saturating_add(o.cores);
    }
}

/// What a pod holds on each device, from its `hami.io/vgpu-devices-allocated`
/// and its number of init containers: per device, the larger of the app
/// containers' sum and the largest single init container, in each
/// dimension (init containers run one at a time, before the app
/// containers; HAMi's `CollapseInitContainerUsage`). Sorted by UUID.
pub fn pod_usage(allocated: &str, num_init: usize) -> Result<Vec<(String, DeviceUse)>, HamiError> {
    let slots = decode_pod_devices(allocated, ALLOCATED)?;
    let mut app: BTreeMap<&str, DeviceUse> = BTreeMap::new();
    let mut init: BTreeMap<&str, DeviceUse> = BTreeMap::new();
    for (i, slot) in slots.iter().enumerate() {
        let mut one: BTreeMap<&str, DeviceUse> = BTreeMap::new();
        for d in slot {
            one.entry(&d.uuid).or_default().add(DeviceUse {
                count: 1,
                mem: d.mem,
                cores: u64::from(d.cores),
            });
        }
        for (uuid, u) in one {
            if i < num_init {
                let e = init.entry(uuid).or_default();
                *e = e.max(u);
            } else {
                app.entry(uuid).or_default().add(u);
            }
        }
    }
    for (uuid, u) in init {
        let e = app.entry(uuid).or_default();
        *e = e.max(u);
    }
    Ok(app.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
