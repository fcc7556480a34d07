//! The directory of PodGroups and their member pods, shared by every
//! profile (upstream's PodGroup informer and pod lister, plus the
//! coscheduling plugin's per-group state). `simulate` and `run` feed it
//! (PodGroup objects, every pod carrying the group label); the plugin
//! reads and updates it in its extension points; the drivers drain what
//! it asks of them (pods to activate, statuses to write).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::framework::SortKey;
use crate::model::pod_group::{PodGroupStatus, POD_GROUP_LABEL};
use crate::model::{Pod, PodGroup};

use super::gang::{Group, Member};

/// The key of the group a pod belongs to (`namespace/name`), if any.
pub fn group_key(pod: &Pod) -> Option<String> {
    pod.labels
        .get(POD_GROUP_LABEL)
        .filter(|n| !n.is_empty())
        .map(|n| format!("{}/{}", pod.namespace, n))
}

#[derive(Default)]
pub(super) struct Inner {
    pub groups: HashMap<String, Group>,
    /// Member uid -> its group's key.
    member_of: HashMap<String, String>,
    /// Pods to move to activeQ (drained by the driver).
    pub activate: HashSet<String>,
    /// Groups whose status may have changed.
    pub dirty: BTreeSet<String>,
}

impl Inner {
    pub fn group_mut(&mut self, key: &str) -> &mut Group {
        self.groups.entry(key.to_string()).or_default()
    }

    /// A member was bound (PostBind): it holds its node from now on.
    pub fn bound(&mut self, key: &str, pod: &Pod, node: &str) {
        self.member_of.insert(pod.uid.clone(), key.to_string());
        self.dirty.insert(key.to_string());
        let g = self.group_mut(key);
        g.reserved.remove(&pod.uid);
        let m = g.members.entry(pod.uid.clone()).or_insert_with(|| Member {
            pod: Arc::new(pod.clone()),
            node: None,
        });
        m.node = Some(node.to_string());
    }

    /// Asks the driver to activate the group's pending members.
    pub fn activate_pending(&mut self, key: &str) {
        if let Some(g) = self.groups.get(key) {
            let pending = g.pending_members().map(|m| m.pod.uid.clone());
            self.activate.extend(pending);
        }
    }
}

/// PodGroups and their members. Cheap to share; every method locks once.
#[derive(Default)]
pub struct PodGroups {
    inner: Mutex<Inner>,
}

impl PodGroups {
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Forgets every group and member (a new simulation).
    pub fn reset(&self) {
        *self.inner.lock() = Inner::default();
    }

    /// A PodGroup was added or changed (`Err`: it cannot be used; its
    /// members are unschedulable with the message).
    pub fn apply_group(&self, key: &str, group: Result<PodGroup, String>) {
        let mut inner = self.inner.lock();
        let g = inner.group_mut(key);
        // A status update (ours, echoed by the watch) changes nothing.
        let spec_of = |r: &Result<PodGroup, String>| {
            r.clone().map(|mut p| {
                p.status = Default::default();
                p
            })
        };
        let changed = g.spec.as_ref().map(spec_of) != Some(spec_of(&group));
        g.spec = Some(group);
        if changed {
            g.reset_round();
            inner.dirty.insert(key.to_string());
            inner.activate_pending(key);
        }
    }

    /// A PodGroup was deleted: its members wait for it again.
    pub fn remove_group(&self, key: &str) {
        let mut inner = self.inner.lock();
        if let Some(g) = inner.groups.get_mut(key) {
            g.spec = None;
            g.reset_round();
        }
        inner.dirty.remove(key);
    }

