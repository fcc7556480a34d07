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
//!   A set of one device already allocated (a share of a device that
//!   allows multiple allocations, in use by other claims: a fractional
//!   GPU) packs at 100 with `binpack`, 0 with `spread`;
//! - rank = `(2 * locality + packing) / 3` for several devices, `packing`
//!   for one;
//! - then, among sets of equal rank, the idle GPUs first ([`prefer_idle`]:
//!   per-GPU utilization from the node's `METRIC/UUID` metrics).

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
/// group's size. It depends on the devices' attributes only, so a node's
/// is kept while its devices stay ([`Groups`]).
struct Grouping {
    of: Vec<Option<u32>>,
    size: Vec<i64>,
}

impl Grouping {
    fn new(devices: &[Device], name: &str) -> Self {
        let mut values: Vec<&str> = Vec::new();
        let mut g = Grouping {
            of: Vec::with_capacity(devices.len()),
            size: Vec::new(),
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
                    values.len() - 1
                }
            };
            g.size[i] += 1;
            g.of.push(Some(i as u32));
        }
        g
    }

    /// Each group's allocated devices now.
    fn used(&self, devices: &[Device]) -> Vec<i64> {
        let mut used = vec![0; self.size.len()];
        for (g, d) in self.of.iter().zip(devices) {
            if let (Some(g), true) = (g, d.allocated) {
                used[*g as usize] += 1;
            }
        }
        used
    }
}

/// A node's devices grouped by each of `draGroupAttributes`, in order.
pub struct Groups(Vec<Grouping>);

impl Groups {
    pub fn new(cfg: &Config, devices: &[Device]) -> Self {
        Groups(
            cfg.dra_group_attributes
                .iter()
                .map(|a| Grouping::new(devices, a))
                .collect(),
        )
    }

    /// Whether these are groups of `devices` (as many devices).
    pub fn fits(&self, devices: &[Device]) -> bool {
        self.0.iter().all(|g| g.of.len() == devices.len())
    }
}

/// Device attributes that name the GPU a DRA device is (NVIDIA's DRA
/// driver: a GPU's `uuid`, a MIG partition's `parentUUID`), so its node
/// metrics `METRIC/UUID` can be found.
pub const UUID_ATTRIBUTES: [&str; 2] = ["gpu.nvidia.com/uuid", "gpu.nvidia.com/parentUUID"];

/// The most a set's rank is lowered for busy GPUs (rank points), so that
/// utilization only orders sets of equal rank.
pub const MAX_IDLE_TIEBREAK: i64 = 10;

/// The GPU UUID a device carries, if any.
pub fn uuid(d: &Device) -> Option<&str> {
    UUID_ATTRIBUTES.iter().find_map(|a| attr(d, a))
}

/// Among sets of equal rank, prefers the idle GPUs: each set's rank is
/// lowered by `room * busy / 100`, where `busy` is the mean utilization
/// (percent) of its devices whose utilization `util` knows (`unknown`
/// when it knows none) and `room` the rank points between its rank and the
/// next lower rank of any set, less one (at most [`MAX_IDLE_TIEBREAK`]),
/// so no set passes one of a lower rank.
pub fn prefer_idle(
    ranks: &mut [u8],
    sets: &[DeviceSet],
    devices: &[Device],
    unknown: u32,
    util: impl Fn(&Device) -> Option<u32>,
) {
    // Each set's mean utilization over its devices that have one.
    let busy: Vec<Option<i64>> = sets
        .iter()
        .map(|set| {
            let known: Vec<i64> = set
                .devices
                .iter()
                .filter_map(|&i| devices.get(i as usize))
                .filter_map(&util)
                .map(|u| i64::from(u.min(100)))
                .collect();
            (!known.is_empty()).then(|| known.iter().sum::<i64>() / known.len() as i64)
        })
        .collect();
    // No GPU's utilization known: nothing to prefer (and no rank lowered,
    // so such a node scores as one without metrics).
    if busy.iter().all(Option::is_none) {
        return;
    }
    let mut distinct: Vec<i64> = ranks.iter().map(|&r| i64::from(r)).collect();
    distinct.sort_unstable_by(|a, b| b.cmp(a));
    distinct.dedup();
    let base: Vec<u8> = ranks.to_vec();
    for (rank, (busy, &b)) in ranks.iter_mut().zip(busy.iter().zip(&base)) {
        let b = i64::from(b);
        let lower = distinct.iter().copied().find(|&r| r < b).unwrap_or(-1);
        let room = (b - lower - 1).clamp(0, MAX_IDLE_TIEBREAK);
        let busy = busy.unwrap_or(i64::from(unknown.min(100)));
        *rank = (b - (room * busy + 50) / 100) as u8;
    }
}

/// The ranks of `sets` (one per set). The devices are grouped once per
/// call, so a set costs a few integer operations per device.
pub fn rank(cfg: &Config, policy: Policy, devices: &[Device], sets: &[DeviceSet]) -> Vec<u8> {
    rank_grouped(&Groups::new(cfg, devices), policy, devices, sets)
}

