//! The volume objects the scheduler knows, with upstream's assume cache
//! (`pkg/controller/volume/scheduling/scheduler_assume_cache.go`): for
//! PVs and claims it keeps the API's version and the latest one, which
//! Reserve may replace with an assumed binding so that the next cycle
//! cannot hand the same PV to another claim. A newer API version replaces
//! both; Unreserve restores the API's.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::model::volume::{
    CsiDriver, CsiNode, CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim, StorageClass,
};

/// An object the store holds, as the watches and manifests deliver it.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeObject {
    Pv(PersistentVolume),
    Pvc(PersistentVolumeClaim),
    Class(StorageClass),
    CsiNode(CsiNode),
    CsiDriver(CsiDriver),
    CsiCapacity(CsiStorageCapacity),
}

/// The kinds, for deletions and relists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VolumeKind {
    Pv,
    Pvc,
    Class,
    CsiNode,
    CsiDriver,
    CsiCapacity,
}

impl VolumeKind {
    pub const ALL: [VolumeKind; 6] = [
        Self::Pv,
        Self::Pvc,
        Self::Class,
        Self::CsiNode,
        Self::CsiDriver,
        Self::CsiCapacity,
    ];

    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pv => "PersistentVolume",
            Self::Pvc => "PersistentVolumeClaim",
            Self::Class => "StorageClass",
            Self::CsiNode => "CSINode",
            Self::CsiDriver => "CSIDriver",
            Self::CsiCapacity => "CSIStorageCapacity",
        }
    }
}

impl VolumeObject {
    pub fn kind(&self) -> VolumeKind {
        match self {
            Self::Pv(_) => VolumeKind::Pv,
            Self::Pvc(_) => VolumeKind::Pvc,
            Self::Class(_) => VolumeKind::Class,
            Self::CsiNode(_) => VolumeKind::CsiNode,
            Self::CsiDriver(_) => VolumeKind::CsiDriver,
            Self::CsiCapacity(_) => VolumeKind::CsiCapacity,
        }
    }

    /// The store's key: `namespace/name` for claims and capacities, the
    /// name otherwise.
    pub fn key(&self) -> String {
        match self {
            Self::Pv(o) => o.name.clone(),
            Self::Pvc(o) => o.key(),
            Self::Class(o) => o.name.clone(),
            Self::CsiNode(o) => o.name.clone(),
            Self::CsiDriver(o) => o.name.clone(),
            Self::CsiCapacity(o) => o.key(),
        }
    }
}

/// Why an assumption was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssumeError {
    #[error("{0} {1:?} not found")]
    NotFound(&'static str, String),
    /// Upstream's "is out of sync": the object changed since the cycle.
    #[error("{kind} {key:?} is out of sync (stored: {stored}, assume: {assumed})")]
    OutOfSync {
        kind: &'static str,
        key: String,
        stored: u64,
        assumed: u64,
    },
}

/// An object with a `resourceVersion` (0: none, as in a manifest).
trait Versioned: Clone + PartialEq {
    fn version(&self) -> u64;
    fn set_version(&mut self, v: u64);
}

macro_rules! versioned {
    ($($t:ty),*) => {$(
        impl Versioned for $t {
            fn version(&self) -> u64 {
                self.resource_version
            }
            fn set_version(&mut self, v: u64) {
                self.resource_version = v;
            }
        }
    )*};
}

versioned!(
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CsiNode,
    CsiDriver,
    CsiStorageCapacity
);

/// The API's version of an object and the latest (possibly assumed) one.
#[derive(Debug)]
struct Entry<T> {
    api: Arc<T>,
    latest: Arc<T>,
}

/// One kind's objects by key.
#[derive(Debug)]
struct Table<T> {
    kind: &'static str,
    entries: BTreeMap<String, Entry<T>>,
}

impl<T: Versioned> Table<T> {
    fn new(kind: VolumeKind) -> Self {
        Self {
            kind: kind.as_str(),
            entries: BTreeMap::new(),
        }
    }

    /// Upstream's `add`: an object no newer than the stored one is
    /// ignored (a relist repeating it keeps an assumption); an object
    /// without a version (a manifest) always replaces.
    fn apply(&mut self, key: String, obj: T) -> bool {
        if let Some(e) = self.entries.get(&key) {
            let v = obj.version();
            if (v != 0 && v <= e.latest.version()) || (*e.api == obj && *e.latest == obj) {
                return false;
            }
        }
        let obj = Arc::new(obj);
        self.entries.insert(
            key,
            Entry {
                api: obj.clone(),
                latest: obj,
            },
        );
        true
    }

