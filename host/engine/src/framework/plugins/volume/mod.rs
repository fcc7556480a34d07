//! kube-scheduler's volume plugins (1.37 semantics and reasons):
//! VolumeRestrictions, NodeVolumeLimits (CSI), VolumeBinding (with the
//! scheduler's volume binder and its assumptions) and VolumeZone. They
//! read the volume objects from the snapshot's volume store.

pub mod action;
pub mod binder;
pub mod binding;
pub mod limits;
pub mod restrictions;
pub mod simulated;
pub mod zone;

pub use action::VolumeAction;

#[cfg(test)]
mod tests;
