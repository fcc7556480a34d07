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
pub mod report;
pub mod resources;
pub mod status;
pub mod topology;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Arc;

use crate::framework::handle::Handle;
use crate::framework::objects::{object_key, ApiKind, ObjectEvent, PluginReport, StatusWrite};
use crate::framework::{
    Clock, CycleContext, CycleState, FilterPlugin, InformerPlugin, NodeInfo, Plugin, PluginBundle,
    QueueSortPlugin, Rejection, Snapshot, SortKey, WaitingPods,
};
use crate::model::pod_group::{self, PodGroupObject};
use crate::model::PodGroup;

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

impl QueueSortPlugin for Coscheduling {
    fn sort_key(&self, pod: &crate::model::Pod) -> Option<SortKey> {
        self.groups.sort_key(pod)
    }
}

/// The PodGroup API of scheduler-plugins.
pub const POD_GROUP_KIND: ApiKind = ApiKind {
    group: pod_group::API_GROUP,
    versions: &[pod_group::API_VERSION],
    kind: pod_group::KIND,
    plural: pod_group::PLURAL,
    namespaced: true,
    hint: "is the PodGroup CRD installed? deploy/components/gangs",
};

/// A PodGroup as the API shows it: its key, or why it cannot be used.
pub fn parse_pod_group(object: &serde_json::Value) -> Result<PodGroup, String> {
    let key = object_key(&POD_GROUP_KIND, object);
    let obj: PodGroupObject =
        serde_json::from_value(object.clone()).map_err(|e| format!("PodGroup {key}: {e}"))?;
    PodGroup::from_object(&obj).map_err(|e| e.to_string())
}

/// A manifest's PodGroup checked as the API server would: its key, or
/// the field at fault and why.
pub fn check_manifest(object: &serde_json::Value) -> Result<String, String> {
    let obj: PodGroupObject = serde_path_to_error::deserialize(object.clone()).map_err(|e| {
        let path = e.path().to_string();
        format!("{path}: {}", e.into_inner())
    })?;
    let g = PodGroup::from_object(&obj).map_err(|e| format!("{}: {}", e.field, e.cause))?;
    Ok(g.key())
}

/// PodGroups are followed by the groups' directory; a group that became
/// complete, got its PodGroup, or ended its backoff activates its pending
/// members.
impl InformerPlugin for Coscheduling {
    fn kinds(&self) -> &'static [ApiKind] {
        &[POD_GROUP_KIND]
    }

    fn object_event(&self, _kind: &ApiKind, event: ObjectEvent<'_>) -> bool {
        match event {
            ObjectEvent::Applied { object, .. } => {
                let key = object_key(&POD_GROUP_KIND, object);
                let parsed = parse_pod_group(object);
                if let Err(e) = &parsed {
                    tracing::warn!(error = %e, "PodGroup cannot be used");
                }
                self.groups.apply_group(&key, parsed);
            }
            ObjectEvent::Deleted(key) => self.groups.remove_group(key),
            ObjectEvent::Relisted(seen) => {
                for k in self.groups.group_keys() {
                    if !seen.contains(&k) {
                        self.groups.remove_group(&k);
                    }
                }
            }
        }
        // The groups activate their members themselves.
        false
    }

    fn status_writes(&self) -> Vec<StatusWrite> {
        self.groups
            .take_statuses()
            .into_iter()
            .filter_map(|(group, mut status, started)| {
                status.schedule_start_time = group
                    .status
                    .schedule_start_time
                    .clone()
                    .or_else(|| started.then(now_rfc3339));
                (group.status != status).then(|| StatusWrite {
                    kind: POD_GROUP_KIND,
                    namespace: group.namespace.clone(),
                    name: group.name.clone(),
                    status: serde_json::to_value(&status).unwrap_or_default(),
                })
            })
            .collect()
    }

    fn report(&self, snapshot: &Snapshot) -> Option<PluginReport> {
        report::plugin_report(&self.groups, snapshot)
    }

    fn reset(&self) {
        self.groups.reset();
    }

    fn pod_applied(&self, pod: &crate::model::Pod, terminating: bool) {
        self.groups.apply_pod(pod, terminating);
    }

    fn pod_deleted(&self, uid: &str) {
        self.groups.delete_pod(uid);
    }

    fn pods_relisted(&self, seen: &HashSet<String>) {
        self.groups.retain_pods(seen);
    }

    fn pods_to_activate(&self, now_ms: u64) -> HashSet<String> {
        self.groups.take_activations(now_ms)
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

/// Now, as `metav1.Time` writes it (RFC 3339, seconds).
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let Ok(now) = k8s_openapi::jiff::Timestamp::new(secs, 0) else {
        return String::new();
    };
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The registry's factory. Every profile's Coscheduling shares one
/// directory of PodGroups (one queue serves them all).
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<PluginBundle, String> {
    let args = Args::parse(args)?;
    let p = Arc::new(Coscheduling {
        args,
        groups: handle.shared::<PodGroups>(),
        waiting: handle.waiting.clone(),
        clock: handle.clock.clone(),
    });
    Ok(PluginBundle::new(p.clone())
        .with_queue_sort(&p)
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_post_filter(&p)
        .with_reserve(&p)
        .with_permit(&p)
        .with_post_bind(&p)
        .with_informer(&p))
}
