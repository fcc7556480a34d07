//! kube-scheduler's volume plugins (1.20 semantics and reasons):
//! VolumeRestrictions, NodeVolumeLimits (CSI), VolumeBinding (with the
//! scheduler's volume binder and its assumptions) and VolumeZone. They
//! read the volume objects from the snapshot's volume store.

pub mod binder;
pub mod binding;
pub mod limits;
pub mod restrictions;
pub mod zone;

#[cfg(test)]
mod tests;