    /// Every PodGroup known, for relists: the keys.
    pub fn group_keys(&self) -> Vec<String> {
        let inner = self.inner.lock();
        let mut v: Vec<String> = inner
            .groups
            .iter()
            .filter(|(_, g)| g.spec.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }

    /// A pod as the watch (or a manifest) shows it; `terminating` pods
    /// leave their group.
    pub fn apply_pod(&self, pod: &Pod, terminating: bool) {
        let key = if terminating { None } else { group_key(pod) };
        let mut inner = self.inner.lock();
        if let Some(old) = inner.member_of.get(&pod.uid).cloned() {
            if Some(&old) != key.as_ref() {
                inner.member_of.remove(&pod.uid);
                if let Some(g) = inner.groups.get_mut(&old) {
                    g.members.remove(&pod.uid);
                }
                inner.dirty.insert(old);
            }
        }
        let Some(key) = key else { return };
        inner.member_of.insert(pod.uid.clone(), key.clone());
        let g = inner.group_mut(&key);
        let before = g.live_members();
        let node = pod.node_name.clone();
        g.members.insert(
            pod.uid.clone(),
            Member {
                pod: Arc::new(pod.clone()),
                node,
            },
        );
        g.forget_allowed();
        let min = g.min_member();
        let complete_now = before < min && g.live_members() >= min;
        inner.dirty.insert(key.clone());
        if complete_now {
            inner.activate_pending(&key);
        }
    }

    /// After a relist: forgets the members not `seen`.
    pub fn retain_pods(&self, seen: &HashSet<String>) {
        let gone: Vec<String> = {
            let inner = self.inner.lock();
            inner
                .member_of
                .keys()
                .filter(|uid| !seen.contains(*uid))
                .cloned()
                .collect()
        };
        for uid in gone {
            self.delete_pod(&uid);
        }
    }

    /// A pod was deleted.
    pub fn delete_pod(&self, uid: &str) {
        let mut inner = self.inner.lock();
        let Some(key) = inner.member_of.remove(uid) else {
            return;
        };
        if let Some(g) = inner.groups.get_mut(&key) {
            g.members.remove(uid);
            g.reserved.remove(uid);
            g.forget_allowed();
        }
        inner.dirty.insert(key);
    }

    /// Pods the plugin asks to move to activeQ (a group became complete,
    /// its PodGroup arrived, its first member waits at Permit, its backoff
    /// ended at `now_ms`).
    pub fn take_activations(&self, now_ms: u64) -> HashSet<String> {
        let mut inner = self.inner.lock();
        let ended: Vec<String> = inner
            .groups
            .iter_mut()
            .filter_map(|(k, g)| g.end_backoff(now_ms).then(|| k.clone()))
            .collect();
        for k in ended {
            inner.activate_pending(&k);
        }
        std::mem::take(&mut inner.activate)
    }

    /// The statuses of the groups that changed since the last call, with
    /// their PodGroups and whether scheduling them started.
    pub fn take_statuses(&self) -> Vec<(PodGroup, PodGroupStatus, bool)> {
        let mut inner = self.inner.lock();
        let dirty = std::mem::take(&mut inner.dirty);
        dirty
            .into_iter()
            .filter_map(|k| {
                let g = inner.groups.get(&k)?;
                let spec = g.spec.as_ref()?.as_ref().ok()?;
                Some((spec.clone(), g.status(), g.started))
            })
            .collect()
    }

    /// Why a waiting member waits, for its event.
    pub fn waiting_message(&self, pod: &Pod, node: &str) -> Option<String> {
        let key = group_key(pod)?;
        let inner = self.inner.lock();
        let g = inner.groups.get(&key)?;
        Some(format!(
            "Reserved on {node}; waiting at Permit for pod group {key}: {} of {} members reserved",
            g.assigned(),
            g.min_member()
        ))
    }

    /// Every group with members or a PodGroup, in key order (reports).
    pub fn summaries(&self) -> Vec<Summary> {
        let inner = self.inner.lock();
        let mut out: Vec<Summary> = inner
            .groups
            .iter()
            .filter(|(_, g)| g.spec.is_some() || !g.members.is_empty())
            .map(|(k, g)| Summary {
                key: k.clone(),
                spec: g.spec.clone(),
                status: g.status(),
                members: g.members.values().cloned().collect(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

/// One group as reports show it.
#[derive(Debug, Clone)]
pub struct Summary {
    pub key: String,
    /// `None`: no PodGroup object; `Err`: it cannot be used.
    pub spec: Option<Result<PodGroup, String>>,
    pub status: PodGroupStatus,
    /// In uid order.
    pub members: Vec<Member>,
}

impl PodGroups {
    /// Coscheduling's QueueSort key (upstream `Less`): a member sorts by
    /// its group's creation time, then the group's key, so the members
    /// of a group leave the queue together, oldest group first.
    pub fn sort_key(&self, pod: &Pod) -> Option<SortKey> {
        let key = group_key(pod)?;
        let inner = self.inner.lock();
        let created = inner
            .groups
            .get(&key)
            .and_then(|g| g.spec.as_ref())
            .and_then(|s| s.as_ref().ok())
            .map_or(pod.creation_ms, |s| s.creation_ms);
        Some(SortKey {
            time_ms: created,
            group: key,
        })
    }
}