    fn assume(&mut self, key: &str, obj: T) -> Result<(), AssumeError> {
        let e = self
            .entries
            .get_mut(key)
            .ok_or_else(|| AssumeError::NotFound(self.kind, key.to_string()))?;
        let (stored, assumed) = (e.latest.version(), obj.version());
        if assumed < stored {
            return Err(AssumeError::OutOfSync {
                kind: self.kind,
                key: key.to_string(),
                stored,
                assumed,
            });
        }
        e.latest = Arc::new(obj);
        Ok(())
    }

    fn restore(&mut self, key: &str) {
        if let Some(e) = self.entries.get_mut(key) {
            e.latest = e.api.clone();
        }
    }

    /// `simulate`'s API server: the latest version with `f` applied
    /// becomes the API's, one version higher.
    fn update_api(&mut self, key: &str, f: impl FnOnce(&mut T)) {
        if let Some(e) = self.entries.get_mut(key) {
            let mut o = (*e.latest).clone();
            f(&mut o);
            o.set_version(e.latest.version().max(e.api.version()) + 1);
            e.api = Arc::new(o);
            e.latest = e.api.clone();
        }
    }

    fn retain(&mut self, seen: &HashSet<String>) -> usize {
        let before = self.entries.len();
        self.entries.retain(|k, _| seen.contains(k));
        before - self.entries.len()
    }
}

#[derive(Debug)]
struct Inner {
    pvs: Table<PersistentVolume>,
    pvcs: Table<PersistentVolumeClaim>,
    classes: Table<StorageClass>,
    csi_nodes: Table<CsiNode>,
    csi_drivers: Table<CsiDriver>,
    capacities: Table<CsiStorageCapacity>,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            pvs: Table::new(VolumeKind::Pv),
            pvcs: Table::new(VolumeKind::Pvc),
            classes: Table::new(VolumeKind::Class),
            csi_nodes: Table::new(VolumeKind::CsiNode),
            csi_drivers: Table::new(VolumeKind::CsiDriver),
            capacities: Table::new(VolumeKind::CsiCapacity),
        }
    }
}

/// The store. Shared (behind an `Arc`) by the snapshot and the plugins'
/// cycle state; its lock is always taken last and held only briefly.
#[derive(Debug, Default)]
pub struct VolumeStore {
    inner: RwLock<Inner>,
}

