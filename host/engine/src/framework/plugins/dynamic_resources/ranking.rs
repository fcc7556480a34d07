//! Device ranking: with device rankers in the profile (wasm components
//! exporting the contract's `device-rank`), Filter asks the allocator for
//! up to `rankedSets` (default [`MAX_SETS`]) allocations of the pod's
//! claims on the node instead of the first, the rankers rank them (0..=100
//! each; the ranks of rankers that answered are averaged), and the best
//! set is allocated (the first in search order on ties, which is
//! upstream's). The node's DynamicResources score gains the best set's
//! rank. A ranker that fails or answers the wrong number of ranks is
//! ignored for that node (logged): ranking never stops scheduling.

use crate::framework::{CycleContext, CycleState, DeviceSet, NodeInfo, RankInput};

use super::allocator::DeviceId;

/// Sets the allocator collects per node for the rankers (the default of
/// DynamicResources' `rankedSets`).
pub const MAX_SETS: usize = 32;
/// The most `rankedSets` may ask for.
pub const MAX_SETS_LIMIT: usize = 256;
/// Devices of the node sent with the sets (a node with more sends only
/// the devices in the sets).
pub const MAX_DEVICES: usize = 256;

/// What ranking decided on one node, for Score and `--explain`.
#[derive(Debug, Clone)]
pub struct NodeRank {
    /// Position of the chosen set.
    pub chosen: usize,
    /// The chosen set's rank (0..=100).
    pub best: i64,
    /// Each set's rank, in order.
    pub ranks: Vec<i64>,
    /// Every set ranked, its devices and rank: filled in
    /// ([`NodeRank::describe`]) only when the cycle is explained.
    pub sets: Vec<(Vec<DeviceId>, i64)>,
}

impl NodeRank {
    /// Names the devices of the sets `input` offered (the same sets the
    /// ranks are of).
    pub fn describe(&mut self, input: &RankInput, ids: &[&DeviceId]) {
        self.sets = input
            .sets
            .iter()
            .zip(&self.ranks)
            .map(|(s, &r)| {
                let devices = s
                    .devices
                    .iter()
                    .filter_map(|&i| ids.get(i as usize).map(|id| (*id).clone()))
                    .collect();
                (devices, r)
            })
            .collect();
    }
}

/// Ranks `input`'s sets with the profile's rankers; `None` when no ranker
/// answered.
pub fn rank(
    ctx: &CycleContext,
    state: &CycleState,
    node: &NodeInfo,
    input: RankInput,
) -> Option<NodeRank> {
    let input = trim(input);
    let n = input.sets.len();
    let mut total = vec![0i64; n];
    let mut answered = 0i64;
    for r in ctx.device_rankers {
        match r.rank_devices(ctx, state, node, &input) {
            Ok(v) if v.is_empty() => {}
            Ok(v) if v.len() == n => {
                answered += 1;
                for (t, s) in total.iter_mut().zip(v) {
                    *t += i64::from(s.min(100));
                }
            }
            Ok(v) => tracing::warn!(
                plugin = r.name(),
                node = node.name(),
                pod = %ctx.pod.key(),
                "device ranking ignored: {} ranks for {n} sets",
                v.len()
            ),
            Err(e) => tracing::warn!(
                plugin = r.name(),
                node = node.name(),
                pod = %ctx.pod.key(),
                err = %e.0,
                "device ranking failed; first fit"
            ),
        }
    }
    if answered == 0 {
        return None;
    }
    let ranks: Vec<i64> = total.iter().map(|t| t / answered).collect();
    let mut chosen = 0;
    for (i, &r) in ranks.iter().enumerate() {
        if r > ranks[chosen] {
            chosen = i;
        }
    }
    Some(NodeRank {
        chosen,
        best: ranks[chosen],
        ranks,
        sets: Vec::new(),
    })
}

/// Past [`MAX_DEVICES`], only the devices the sets use (positions
/// renumbered).
fn trim(input: RankInput) -> RankInput {
    if input.devices.len() <= MAX_DEVICES {
        return input;
    }
    let mut map = vec![u32::MAX; input.devices.len()];
    let mut out = RankInput {
        devices: Vec::new(),
        allocated: Vec::new(),
        requests: input.requests,
        sets: Vec::new(),
        // The sets' devices only: another list for every other set.
        devices_key: None,
    };
    for set in &input.sets {
        let mut s = DeviceSet {
            devices: Vec::new(),
            requests: set.requests.clone(),
        };
        for &d in &set.devices {
            let d = d as usize;
            if map[d] == u32::MAX {
                map[d] = out.devices.len() as u32;
                out.devices.push(input.devices[d]);
                out.allocated.push(input.allocated[d]);
            }
            s.devices.push(map[d]);
        }
        out.sets.push(s);
    }
    out
}
