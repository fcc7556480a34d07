//! What the plugin knows about one node's GPUs: its labels (count, model,
//! memory), annotations (utilization, NVLink topology) and which GPU
//! indices the pods placed on it hold, whole or shared by memory.

use wasmsched_plugin_sdk::types::{Node, Pod};
use wasmsched_plugin_sdk::{reject_unresolvable, NodeExt, NodeState, PodExt, Rejection};

use crate::args::Config;
use crate::*;

pub use wasmsched_plugin_sdk::gpu::{
    parse_index_list, parse_uint, parse_utilization, read_labels, topology, NodeGpus, MAX_GPUS,
};

/// The node's GPU utilization in percent: the annotation, else the metric
/// (percent, non-finite values ignored, clamped to 0..=100), else `None`.
pub fn utilization_pct(node: &Node, cfg: &Config) -> Result<Option<u32>, Rejection> {
    if let Some(v) = node.annotation(&cfg.utilization_annotation) {
        return match parse_utilization(v) {
            Some(p) => Ok(Some(p)),
            None => Err(reject_unresolvable(format!(
                "invalid node annotation {}",
                cfg.utilization_annotation
            ))),
        };
    }
    Ok(node
        .metric(&cfg.utilization_metric)
        .filter(|m| m.is_finite())
        .map(|m| m.clamp(0.0, 100.0).round() as u32))
}

/// What one GPU of a node is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Free,
    /// Held by a pod that requested whole GPUs.
    Whole,
    /// Shared by pods that asked for GPU memory only; MiB they claim.
    Shared(u64),
}

/// Whole GPUs a pod holds: its `nvidia.com/gpu` request (or limit), never
/// negative.
pub fn placed_gpus(pod: &Pod) -> u32 {
    pod.request(GPU_RESOURCE)
        .max(pod.limit(GPU_RESOURCE))
        .clamp(0, u32::MAX as i64) as u32
}

fn bad_placed(annotation: &str) -> Rejection {
    reject_unresolvable(format!(
        "invalid annotation {annotation} on a pod placed on the node"
    ))
}

struct User<'p> {
    pod: &'p Pod,
    whole: u32,
    memory: u64,
    assigned: Option<Vec<u32>>,
}

/// The best-fitting shared GPU for `memory` MiB: the one with the least
/// memory left after it, lowest index on a tie.
pub fn best_shared(slots: &[Slot], per_gpu: u64, memory: u64) -> Option<u32> {
    slots
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match *s {
            Slot::Shared(used) if per_gpu.saturating_sub(used) >= memory => {
                Some((per_gpu - used - memory, i as u32))
            }
            _ => None,
        })
        .min()
        .map(|(_, i)| i)
}

/// The per-GPU table of a node and the number of whole GPUs still free.
///
/// Placed pods, oldest first (creation time, then uid): pods holding whole
/// GPUs with `gpu.nvidia.com/assigned-gpus` take those indices; sharing
/// pods with it add their memory to that GPU; whole-GPU pods without it
/// take the lowest free indices; sharing pods without it join the
/// best-fitting shared GPU, else open the lowest free one. Indices at or
/// above the capacity are ignored. Free GPUs are then capped by
/// `capacity - requested(nvidia.com/gpu)`.
pub fn slots(ns: &NodeState, g: &NodeGpus, cfg: &Config) -> Result<(Vec<Slot>, u32), Rejection> {
    let cap = g.capacity as usize;
    let mut slots = vec![Slot::Free; cap];
    let mut users: Vec<User> = Vec::new();
    for pod in &ns.pods {
        let whole = placed_gpus(pod);
        let memory = match pod.annotation(ANN_MEMORY) {
            Some(v) if whole == 0 && cfg.fractional => {
                parse_uint(v).ok_or_else(|| bad_placed(ANN_MEMORY))?
            }
            _ => 0,
        };
        if whole == 0 && memory == 0 {
            continue;
        }
        let assigned = match pod.annotation(ANN_ASSIGNED) {
            None => None,
            Some(v) => {
                let list = parse_index_list(v).ok_or_else(|| bad_placed(ANN_ASSIGNED))?;
                if list.len() != whole.max(1) as usize {
                    return Err(bad_placed(ANN_ASSIGNED));
                }
                Some(list)
            }
        };
        users.push(User {
            pod,
            whole,
            memory,
            assigned,
        });
    }
    if users.is_empty() {
        let free =
            (g.capacity as i64 - ns.requested(GPU_RESOURCE)).clamp(0, g.capacity as i64) as u32;
        return Ok((slots, free));
    }
    users.sort_by(|a, b| {
        (a.pod.creation_timestamp_ms, &a.pod.uid).cmp(&(b.pod.creation_timestamp_ms, &b.pod.uid))
    });
    for u in users.iter().filter(|u| u.whole > 0) {
        for &i in u.assigned.iter().flatten().filter(|&&i| (i as usize) < cap) {
            slots[i as usize] = Slot::Whole;
        }
    }
    for u in users.iter().filter(|u| u.whole == 0) {
        if let Some(&i) = u.assigned.as_ref().and_then(|l| l.first()) {
            if let Some(slot) = slots.get_mut(i as usize) {
                *slot = match *slot {
                    Slot::Free => Slot::Shared(u.memory),
                    Slot::Shared(used) => Slot::Shared(used.saturating_add(u.memory)),
                    Slot::Whole => Slot::Whole,
                };
            }
        }
    }
    for u in users.iter().filter(|u| u.whole > 0 && u.assigned.is_none()) {
        let mut left = u.whole;
        for slot in slots.iter_mut() {
            if left == 0 {
                break;
            }
            if *slot == Slot::Free {
                *slot = Slot::Whole;
                left -= 1;
            }
        }
    }
    let per_gpu = g.memory_mib.unwrap_or(0);
    for u in users
        .iter()
        .filter(|u| u.whole == 0 && u.assigned.is_none())
    {
        let target = best_shared(&slots, per_gpu, u.memory).or_else(|| {
            slots
                .iter()
                .position(|s| *s == Slot::Free)
                .map(|i| i as u32)
        });
        if let Some(i) = target {
            slots[i as usize] = match slots[i as usize] {
                Slot::Shared(used) => Slot::Shared(used.saturating_add(u.memory)),
                _ => Slot::Shared(u.memory),
            };
        }
    }
    let free_slots = slots.iter().filter(|s| **s == Slot::Free).count() as i64;
    let by_requests = g.capacity as i64 - ns.requested(GPU_RESOURCE);
    Ok((slots, free_slots.min(by_requests).max(0) as u32))
}