impl VolumeStore {
    /// A PV, as assumed (upstream's `GetPV`).
    pub fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.inner
            .read()
            .pvs
            .entries
            .get(name)
            .map(|e| e.latest.clone())
    }

    /// A PV as the API last reported it (upstream's `GetAPIPV`, the lister).
    pub fn api_pv(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.inner
            .read()
            .pvs
            .entries
            .get(name)
            .map(|e| e.api.clone())
    }

    /// The PVs of a class, as assumed, by name.
    pub fn pvs_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.inner
            .read()
            .pvs
            .entries
            .values()
            .filter(|e| e.latest.class == class)
            .map(|e| e.latest.clone())
            .collect()
    }

    /// A claim, as assumed.
    pub fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        let key = crate::model::volume::claim_key(namespace, name);
        self.inner
            .read()
            .pvcs
            .entries
            .get(&key)
            .map(|e| e.latest.clone())
    }

    /// A claim as the API last reported it.
    pub fn api_pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.api_pvc_by_key(&crate::model::volume::claim_key(namespace, name))
    }

    /// A claim as the API last reported it, by `namespace/name`.
    pub fn api_pvc_by_key(&self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.inner
            .read()
            .pvcs
            .entries
            .get(key)
            .map(|e| e.api.clone())
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.inner
            .read()
            .classes
            .entries
            .get(name)
            .map(|e| e.api.clone())
    }

    pub fn csi_node(&self, name: &str) -> Option<Arc<CsiNode>> {
        self.inner
            .read()
            .csi_nodes
            .entries
            .get(name)
            .map(|e| e.api.clone())
    }

    pub fn csi_driver(&self, name: &str) -> Option<Arc<CsiDriver>> {
        self.inner
            .read()
            .csi_drivers
            .entries
            .get(name)
            .map(|e| e.api.clone())
    }

    /// The first CSIStorageCapacity of `class` (by namespace and name) that
    /// holds `bytes` and is reachable from a node with `labels`, as its
    /// `capacity` (upstream's loop in `hasEnoughCapacity`); `None` when
    /// there is none.
    pub fn capacity_for(
        &self,
        class: &str,
        bytes: i64,
        labels: &BTreeMap<String, String>,
    ) -> Option<Option<i64>> {
        self.inner
            .read()
            .capacities
            .entries
            .values()
            .map(|e| &e.api)
            .find(|c| c.class == class && c.sufficient(bytes) && c.reachable_from(labels))
            .map(|c| c.capacity)
    }

    /// Objects of a kind.
    pub fn count(&self, kind: VolumeKind) -> usize {
        let i = self.inner.read();
        match kind {
            VolumeKind::Pv => i.pvs.entries.len(),
            VolumeKind::Pvc => i.pvcs.entries.len(),
            VolumeKind::Class => i.classes.entries.len(),
            VolumeKind::CsiNode => i.csi_nodes.entries.len(),
            VolumeKind::CsiDriver => i.csi_drivers.entries.len(),
            VolumeKind::CsiCapacity => i.capacities.entries.len(),
        }
    }

    /// Adds or updates an object as the API reports it. Returns whether
    /// anything changed.
    pub fn apply(&self, obj: VolumeObject) -> bool {
        let key = obj.key();
        let mut i = self.inner.write();
        match obj {
            VolumeObject::Pv(o) => i.pvs.apply(key, o),
            VolumeObject::Pvc(o) => i.pvcs.apply(key, o),
            VolumeObject::Class(o) => i.classes.apply(key, o),
            VolumeObject::CsiNode(o) => i.csi_nodes.apply(key, o),
            VolumeObject::CsiDriver(o) => i.csi_drivers.apply(key, o),
            VolumeObject::CsiCapacity(o) => i.capacities.apply(key, o),
        }
    }

    /// Forgets a deleted object. Returns whether it was there.
    pub fn delete(&self, kind: VolumeKind, key: &str) -> bool {
        let mut i = self.inner.write();
        match kind {
            VolumeKind::Pv => i.pvs.entries.remove(key).is_some(),
            VolumeKind::Pvc => i.pvcs.entries.remove(key).is_some(),
            VolumeKind::Class => i.classes.entries.remove(key).is_some(),
            VolumeKind::CsiNode => i.csi_nodes.entries.remove(key).is_some(),
            VolumeKind::CsiDriver => i.csi_drivers.entries.remove(key).is_some(),
            VolumeKind::CsiCapacity => i.capacities.entries.remove(key).is_some(),
        }
    }

    /// After a relist: drops the objects of `kind` not `seen`. Returns how
    /// many.
    pub fn retain(&self, kind: VolumeKind, seen: &HashSet<String>) -> usize {
        let mut i = self.inner.write();
        match kind {
            VolumeKind::Pv => i.pvs.retain(seen),
            VolumeKind::Pvc => i.pvcs.retain(seen),
            VolumeKind::Class => i.classes.retain(seen),
            VolumeKind::CsiNode => i.csi_nodes.retain(seen),
            VolumeKind::CsiDriver => i.csi_drivers.retain(seen),
            VolumeKind::CsiCapacity => i.capacities.retain(seen),
        }
    }

    /// Reserve: `pv` (with the binding written into it) is what later
    /// cycles see until the API reports a newer version or it is restored.
    pub fn assume_pv(&self, pv: PersistentVolume) -> Result<(), AssumeError> {
        let key = pv.name.clone();
        self.inner.write().pvs.assume(&key, pv)
    }

    /// Reserve: the claim as it will be written (its selected node).
    pub fn assume_pvc(&self, pvc: PersistentVolumeClaim) -> Result<(), AssumeError> {
        let key = pvc.key();
        self.inner.write().pvcs.assume(&key, pvc)
    }

    /// Unreserve: back to the API's version.
    pub fn restore_pv(&self, name: &str) {
        self.inner.write().pvs.restore(name);
    }

    pub fn restore_pvc(&self, key: &str) {
        self.inner.write().pvcs.restore(key);
    }

    /// `simulate`'s API server: a write to a PV (its assumption
    /// included) that the watch then reports, one version higher.
    pub fn update_pv_api(&self, name: &str, f: impl FnOnce(&mut PersistentVolume)) {
        self.inner.write().pvs.update_api(name, f);
    }

    /// `simulate`'s API server: a write to a claim.
    pub fn update_pvc_api(&self, key: &str, f: impl FnOnce(&mut PersistentVolumeClaim)) {
        self.inner.write().pvcs.update_api(key, f);
    }
}
