//! Device ranking for Dynamic Resource Allocation (contract 0.3
//! `device-rank`): the sets of devices DynamicResources' allocator found
//! for a pod's ResourceClaims on a node, ranked 0..=100 (formula in
//! docs/gpu-topology.md, "Device ranking"):
//!
//! - **locality** (sets of two or more devices): the share of device
//!   pairs of the set in one group, by the first group attribute
//!   (`draGroupAttributes`: an NVLink domain, a PCIe root, ...) that every
//!   device of the set carries; 0 when none does;
//! - **packing** by the policy, over the groups the set touches: with
//!   `binpack` the share of those groups' other devices already allocated
//!   (fill used groups, keep whole ones free); with `spread` its
//!   complement; with `origin` 50. A set whose devices carry no group
//!   attribute packs at 50;
//! - rank = `(2 * locality + packing) / 3` for several devices, `packing`
//!   for one.

use wasmsched_plugin_sdk::types::{Device, DeviceSet};

use crate::args::{Config, Policy};

/// The standard PCIe root attribute (Kubernetes 1.34+), shared by GPUs
/// and NICs on one root.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

/// `<domain>/<name>` with both parts non-empty.
pub fn qualified(name: &str) -> bool {
    matches!(name.split_once('/'), Some((d, n)) if !d.is_empty() && !n.is_empty() && !n.contains('/'))
}

fn attr<'a>(d: &'a Device, name: &str) -> Option<&'a str> {
    d.attributes
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The devices grouped by one attribute: each device's group, and each
/// group's size and allocated devices.
struct Grouping {
    of: Vec<Option<u32>>,
    size: Vec<i64>,
    used: Vec<i64>,
}

impl Grouping {
    fn new(devices: &[Device], name: &str) -> Self {
        let mut values: Vec<&str> = Vec::new();
        let mut g = Grouping {
            of: Vec::with_capacity(devices.len()),
            size: Vec::new(),
            used: Vec::new(),
        };
        for d in devices {
            let Some(v) = attr(d, name) else {
                g.of.push(None);
                continue;
            };
            let i = match values.iter().position(|x| *x == v) {
                Some(i) => i,
                None => {
                    values.push(v);
                    g.size.push(0);
                    g.used.push(0);
                    values.len() - 1
                }
            };
            g.size[i] += 1;
            if d.allocated {
                g.used[i] += 1;
            }
            g.of.push(Some(i as u32));
        }
        g
    }
}

/// The ranks of `sets` (one per set). The devices are grouped once per
/// call, so a set costs a few integer operations per device.
pub fn rank(cfg: &Config, policy: Policy, devices: &[Device], sets: &[DeviceSet]) -> Vec<u8> {
    let groupings: Vec<Grouping> = cfg
        .dra_group_attributes
        .iter()
        .map(|a| Grouping::new(devices, a))
        .collect();
    sets.iter()
        .map(|s| rank_one(&groupings, policy, devices, s))
        .collect()
}

fn rank_one(groupings: &[Grouping], policy: Policy, devices: &[Device], set: &DeviceSet) -> u8 {
    let members: Vec<usize> = set
        .devices
        .iter()
        .map(|&i| i as usize)
        .filter(|&i| i < devices.len())
        .collect();
    if members.is_empty() {
        return 0;
    }
    // The first grouping every device of the set is in.
    let Some(g) = groupings
        .iter()
        .find(|g| members.iter().all(|&d| g.of[d].is_some()))
    else {
        return if members.len() == 1 { 50 } else { 50 / 3 };
    };
    let of: Vec<u32> = members.iter().filter_map(|&d| g.of[d]).collect();
    // Packing over the groups the set touches: the share of their devices
    // outside the set already allocated.
    let mut touched: Vec<u32> = of.clone();
    touched.sort_unstable();
    touched.dedup();
    let (mut total, mut used) = (0i64, 0i64);
    for &t in &touched {
        total += g.size[t as usize];
        used += g.used[t as usize];
    }
    for &d in &members {
        total -= 1;
        if devices[d].allocated {
            used -= 1;
        }
    }
    let used_share = if total <= 0 { 100 } else { 100 * used / total };
    let packing = match policy {
        Policy::Binpack => used_share,
        Policy::Spread => 100 - used_share,
        Policy::Origin => 50,
    };
    if members.len() == 1 {
        return packing as u8;
    }
    let pairs = of.len() * (of.len() - 1) / 2;
    let mut same = 0;
    for i in 0..of.len() {
        for j in i + 1..of.len() {
            if of[i] == of[j] {
                same += 1;
            }
        }
    }
    let locality = (100 * same / pairs.max(1)) as i64;
    ((2 * locality + packing) / 3) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, root: &str, allocated: bool) -> Device {
        Device {
            driver: "gpu.example.com".into(),
            pool: "node-1".into(),
            name: name.into(),
            attributes: vec![(PCIE_ROOT.into(), root.into())],
            capacity: Vec::new(),
            allocated,
        }
    }

    fn set(devices: &[u32]) -> DeviceSet {
        DeviceSet {
            devices: devices.to_vec(),
            requests: devices.iter().map(|_| 0).collect(),
        }
    }

    #[test]
    fn a_pair_on_one_root_beats_the_first_fit_across_roots() {
        // gpu-0 and gpu-1 on different roots (first fit), gpu-0 and gpu-2
        // on one.
        let devices = [
            gpu("gpu-0", "pci0", false),
            gpu("gpu-1", "pci1", false),
            gpu("gpu-2", "pci0", false),
            gpu("gpu-3", "pci1", false),
        ];
        let ranks = rank(
            &Config::default(),
            Policy::Binpack,
            &devices,
            &[set(&[0, 1]), set(&[0, 2])],
        );
        assert!(ranks[1] > ranks[0], "{ranks:?}");
        // Locality 100; packing 100: the pair fills its root, leaving pci1
        // whole.
        assert_eq!(ranks, vec![0, 100]);
    }

    #[test]
    fn binpack_fills_used_groups_and_spread_avoids_them() {
        let devices = [
            gpu("gpu-0", "pci0", true),
            gpu("gpu-1", "pci0", false),
            gpu("gpu-2", "pci1", false),
            gpu("gpu-3", "pci1", false),
        ];
        let cfg = Config::default();
        let sets = [set(&[1]), set(&[2])];
        let b = rank(&cfg, Policy::Binpack, &devices, &sets);
        assert_eq!(b, vec![100, 0]);
        let s = rank(&cfg, Policy::Spread, &devices, &sets);
        assert_eq!(s, vec![0, 100]);
    }

    #[test]
    fn devices_without_group_attributes_rank_neutrally() {
        let mut d = gpu("gpu-0", "pci0", false);
        d.attributes.clear();
        let mut e = d.clone();
        e.name = "gpu-1".into();
        let ranks = rank(
            &Config::default(),
            Policy::Binpack,
            &[d, e],
            &[set(&[0]), set(&[0, 1])],
        );
        assert_eq!(ranks, vec![50, 50 / 3]);
    }

    #[test]
    fn positions_out_of_range_are_ignored() {
        let ranks = rank(&Config::default(), Policy::Binpack, &[], &[set(&[7])]);
        assert_eq!(ranks, vec![0]);
    }
}
