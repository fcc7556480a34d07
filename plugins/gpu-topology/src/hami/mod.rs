//! Fractional GPUs with HAMi's device plugin (docs/gpu-sharing.md): nodes
//! that carry `hami.io/node-nvidia-register` are fitted and scored device
//! by device, and the device choice is written on the pod (Reserve +
//! PreBind output) exactly as HAMi's device plugin reads it. Other nodes
//! keep the whole-GPU model of the rest of this plugin.

pub mod config;
pub mod demand;
pub mod fit;
pub mod index;
pub mod patch;
pub mod score;

#[cfg(test)]
mod tests;

use std::cell::RefCell;

use wasmsched_plugin_sdk::types::{Delta, Node, PodPatch};
use wasmsched_plugin_sdk::{reject, reject_unresolvable, NodeState, Rejection};

pub use config::{GpuPolicy, HamiArgs, HamiConfig, NodePolicy};
pub use demand::{demand, HamiDemand};
pub use fit::Choice;

pub use index::{DeviceLive, LiveMetrics};
use index::{HamiNode, Index};

/// The node has no HAMi devices but the pod asks for HAMi-only resources.
pub const NOT_HAMI_NODE: &str = "Node has no HAMi-shared GPUs";
pub const INVALID_REGISTER: &str = "invalid node annotation hami.io/node-nvidia-register";
pub const INVALID_PLACED: &str =
    "invalid annotation hami.io/vgpu-devices-allocated on a pod placed on the node";

/// What Reserve chose, for PreBind.
struct Pending {
    uid: String,
    node: u32,
    patch: PodPatch,
}

/// The plugin's HAMi state: the usage index and the current reservation.
#[derive(Default)]
pub struct HamiState {
    index: RefCell<Index>,
    pending: RefCell<Option<Pending>>,
}

fn empty_patch() -> PodPatch {
    PodPatch {
        labels: Vec::new(),
        annotations: Vec::new(),
    }
}

impl HamiState {
    pub fn observe(&self, delta: &Delta, live: LiveMetrics<'_>) {
        self.index.borrow_mut().observe(delta, live);
    }

    /// A node's metrics changed and nothing else.
    pub fn metrics_changed(&self, index: u32, node: &Node, live: LiveMetrics<'_>) {
        self.index.borrow_mut().metrics_changed(index, node, live);
    }

    /// Whether the node carries HAMi's register annotation.
    pub fn is_hami(&self, node: u32) -> bool {
        self.index.borrow().node(node).is_some()
    }

    /// Runs `f` on a HAMi node whose devices and placed pods are readable;
    /// `None` for a node that is not a HAMi node.
    fn with_node<R>(
        &self,
        node: u32,
        f: impl FnOnce(&HamiNode, &wasmsched_shared::hami::NodeUsage) -> Result<R, Rejection>,
    ) -> Option<Result<R, Rejection>> {
        let index = self.index.borrow();
        let n = index.node(node)?;
        Some(match &n.usage {
            Err(_) => Err(reject_unresolvable(INVALID_REGISTER)),
            Ok(_) if n.bad_pods > 0 => Err(reject_unresolvable(INVALID_PLACED)),
            Ok(u) => f(n, u),
        })
    }

    /// Where the pod's vGPUs go on a HAMi node and the node's score, or
    /// why they do not fit; `None` for a node that is not a HAMi node.
    pub fn place(
        &self,
        d: &HamiDemand,
        ns: &NodeState,
    ) -> Option<Result<(Choice, i64), Rejection>> {
        self.with_node(ns.index, |n, u| {
            match fit::place(d, u, &n.pairs, &n.central, &n.live) {
                Ok(c) => {
                    let s = score::node_score(d, u, &c);
                    Ok((c, s))
                }
                Err(r) if r.unresolvable() => Err(reject_unresolvable(r.text())),
                Err(r) => Err(reject(r.text())),
            }
        })
    }

    /// Reserve: remembers the pod's device choice on a HAMi node for
    /// PreBind. The usage itself arrives with the assumed pod's delta.
    pub fn reserve(&self, d: Option<&HamiDemand>, uid: &str, ns: &NodeState) -> Result<(), String> {
        *self.pending.borrow_mut() = None;
        let Some(d) = d else { return Ok(()) };
        let chosen = self.with_node(ns.index, |n, u| {
            fit::place(d, u, &n.pairs, &n.central, &n.live)
                .map(|c| patch::patch(&ns.node.name, u, &c))
                .map_err(|r| reject(r.text()))
        });
        match chosen {
            None => Ok(()),
            Some(Err(r)) => Err(format!(
                "no GPUs for the pod on {}: {}",
                ns.node.name, r.reason
            )),
            Some(Ok(patch)) => {
                *self.pending.borrow_mut() = Some(Pending {
                    uid: uid.to_string(),
                    node: ns.index,
                    patch,
                });
                Ok(())
            }
        }
    }

    /// PreBind output for the reserved pod (empty on other nodes).
    pub fn pre_bind(&self, uid: &str, node: u32) -> PodPatch {
        match &*self.pending.borrow() {
            Some(p) if p.uid == uid && p.node == node => p.patch.clone(),
            _ => empty_patch(),
        }
    }

    pub fn unreserve(&self, uid: &str) {
        let mut pending = self.pending.borrow_mut();
        if pending.as_ref().is_some_and(|p| p.uid == uid) {
            *pending = None;
        }
    }

    /// A pod that uses no GPU on a HAMi node (`None`: not a HAMi node).
    pub fn cpu_pod_score(&self, node: u32) -> Option<i64> {
        let index = self.index.borrow();
        let n = index.node(node)?;
        Some(match &n.usage {
            Ok(u) => score::cpu_pod_score(u),
            Err(_) => 0,
        })
    }
}
