//! Which GPUs of a HAMi node a pod's vGPUs get, or why none fit: HAMi's
//! device checks (`pkg/device/nvidia/device.go`, `Fit`), container by
//! container, then the device choice of the pod's GPU policy.

use std::cmp::Ordering;

use wasmsched_shared::hami::{DeviceState, NodeUsage, PairScores, Request};

use super::config::GpuPolicy;
use super::demand::HamiDemand;
use super::index::DeviceLive;

/// Why a device (or the node) does not take a vGPU. The text is a
/// countable Filter reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    NotEnoughGpus,
    Unhealthy,
    Cordoned,
    Mig,
    TypeMismatch,
    UuidMismatch,
    NumaNotFit,
    SlotsExhausted,
    InsufficientMemory,
    InsufficientCores,
    ExclusiveInUse,
    CoresExhausted,
}

impl Reason {
    pub fn text(self) -> &'static str {
        match self {
            Reason::NotEnoughGpus => "Not enough GPUs",
            Reason::Unhealthy => "GPU unhealthy",
            Reason::Cordoned => "GPU cordoned",
            Reason::Mig => "MIG GPUs not supported",
            Reason::TypeMismatch => "GPU type mismatch",
            Reason::UuidMismatch => "GPU UUID mismatch",
            Reason::NumaNotFit => "Not enough GPUs on one NUMA node",
            Reason::SlotsExhausted => "GPU vGPU slots exhausted",
            Reason::InsufficientMemory => "Insufficient GPU memory",
            Reason::InsufficientCores => "Insufficient GPU cores",
            Reason::ExclusiveInUse => "Exclusive GPU in use",
            Reason::CoresExhausted => "GPU cores exhausted",
        }
    }

    /// No eviction on the node can help.
    pub fn unresolvable(self) -> bool {
        matches!(
            self,
            Reason::NotEnoughGpus
                | Reason::Unhealthy
                | Reason::Cordoned
                | Reason::Mig
                | Reason::TypeMismatch
                | Reason::UuidMismatch
        )
    }
}

/// One vGPU: the device's position on the node and what it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub device: usize,
    pub mem: u64,
    pub cores: u32,
}

/// The pod's vGPUs, one slot per container (HAMi's order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub slots: Vec<Vec<Pick>>,
}

/// A device's usage while the pod's containers are placed.
#[derive(Debug, Clone, Copy)]
struct Load {
    used: u32,
    mem: u64,
    cores: u64,
}

impl Load {
    fn of(d: &DeviceState) -> Load {
        Load {
            used: d.used,
            mem: d.mem,
            cores: d.cores,
        }
    }

    fn untouched(&self) -> bool {
        self.used == 0 && self.mem == 0 && self.cores == 0
    }
}

/// The checks that do not depend on usage.
fn static_check(d: &HamiDemand, dev: &DeviceState) -> Option<Reason> {
    let x = &dev.device;
    if !x.health {
        return Some(Reason::Unhealthy);
    }
    if dev.cordoned {
        return Some(Reason::Cordoned);
    }
    if x.mode == "mig" {
        return Some(Reason::Mig);
    }
    let types_ok = || {
        let kind = x.kind.to_ascii_uppercase();
        (d.use_types.is_empty() || d.use_types.iter().any(|t| kind.contains(t.as_str())))
            && !d.nouse_types.iter().any(|t| kind.contains(t.as_str()))
    };
    let type_ok = (d.use_types.is_empty() && d.nouse_types.is_empty() || types_ok())
        && d.mode.as_ref().is_none_or(|m| m.contains(x.mode.as_str()));
    if !type_ok {
        return Some(Reason::TypeMismatch);
    }
    let uuid_ok =
        (d.use_uuids.is_empty() || d.use_uuids.contains(&x.id)) && !d.nouse_uuids.contains(&x.id);
    if !uuid_ok {
        return Some(Reason::UuidMismatch);
    }
    None
}

