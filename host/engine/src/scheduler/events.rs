//! Cluster events the drivers feed the scheduler (upstream's event
//! handlers, `eventhandlers.go`): pods go to the cache and to the
//! profiles' informer plugins, and a deleted pod held at Permit gives its
//! reservation back.

use std::collections::HashSet;

use crate::framework::cache::PodUpdate;
use crate::framework::objects::{object_key, ApiKind, ObjectEvent, PluginReport, StatusWrite};
use crate::framework::{Cache, InformerPlugin};
use crate::model::Pod;

use super::Scheduler;

impl Scheduler {
    /// A pod as the watch (or a manifest) shows it; `terminating`: it has
    /// a deletion timestamp.
    pub fn pod_applied(
        &self,
        cache: &mut Cache,
        pod: Pod,
        terminating: bool,
        now_ms: u64,
    ) -> PodUpdate {
        self.each_informer(|i| i.pod_applied(&pod, terminating));
        cache.pod_applied(pod, terminating, |name| self.serves(name), now_ms)
    }

    /// A pod was deleted. Returns whether the cache changed.
    pub fn pod_deleted(&self, cache: &mut Cache, uid: &str, now_ms: u64) -> bool {
        self.release_waiting(uid);
        self.each_informer(|i| i.pod_deleted(uid));
        cache.pod_deleted(uid, now_ms)
    }

    /// The pods were listed again (after a lost watch): those not in
    /// `seen` were deleted meanwhile. Returns how many left the cache.
    pub fn pods_relisted(&self, cache: &mut Cache, seen: &HashSet<String>, now_ms: u64) -> usize {
        for fw in &self.profiles {
            for uid in fw.waiting.uids() {
                if !seen.contains(&uid) {
                    self.release_waiting(&uid);
                    cache.forget(&uid, now_ms);
                }
            }
        }
        self.each_informer(|i| i.pods_relisted(seen));
        cache.retain_pods(seen, now_ms)
    }

    /// The kinds the profiles' plugins read beside Nodes and Pods, each
    /// once.
    pub fn object_kinds(&self) -> Vec<ApiKind> {
        let mut kinds: Vec<ApiKind> = Vec::new();
        self.each_informer(|i| {
            for k in i.kinds() {
                if !kinds.contains(k) {
                    kinds.push(*k);
                }
            }
        });
        kinds
    }

    /// A change to objects of `kind`, for the plugins that read it.
    pub fn object_event(
        &self,
        cache: &mut Cache,
        kind: &ApiKind,
        event: ObjectEvent<'_>,
        now_ms: u64,
    ) {
        let mut retry = false;
        self.each_informer(|i| {
            if i.kinds().contains(kind) {
                retry |= i.object_event(kind, event);
            }
        });
        if retry {
            cache.queue.on_cluster_event(now_ms);
        }
        // The pods held until this object changes.
        match event {
            ObjectEvent::Applied { object, .. } => {
                let key = object_key(kind, object);
                cache.queue.on_object_event(kind.kind, Some(&key));
            }
            ObjectEvent::Deleted(key) => cache.queue.on_object_event(kind.kind, Some(key)),
            ObjectEvent::Relisted(_) => cache.queue.on_object_event(kind.kind, None),
        }
    }

    /// The statuses the plugins ask to write (drained).
    pub fn status_writes(&self) -> Vec<StatusWrite> {
        let mut out = Vec::new();
        self.each_informer(|i| out.extend(i.status_writes()));
        out
    }

    /// What the plugins add to `simulate`'s report.
    pub fn plugin_reports(&self, cache: &Cache) -> Vec<PluginReport> {
        let mut out = Vec::new();
        self.each_informer(|i| out.extend(i.report(&cache.snapshot)));
        out
    }

    /// The plugins forget what they followed (a new simulation).
    pub fn reset_informers(&self) {
        self.each_informer(|i| i.reset());
    }

    /// A pod held at Permit that is gone leaves the waiting pods and its
    /// reservation is undone (for a gang member, that rejects its waiting
    /// siblings).
    fn release_waiting(&self, uid: &str) {
        for fw in &self.profiles {
            if let Some(a) = fw.waiting.remove(uid) {
                tracing::info!(pod = %a.pod.key(), "deleted while waiting at Permit; reservation released");
                fw.unreserve(&a.pod, &a.state, &a.placement.node);
            }
        }
    }

    /// Calls `f` on each distinct informer plugin of the profiles (a
    /// plugin in several profiles shares its state between them).
    pub(super) fn each_informer(&self, mut f: impl FnMut(&dyn InformerPlugin)) {
        let mut seen: Vec<String> = Vec::new();
        for fw in &self.profiles {
            for i in &fw.profile().informers {
                if !seen.iter().any(|n| n == i.name()) {
                    seen.push(i.name().to_string());
                    f(i.as_ref());
                }
            }
        }
    }
}
