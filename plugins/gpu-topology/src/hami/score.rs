//! How good a HAMi node is for a pod, in 0..=100 (docs/gpu-sharing.md).
//!
//! `binpack` (HAMi's default node policy): `40` when the node already runs
//! vGPUs, plus `30 x` the share of the pod's vGPUs that join partly used
//! GPUs (rather than opening untouched ones), plus `30 x` the node's usage
//! after placement (the mean of its vGPU, core and memory shares, as
//! HAMi's node score). Untouched nodes and untouched GPUs stay whole for
//! pods that need them. `spread`: `100 x (1 - usage after placement)`.

use std::collections::BTreeMap;

use wasmsched_shared::hami::NodeUsage;

use super::config::NodePolicy;
use super::demand::HamiDemand;
use super::fit::Choice;

/// What the pod adds to each device (init containers counted as HAMi does:
/// the larger of the app containers' sum and the largest init container).
pub fn added(d: &HamiDemand, c: &Choice) -> BTreeMap<usize, (u64, u64, u64)> {
    let mut app: BTreeMap<usize, (u64, u64, u64)> = BTreeMap::new();
    let mut init: BTreeMap<usize, (u64, u64, u64)> = BTreeMap::new();
    for (i, slot) in c.slots.iter().enumerate() {
        let mut one: BTreeMap<usize, (u64, u64, u64)> = BTreeMap::new();
        for p in slot {
            let e = one.entry(p.device).or_default();
            *e = (e.0 + 1, e.1 + p.mem, e.2 + u64::from(p.cores));
        }
        for (k, u) in one {
            let target = if i < d.num_init { &mut init } else { &mut app };
            let e = target.entry(k).or_default();
            *e = if i < d.num_init {
                (e.0.max(u.0), e.1.max(u.1), e.2.max(u.2))
            } else {
                (e.0 + u.0, e.1 + u.1, e.2 + u.2)
            };
        }
    }
    for (k, u) in init {
        let e = app.entry(k).or_default();
        *e = (e.0.max(u.0), e.1.max(u.1), e.2.max(u.2));
    }
    app
}

/// The node's usage share (0..=1000) with `extra` added.
fn usage_share(node: &NodeUsage, extra: &BTreeMap<usize, (u64, u64, u64)>) -> i64 {
    let (mut used, mut count, mut cores, mut devcore, mut mem, mut devmem) = (0u64, 0, 0, 0, 0, 0);
    for (k, d) in node.devices.iter().enumerate() {
        let e = extra.get(&k).copied().unwrap_or_default();
        used += u64::from(d.used) + e.0;
        count += u64::from(d.device.count);
        cores += d.cores + e.2;
        devcore += u64::from(d.device.devcore);
        mem += d.mem + e.1;
        devmem += d.device.devmem;
    }
    let mut terms = Vec::new();
    for (num, den) in [(used, count), (cores, devcore), (mem, devmem)] {
        if let Some(t) = (1000 * num.min(den)).checked_div(den) {
            terms.push(t as i64);
        }
    }
    if terms.is_empty() {
        0
    } else {
        terms.iter().sum::<i64>() / terms.len() as i64
    }
}

/// The node's score for the pod placed as `c`.
pub fn node_score(d: &HamiDemand, node: &NodeUsage, c: &Choice) -> i64 {
    let extra = added(d, c);
    let after = usage_share(node, &extra);
    let score = match d.node_policy {
        NodePolicy::Spread => (1000 - after) / 10,
        NodePolicy::Binpack => {
            let touched = node.devices.iter().any(|x| !x.untouched());
            let (mut joined, mut vgpus) = (0i64, 0i64);
            for p in c.slots.iter().flatten() {
                vgpus += 1;
                if !node.devices[p.device].untouched() {
                    joined += 1;
                }
            }
            let join_share = if vgpus == 0 { 0 } else { 300 * joined / vgpus };
            (400 * i64::from(touched) + join_share + 3 * after / 10) / 10
        }
    };
    score.clamp(0, 100)
}

/// A pod that uses no GPU on a HAMi node: `50 x` the share of its GPUs in
/// use (0 when all are untouched), so such pods keep off GPU nodes and,
/// when they must, off untouched ones.
pub fn cpu_pod_score(node: &NodeUsage) -> i64 {
    let n = node.devices.len();
    if n == 0 {
        return 100;
    }
    (50 * (n - node.untouched()) / n) as i64
}
