//! The volume objects (PersistentVolumes, claims, StorageClasses,
//! CSINodes) the volume plugins read: the store with upstream's assume
//! cache, how the scheduler cache is fed, the objects of manifests, and
//! `simulate`'s stand-in for the API server and PV controller when a
//! binding cycle writes volume bindings.

mod feed;
pub mod manifest;
mod store;

pub use manifest::{RawVolume, VolumeManifests};
pub use store::{AssumeError, VolumeKind, VolumeObject, VolumeStore};
