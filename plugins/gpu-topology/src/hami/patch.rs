//! The device choice as the pod annotations HAMi's device plugin reads.

use wasmsched_plugin_sdk::types::PodPatch;
use wasmsched_shared::hami::{
    encode_pod_devices, ContainerDevice, NodeUsage, ALLOCATED, ASSIGNED_NODE, TO_ALLOCATE, VENDOR,
};

use super::fit::Choice;

/// A Kubernetes label value: at most 63 characters of `[A-Za-z0-9._-]`,
/// starting and ending with a letter or digit (HAMi omits the label
/// otherwise).
pub fn valid_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    v.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        && b.first().is_none_or(u8::is_ascii_alphanumeric)
        && b.last().is_none_or(u8::is_ascii_alphanumeric)
}

/// The device string of a choice: one slot per container.
pub fn device_string(node: &NodeUsage, c: &Choice) -> String {
    let slots: Vec<Vec<ContainerDevice>> = c
        .slots
        .iter()
        .map(|slot| {
            slot.iter()
                .map(|p| ContainerDevice {
                    uuid: node.devices[p.device].device.id.clone(),
                    vendor: VENDOR.to_string(),
                    mem: p.mem,
                    cores: p.cores,
                })
                .collect()
        })
        .collect();
    encode_pod_devices(&slots)
}

/// `hami.io/vgpu-devices-to-allocate` and `-allocated` (the same value),
/// `hami.io/vgpu-node` (annotation and label). The host adds the node
/// lock, `vgpu-time`, `bind-phase` and `bind-time` when it binds.
pub fn patch(node_name: &str, node: &NodeUsage, c: &Choice) -> PodPatch {
    let devices = device_string(node, c);
    let mut annotations = vec![
        (ALLOCATED.to_string(), devices.clone()),
        (TO_ALLOCATE.to_string(), devices),
        (ASSIGNED_NODE.to_string(), node_name.to_string()),
    ];
    annotations.sort();
    let labels = if valid_label_value(node_name) {
        vec![(ASSIGNED_NODE.to_string(), node_name.to_string())]
    } else {
        Vec::new()
    };
    PodPatch {
        labels,
        annotations,
    }
}