/// [`rank`] with the devices' [`Groups`] known.
pub fn rank_grouped(
    groups: &Groups,
    policy: Policy,
    devices: &[Device],
    sets: &[DeviceSet],
) -> Vec<u8> {
    let used: Vec<Vec<i64>> = groups.0.iter().map(|g| g.used(devices)).collect();
    let mut scratch = Scratch::default();
    sets.iter()
        .map(|s| rank_one(groups, &used, policy, devices, s, &mut scratch))
        .collect()
}

/// The lists one set's rank needs, reused from set to set (a call ranks
/// up to hundreds of sets).
#[derive(Default)]
struct Scratch {
    members: Vec<usize>,
    of: Vec<u32>,
    touched: Vec<u32>,
}

fn rank_one(
    groups: &Groups,
    used: &[Vec<i64>],
    policy: Policy,
    devices: &[Device],
    set: &DeviceSet,
    scratch: &mut Scratch,
) -> u8 {
    let Scratch {
        members,
        of,
        touched,
    } = scratch;
    members.clear();
    members.extend(
        set.devices
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| i < devices.len()),
    );
    if members.is_empty() {
        return 0;
    }
    // The first grouping every device of the set is in.
    let Some((g, g_used)) = groups
        .0
        .iter()
        .zip(used)
        .find(|(g, _)| members.iter().all(|&d| g.of[d].is_some()))
    else {
        return if members.len() == 1 { 50 } else { 50 / 3 };
    };
    of.clear();
    of.extend(members.iter().filter_map(|&d| g.of[d]));
    // Packing over the groups the set touches: the share of their devices
    // outside the set already allocated.
    touched.clear();
    touched.extend_from_slice(of);
    touched.sort_unstable();
    touched.dedup();
    let (mut total, mut used) = (0i64, 0i64);
    for &t in touched.iter() {
        total += g.size[t as usize];
        used += g_used[t as usize];
    }
    for &d in members.iter() {
        total -= 1;
        if devices[d].allocated {
            used -= 1;
        }
    }
    // A set of one device that is already allocated is a share of a
    // device that allows multiple allocations (a fractional GPU the DRA
    // way, in use by other claims): fully used, so binpack fills it
    // before opening another GPU and spread avoids it.
    let shared_in_use = members.len() == 1 && devices[members[0]].allocated;
    let used_share = if total <= 0 || shared_in_use {
        100
    } else {
        100 * used / total
    };
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

    /// Fractional GPUs the DRA way: a shared GPU already holding shares
    /// of other claims ranks as fully used (it was 0, its root's other
    /// GPU being free): binpack's first choice (the search order breaks
    /// the tie with the GPU beside it), the one spread avoids.
    #[test]
    fn a_shared_gpu_in_use_is_filled_first_by_binpack_and_avoided_by_spread() {
        let cfg = Config::default();
        let devices = vec![
            gpu("gpu-0", "pci0", true),
            gpu("gpu-1", "pci0", false),
            gpu("gpu-2", "pci1", false),
            gpu("gpu-3", "pci1", false),
        ];
        let sets = [set(&[0]), set(&[1]), set(&[2])];
        assert_eq!(rank(&cfg, Policy::Binpack, &devices, &sets), [100, 100, 0]);
        assert_eq!(rank(&cfg, Policy::Spread, &devices, &sets), [0, 0, 100]);
    }

    #[test]
    fn idle_gpus_win_among_sets_of_equal_rank_and_never_pass_a_better_set() {
        let mut devices: Vec<Device> = (0..4)
            .map(|i| gpu(&format!("gpu-{i}"), "pci0", false))
            .collect();
        for (i, d) in devices.iter_mut().enumerate() {
            d.attributes
                .push(("gpu.nvidia.com/uuid".into(), format!("GPU-{i}")));
        }
        let util = |d: &Device| match uuid(d) {
            Some("GPU-0") => Some(90),
            Some("GPU-1") => Some(10),
            Some("GPU-2") => Some(0),
            _ => None,
        };
        let sets = [set(&[0]), set(&[1]), set(&[2]), set(&[3])];
        // Equal ranks: the idle GPU wins, the busy one loses, the unknown
        // one counts as `unknown` percent.
        let mut ranks = vec![50, 50, 50, 50];
        prefer_idle(&mut ranks, &sets, &devices, 50, util);
        assert_eq!(ranks, [41, 49, 50, 45]);
        // A better rank stays better however busy; the room is the gap to
        // the next lower rank.
        let mut ranks = vec![52, 51, 50, 50];
        prefer_idle(&mut ranks, &sets, &devices, 50, util);
        assert_eq!(ranks, [52, 51, 50, 45]);
        assert!(ranks[0] > ranks[1] && ranks[1] > ranks[2]);
        // No utilization known for any set: ranks stay as they were.
        let mut ranks = vec![50];
        prefer_idle(&mut ranks, &sets[3..], &devices, 50, util);
        assert_eq!(ranks, [50]);
        // A device with a parent GPU (MIG) is found by its parent's UUID.
        let mut mig = gpu("mig-0", "pci0", false);
        mig.attributes
            .push(("gpu.nvidia.com/parentUUID".into(), "GPU-7".into()));
        assert_eq!(uuid(&mig), Some("GPU-7"));
    }

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
