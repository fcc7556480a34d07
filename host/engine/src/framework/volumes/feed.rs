//! The scheduler cache's side of the volume objects: the watches (and
//! `simulate`'s manifests) apply them here, and any change gives the
//! unschedulable pods another chance, as upstream's volume events do.

use std::collections::HashSet;

use super::store::{VolumeKind, VolumeObject};
use crate::framework::Cache;

impl Cache {
    /// Adds or updates a volume object. Returns whether anything changed.
    pub fn volume_applied(&mut self, obj: VolumeObject, now_ms: u64) -> bool {
        let changed = self.snapshot.volumes().apply(obj);
        if changed {
            self.queue.on_cluster_event(now_ms);
        }
        changed
    }

    /// Forgets a deleted volume object.
    pub fn volume_deleted(&mut self, kind: VolumeKind, key: &str, now_ms: u64) -> bool {
        let removed = self.snapshot.volumes().delete(kind, key);
        if removed {
            self.queue.on_cluster_event(now_ms);
        }
        removed
    }

    /// After a relist: drops the objects of `kind` that are gone.
    pub fn retain_volumes(
        &mut self,
        kind: VolumeKind,
        seen: &HashSet<String>,
        now_ms: u64,
    ) -> usize {
        let gone = self.snapshot.volumes().retain(kind, seen);
        if gone > 0 {
            self.queue.on_cluster_event(now_ms);
        }
        gone
    }
}