/// The fewest domains (by size) that can hold `k` GPUs on an empty node.
fn ideal_domains(domains: &[Vec<u32>], k: u32) -> u32 {
    let mut sizes: Vec<usize> = domains.iter().map(Vec::len).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let (mut got, mut n) = (0usize, 0u32);
    for s in sizes {
        if got >= k as usize {
            break;
        }
        got += s;
        n += 1;
    }
    n
}

/// Picks `k` free GPUs (the caller checked there are enough). Without a
/// topology: the lowest free indices. With one: while the rest does not
/// fit in one domain, take every free GPU of the domain with the most free
/// GPUs; then take the lowest free indices of the domain with the fewest
/// free GPUs that holds the rest (best fit, keeping larger domains whole).
/// Returns the sorted indices and how many more domains they span than
/// the fewest possible on an empty node.
pub fn choose_whole(slots: &[Slot], domains: Option<&[Vec<u32>]>, k: u32) -> (Vec<u32>, u32) {
    let free = |i: &u32| slots.get(*i as usize) == Some(&Slot::Free);
    let Some(domains) = domains else {
        let chosen = (0..slots.len() as u32)
            .filter(free)
            .take(k as usize)
            .collect();
        return (chosen, 0);
    };
    let mut free_in: Vec<Vec<u32>> = domains
        .iter()
        .map(|d| d.iter().copied().filter(free).collect())
        .collect();
    let mut chosen = Vec::with_capacity(k as usize);
    let mut used = 0u32;
    while chosen.len() < k as usize {
        let rest = k as usize - chosen.len();
        let fit = free_in
            .iter()
            .enumerate()
            .filter(|(_, f)| f.len() >= rest)
            .min_by_key(|(i, f)| (f.len(), *i))
            .map(|(i, _)| i);
        let pick = fit.or_else(|| {
            free_in
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.is_empty())
                .max_by_key(|(i, f)| (f.len(), std::cmp::Reverse(*i)))
                .map(|(i, _)| i)
        });
        let Some(d) = pick else { break };
        let take = rest.min(free_in[d].len());
        chosen.extend(free_in[d].drain(..take));
        used += 1;
    }
    chosen.sort_unstable();
    (chosen, used.saturating_sub(ideal_domains(domains, k)))
}

/// Picks the GPU a sharing pod of `memory` MiB joins: the best-fitting
/// shared GPU; else, when `can_open`, a free GPU (the lowest index of the
/// domain with the fewest free GPUs, or the lowest free index without a
/// topology). Returns the index and whether it joins a shared GPU.
pub fn choose_shared(
    slots: &[Slot],
    domains: Option<&[Vec<u32>]>,
    per_gpu: u64,
    memory: u64,
    can_open: bool,
) -> Option<(u32, bool)> {
    if let Some(i) = best_shared(slots, per_gpu, memory) {
        return Some((i, true));
    }
    if !can_open {
        return None;
    }
    let free = |i: &u32| slots.get(*i as usize) == Some(&Slot::Free);
    let i = match domains {
        None => (0..slots.len() as u32).find(free),
        Some(ds) => ds
            .iter()
            .enumerate()
            .map(|(n, d)| (d.iter().filter(|i| free(i)).count(), n, d))
            .filter(|(c, _, _)| *c > 0)
            .min_by_key(|(c, n, _)| (*c, *n))
            .and_then(|(_, _, d)| d.iter().copied().find(free)),
    }?;
    Some((i, false))
}