/// The checks against the device's current usage, for one vGPU of `r`.
fn load_check(r: &Request, dev: &DeviceState, l: &Load) -> Option<Reason> {
    let x = &dev.device;
    let mem = r.memory_on(x.devmem);
    let cores = u64::from(r.cores_capped());
    if x.count <= l.used {
        return Some(Reason::SlotsExhausted);
    }
    if x.devmem.saturating_sub(l.mem) < mem {
        return Some(Reason::InsufficientMemory);
    }
    if u64::from(x.devcore).saturating_sub(l.cores) < cores {
        return Some(Reason::InsufficientCores);
    }
    if x.devcore == 100 && cores == 100 && l.used > 0 {
        return Some(Reason::ExclusiveInUse);
    }
    if x.devcore != 0 && l.cores >= u64::from(x.devcore) && cores == 0 {
        return Some(Reason::CoresExhausted);
    }
    None
}

/// Where the pod's vGPUs go on `node`, or why they do not fit.
/// `central`: each device's [`centralities`] (computed once per node
/// change); `live`: each device's DCGM values (empty: none known).
pub fn place(
    d: &HamiDemand,
    node: &NodeUsage,
    pairs: &PairScores,
    central: &[i64],
    live: &[DeviceLive],
) -> Result<Choice, Reason> {
    let devs = &node.devices;
    if (devs.len() as u64) < u64::from(d.widest()) {
        return Err(Reason::NotEnoughGpus);
    }
    let statics: Vec<Option<Reason>> = devs.iter().map(|x| static_check(d, x)).collect();
    let base: Vec<Load> = devs.iter().map(Load::of).collect();
    let weighs_links = matches!(
        d.gpu_policy,
        GpuPolicy::Fragmentation | GpuPolicy::TopologyAware
    );
    let central = if weighs_links { central } else { &[] };
    let mut app = base.clone();
    let mut slots = Vec::with_capacity(d.containers.len());
    for (i, c) in d.containers.iter().enumerate() {
        let Some(r) = c else {
            slots.push(Vec::new());
            continue;
        };
        let init = i < d.num_init;
        let loads = if init { &base } else { &app };
        let chosen = place_container(d, r, node, (pairs, central, live), &statics, loads)?;
        let picks: Vec<Pick> = chosen
            .iter()
            .map(|&k| Pick {
                device: k,
                mem: r.memory_on(devs[k].device.devmem),
                cores: r.cores_capped(),
            })
            .collect();
        if !init {
            for p in &picks {
                let l = &mut app[p.device];
                l.used += 1;
                l.mem += p.mem;
                l.cores += u64::from(p.cores);
            }
        }
        slots.push(picks);
    }
    Ok(Choice { slots })
}

/// How well each device is linked to the node's others (the sum of its
/// pair scores), in the node's device order; empty without pair scores.
/// It depends on the node alone, so the index keeps it per node.
pub fn centralities(node: &NodeUsage, pairs: &PairScores) -> Vec<i64> {
    if pairs.is_empty() {
        return Vec::new();
    }
    let devs = &node.devices;
    devs.iter()
        .map(|x| {
            devs.iter()
                .filter(|o| o.device.id != x.device.id)
                .map(|o| pairs.between(&x.device.id, &o.device.id))
                .sum()
        })
        .collect()
}

/// The devices one container's vGPUs get (the node's pair scores, each
/// device's [`centralities`] and its live DCGM values).
fn place_container(
    d: &HamiDemand,
    r: &Request,
    node: &NodeUsage,
    (pairs, central, live): (&PairScores, &[i64], &[DeviceLive]),
    statics: &[Option<Reason>],
    loads: &[Load],
) -> Result<Vec<usize>, Reason> {
    let mut failures: Vec<Reason> = Vec::new();
    let mut cands: Vec<usize> = Vec::new();
    for (k, dev) in node.devices.iter().enumerate() {
        match statics[k].or_else(|| load_check(r, dev, &loads[k])) {
            Some(reason) => failures.push(reason),
            None => cands.push(k),
        }
    }
    let k = r.nums as usize;
    if cands.len() < k {
        return Err(most_common(&failures).unwrap_or(Reason::NotEnoughGpus));
    }
    let chooser = Chooser {
        policy: d.gpu_policy,
        r,
        node,
        pairs,
        central,
        live,
        loads,
    };
    if !d.numa_bind {
        return Ok(chooser.choose(&cands, k));
    }
    let mut groups: Vec<(i32, Vec<usize>)> = Vec::new();
    for &c in &cands {
        let numa = node.devices[c].device.numa;
        match groups.iter_mut().find(|(n, _)| *n == numa) {
            Some((_, g)) => g.push(c),
            None => groups.push((numa, vec![c])),
        }
    }
    groups
        .iter()
        .filter(|(_, g)| g.len() >= k)
        .map(|(_, g)| chooser.choose(g, k))
        .min_by(|a, b| chooser.set_cost(a).cmp(&chooser.set_cost(b)))
        .ok_or(Reason::NumaNotFit)
}

