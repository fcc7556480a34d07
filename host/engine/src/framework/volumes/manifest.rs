//! The volume objects of `simulate`'s manifests: decoded by
//! `crate::manifest`, validated and checked for duplicates here.

use std::collections::HashMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;

use super::store::VolumeObject;
use crate::model::volume::{
    CsiDriver, CsiNode, CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim, StorageClass,
};

/// A decoded volume object, not yet validated (boxed: the API types are
/// large).
#[derive(Debug, Clone)]
pub enum RawVolume {
    Pv(Box<k8s::PersistentVolume>),
    Pvc(Box<k8s::PersistentVolumeClaim>),
    Class(Box<storage::StorageClass>),
    CsiNode(Box<storage::CSINode>),
    CsiDriver(Box<storage::CSIDriver>),
    CsiCapacity(Box<storage::CSIStorageCapacity>),
}

/// The kinds [`VolumeManifests`] reads.
pub const KINDS: [&str; 6] = [
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
];

/// The volume objects found in manifests, in file order.
#[derive(Debug, Default, Clone)]
pub struct VolumeManifests {
    pub objects: Vec<VolumeObject>,
    /// `Kind key` -> where it was first seen.
    seen: HashMap<String, String>,
}

impl VolumeManifests {
    /// Validates `raw` (found at `here`) and keeps it. The error is the
    /// cause: the invalid field, or a duplicate with where the first was.
    pub fn add(&mut self, raw: RawVolume, here: String) -> Result<(), String> {
        let cause = |e: crate::model::ModelError| format!("{}: {}", e.field, e.cause);
        let obj = match raw {
            RawVolume::Pv(o) => VolumeObject::Pv(PersistentVolume::from_k8s(&o).map_err(cause)?),
            RawVolume::Pvc(o) => {
                VolumeObject::Pvc(PersistentVolumeClaim::from_k8s(&o).map_err(cause)?)
            }
            RawVolume::Class(o) => VolumeObject::Class(StorageClass::from_k8s(&o).map_err(cause)?),
            RawVolume::CsiNode(o) => VolumeObject::CsiNode(CsiNode::from_k8s(&o).map_err(cause)?),
            RawVolume::CsiDriver(o) => {
                VolumeObject::CsiDriver(CsiDriver::from_k8s(&o).map_err(cause)?)
            }
            RawVolume::CsiCapacity(o) => {
                VolumeObject::CsiCapacity(CsiStorageCapacity::from_k8s(&o).map_err(cause)?)
            }
        };
        let id = format!("{} {}", obj.kind().as_str(), obj.key());
        if let Some(prev) = self.seen.get(&id) {
            return Err(format!("duplicate {id} (first in {prev})"));
        }
        self.seen.insert(id, here);
        self.objects.push(obj);
        Ok(())
    }
}
