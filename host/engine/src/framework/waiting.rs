//! Pods held at Permit (upstream's waiting pods): reserved and assumed,
//! waiting for every Permit plugin that said Wait to allow them, until the
//! first of those plugins' timeouts.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

use super::assumption::Assumption;

/// One waiting pod.
struct Waiting {
    assumption: Box<Assumption>,
    /// Plugin -> deadline (ms), for the plugins that have not allowed yet.
    pending: BTreeMap<String, u64>,
    rejected: Option<String>,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitEnd {
    /// Every plugin allowed: bind.
    Allowed,
    /// A plugin rejected, or its timeout passed: unreserve.
    Rejected(String),
}

/// The waiting pods of one profile. Plugins allow or reject them by uid
/// (a gang plugin allows the whole group when its last member arrives).
#[derive(Default)]
pub struct WaitingPods {
    pods: Mutex<HashMap<String, Waiting>>,
}

impl WaitingPods {
    /// Holds `assumption` until each of `plugins` (name, deadline in ms)
    /// allows it.
    pub fn add(&self, assumption: Box<Assumption>, plugins: BTreeMap<String, u64>) {
        let uid = assumption.pod.uid.clone();
        self.pods.lock().insert(
            uid,
            Waiting {
                assumption,
                pending: plugins,
                rejected: None,
            },
        );
    }

    /// `plugin` allows the pod. Returns whether the pod was waiting.
    pub fn allow(&self, uid: &str, plugin: &str) -> bool {
        match self.pods.lock().get_mut(uid) {
            Some(w) => {
                w.pending.remove(plugin);
                true
            }
            None => false,
        }
    }

    /// Rejects a waiting pod. Returns whether it was waiting.
    pub fn reject(&self, uid: &str, reason: &str) -> bool {
        match self.pods.lock().get_mut(uid) {
            Some(w) => {
                w.rejected.get_or_insert_with(|| reason.to_string());
                true
            }
            None => false,
        }
    }

    /// Uids of the waiting pods, sorted.
    pub fn uids(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pods.lock().keys().cloned().collect();
        v.sort();
        v
    }

    /// The waiting pods (their assumed copies), in uid order, for plugins
    /// that act on a set of them (upstream's `IterateOverWaitingPods`).
    pub fn pods(&self) -> Vec<std::sync::Arc<crate::model::Pod>> {
        let mut v: Vec<_> = self
            .pods
            .lock()
            .values()
            .map(|w| w.assumption.pod.clone())
            .collect();
        v.sort_by(|a, b| a.uid.cmp(&b.uid));
        v
    }

    pub fn is_waiting(&self, uid: &str) -> bool {
        self.pods.lock().contains_key(uid)
    }

    pub fn len(&self) -> usize {
        self.pods.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes and returns the pods whose wait is over at `now_ms`, in uid
    /// order.
    pub fn take_decided(&self, now_ms: u64) -> Vec<(Box<Assumption>, WaitEnd)> {
        let mut pods = self.pods.lock();
        let mut done: Vec<String> = pods
            .iter()
            .filter(|(_, w)| {
                w.rejected.is_some()
                    || w.pending.is_empty()
                    || w.pending.values().any(|d| *d <= now_ms)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        done.sort();
        done.into_iter()
            .filter_map(|uid| pods.remove(&uid))
            .map(|w| {
                let end = match (&w.rejected, w.pending.iter().find(|(_, d)| **d <= now_ms)) {
                    (Some(r), _) => WaitEnd::Rejected(r.clone()),
                    (None, Some((plugin, _))) => WaitEnd::Rejected(format!(
                        "rejected due to timeout after waiting for {plugin}"
                    )),
                    (None, None) => WaitEnd::Allowed,
                };
                (w.assumption, end)
            })
            .collect()
    }

    /// Removes a waiting pod (it was deleted); returns it.
    pub fn remove(&self, uid: &str) -> Option<Box<Assumption>> {
        self.pods.lock().remove(uid).map(|w| w.assumption)
    }

    /// The earliest deadline of any waiting pod.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pods
            .lock()
            .values()
            .flat_map(|w| w.pending.values().copied())
            .min()
    }
}