/// The most frequent reason (the first in [`Reason`]'s order on a tie).
fn most_common(failures: &[Reason]) -> Option<Reason> {
    let mut counts: Vec<(Reason, usize)> = Vec::new();
    for &f in failures {
        match counts.iter_mut().find(|(r, _)| *r == f) {
            Some((_, n)) => *n += 1,
            None => counts.push((f, 1)),
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(r, _)| r)
}

/// The largest set of candidates enumerated for a multi-GPU container; more
/// and the set is grown greedily.
const MAX_COMBINATIONS: u64 = 2000;

struct Chooser<'a> {
    policy: GpuPolicy,
    r: &'a Request,
    node: &'a NodeUsage,
    pairs: &'a PairScores,
    central: &'a [i64],
    live: &'a [DeviceLive],
    loads: &'a [Load],
}

/// Lower is better, compared in order: DCGM says the device lacks the
/// memory the vGPU takes; the policy's three terms; the devices' DCGM
/// utilization; minus their free framebuffer memory; their indices.
type Cost = [i64; 7];

/// The utilization a device without a DCGM value counts as (percent): in
/// the middle, so that a known idle GPU comes before it and a known busy
/// one after.
pub const UNKNOWN_DEVICE_UTILIZATION: i64 = 50;

impl Chooser<'_> {
    fn mem(&self, k: usize) -> u64 {
        self.r.memory_on(self.node.devices[k].device.devmem)
    }

    /// HAMi's device score after one vGPU of the request, x1000.
    fn hami_score(&self, k: usize) -> i64 {
        let x = &self.node.devices[k].device;
        let l = &self.loads[k];
        let ratio = |num: u64, den: u64| (1000 * num).checked_div(den).unwrap_or(0) as i64;
        ratio(u64::from(l.used) + 1, u64::from(x.count))
            + ratio(
                l.cores + u64::from(self.r.cores_capped()),
                u64::from(x.devcore),
            )
            + ratio(l.mem + self.mem(k), x.devmem)
    }

    fn free_after(&self, k: usize) -> i64 {
        let x = &self.node.devices[k].device;
        x.devmem.saturating_sub(self.loads[k].mem + self.mem(k)) as i64
    }

    /// How well a device is linked to the node's others.
    fn centrality(&self, k: usize) -> i64 {
        self.central.get(k).copied().unwrap_or(0)
    }

    fn opened(&self, k: usize) -> i64 {
        i64::from(self.loads[k].untouched())
    }

    fn live(&self, k: usize) -> DeviceLive {
        self.live.get(k).copied().unwrap_or_default()
    }

    /// 1 when DCGM's free framebuffer memory on the device is below what
    /// the vGPU takes (memory used outside HAMi's accounting).
    fn short(&self, k: usize) -> i64 {
        let mem = self.mem(k);
        i64::from(self.live(k).fb_free_mib.is_some_and(|free| free < mem))
    }

    /// The device's DCGM utilization in percent.
    fn busy(&self, k: usize) -> i64 {
        self.live(k)
            .util
            .map_or(UNKNOWN_DEVICE_UTILIZATION, i64::from)
    }

    /// Free framebuffer MiB by DCGM (0 when unknown).
    fn fb_free(&self, k: usize) -> i64 {
        self.live(k).fb_free_mib.unwrap_or(0).min(i64::MAX as u64) as i64
    }

    /// The policy's terms for one device.
    fn single_terms(&self, k: usize) -> [i64; 3] {
        match self.policy {
            GpuPolicy::Fragmentation => [self.opened(k), self.free_after(k), self.centrality(k)],
            GpuPolicy::Binpack => [-self.hami_score(k), 0, 0],
            GpuPolicy::Spread => [self.hami_score(k), 0, 0],
            GpuPolicy::TopologyAware => [self.centrality(k), self.opened(k), self.free_after(k)],
        }
    }

    fn single_cost(&self, k: usize) -> Cost {
        let [a, b, c] = self.single_terms(k);
        [
            self.short(k),
            a,
            b,
            c,
            self.busy(k),
            -self.fb_free(k),
            k as i64,
        ]
    }

    fn link_sum(&self, set: &[usize]) -> i64 {
        let mut s = 0;
        for (a, &x) in set.iter().enumerate() {
            for &y in &set[a + 1..] {
                s += self.pairs.between(
                    &self.node.devices[x].device.id,
                    &self.node.devices[y].device.id,
                );
            }
        }
        s
    }

    /// Lower is better.
    fn set_cost(&self, set: &[usize]) -> Cost {
        let sum = |f: &dyn Fn(usize) -> i64| set.iter().map(|&k| f(k)).sum::<i64>();
        let [a, b, c] = match self.policy {
            GpuPolicy::Fragmentation => [
                sum(&|k| self.opened(k)),
                -self.link_sum(set),
                sum(&|k| self.free_after(k)),
            ],
            GpuPolicy::Binpack => [-sum(&|k| self.hami_score(k)), 0, 0],
            GpuPolicy::Spread => [sum(&|k| self.hami_score(k)), 0, 0],
            GpuPolicy::TopologyAware => [
                -self.link_sum(set),
                sum(&|k| self.opened(k)),
                sum(&|k| self.free_after(k)),
            ],
        };
        [
            sum(&|k| self.short(k)),
            a,
            b,
            c,
            sum(&|k| self.busy(k)),
            -sum(&|k| self.fb_free(k)),
            sum(&|k| k as i64),
        ]
    }

    /// `k` of `cands` (which has at least `k`), sorted.
    fn choose(&self, cands: &[usize], k: usize) -> Vec<usize> {
        let by_links = k > 1
            && !self.pairs.is_empty()
            && matches!(
                self.policy,
                GpuPolicy::Fragmentation | GpuPolicy::TopologyAware
            );
        let mut out = if !by_links {
            let mut sorted = cands.to_vec();
            sorted.sort_by_cached_key(|&c| self.single_cost(c));
            sorted.truncate(k);
            sorted
        } else if combinations(cands.len() as u64, k as u64) <= MAX_COMBINATIONS {
            self.best_combination(cands, k)
        } else {
            self.greedy(cands, k)
        };
        out.sort_unstable();
        out
    }

    fn best_combination(&self, cands: &[usize], k: usize) -> Vec<usize> {
        let mut best: Option<(Cost, Vec<usize>)> = None;
        let mut idx: Vec<usize> = (0..k).collect();
        loop {
            let set: Vec<usize> = idx.iter().map(|&i| cands[i]).collect();
            let cost = self.set_cost(&set);
            if best
                .as_ref()
                .is_none_or(|(b, _)| cost.cmp(b) == Ordering::Less)
            {
                best = Some((cost, set));
            }
            // Next combination in lexicographic order.
            let n = cands.len();
            let Some(i) = (0..k).rev().find(|&i| idx[i] != i + n - k) else {
                break;
            };
            idx[i] += 1;
            for j in i + 1..k {
                idx[j] = idx[j - 1] + 1;
            }
        }
        best.map(|(_, s)| s).unwrap_or_default()
    }

    /// Starts from the best single device and adds the one that improves
    /// the set's cost most, until `k`.
    fn greedy(&self, cands: &[usize], k: usize) -> Vec<usize> {
        let mut set: Vec<usize> = Vec::with_capacity(k);
        let mut left = cands.to_vec();
        while set.len() < k {
            let (pos, _) = left
                .iter()
                .enumerate()
                .map(|(p, &c)| {
                    let mut trial = set.clone();
                    trial.push(c);
                    (p, self.set_cost(&trial))
                })
                .min_by(|a, b| a.1.cmp(&b.1))
                .expect("enough candidates");
            set.push(left.swap_remove(pos));
        }
        set
    }
}

/// n choose k, saturating.
fn combinations(n: u64, k: u64) -> u64 {
    let k = k.min(n.saturating_sub(k));
    let mut c: u64 = 1;
    for i in 0..k {
        c = c.saturating_mul(n - i) / (i + 1);
        if c > MAX_COMBINATIONS {
            return c;
        }
    }
    c
}
