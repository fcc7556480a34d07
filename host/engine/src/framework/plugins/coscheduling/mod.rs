//! Coscheduling: all-or-nothing pod groups, with the PodGroup API of
//! kubernetes-sigs/scheduler-plugins (`scheduling.x-k8s.io/v1alpha1`) and
//! its plugin's semantics, plus whole groups inside one topology domain.
//!
//! - QueueSort ([`PodGroups`] as the queue's key): members leave the queue
//!   together, ordered by their group's creation time.
//! - PreFilter: rejects a member while its group backs off, has fewer
//!   than `minMember` pods, or its `minResources` exceed the cluster's
//!   free capacity; plans the group's topology domain ([`topology`]).
//! - Filter: keeps a member inside its group's planned domains.
//! - PostFilter: a member that fits nowhere rejects its waiting siblings
//!   (unless the group is within 10% of `minMember`), and the group
//!   backs off.
//! - Reserve / Unreserve: counts reserved members; a reservation undone
//!   before the group was allowed (a timeout, a deleted member) rejects
//!   every waiting member and backs the group off.
//! - Permit: waits (the PodGroup's `scheduleTimeoutSeconds`, else the
//!   plugin's default) until `minMember` are bound or reserved, then
//!   allows every waiting member at once. No member binds before.
//! - PostBind: the group's status counts.

pub mod args;
pub mod gang;
pub mod groups;
mod points;
pub mod resources;
pub mod status;
pub mod topology;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::framework::registry::Handle;
use crate::framework::{
    Clock, CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, PluginBundle, Rejection,
    WaitingPods,
};

pub use args::Args;
pub use gang::Member;
pub use groups::{group_key, PodGroups};
pub use topology::Plan;

pub use args::NAME;

/// The CycleState key of the cycle's plan.
const STATE_KEY: &str = "Coscheduling";

/// Filter's reason for a node outside the group's planned domains.
pub const OUTSIDE_DOMAIN: &str = "node(s) outside the pod group's topology domain";

pub struct Coscheduling {
    args: Args,
    groups: Arc<PodGroups>,
    waiting: Arc<WaitingPods>,
    clock: Arc<Clock>,
}

impl Plugin for Coscheduling {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for Coscheduling {
    fn filter(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        match state.read::<Arc<Plan>>(STATE_KEY) {
            Some(plan) if !plan.admits(&node.node) => Err(Rejection::unresolvable(OUTSIDE_DOMAIN)),
            _ => Ok(()),
        }
    }
}

impl Coscheduling {
    /// Uids of the waiting members of group `key`, other than `except`.
    fn waiting_members(&self, key: &str, except: &str) -> Vec<String> {
        self.waiting
            .pods()
            .into_iter()
            .filter(|p| p.uid != except && group_key(p).as_deref() == Some(key))
            .map(|p| p.uid.clone())
            .collect()
    }

    /// Rejects the waiting members of `key` (but `except`); returns how
    /// many.
    fn reject_waiting(&self, key: &str, except: &str, reason: &str) -> usize {
        let uids = self.waiting_members(key, except);
        for uid in &uids {
            self.waiting.reject(uid, reason);
        }
        uids.len()
    }
}

/// The registry's factory. Enabling the plugin makes the drivers feed
/// PodGroups and sort the queue by group.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<PluginBundle, String> {
    let args = Args::parse(args)?;
    handle.pod_groups.enable();
    let p = Arc::new(Coscheduling {
        args,
        groups: handle.pod_groups.clone(),
        waiting: handle.waiting.clone(),
        clock: handle.clock.clone(),
    });
    Ok(PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_post_filter(&p)
        .with_reserve(&p)
        .with_permit(&p)
        .with_post_bind(&p))
}
