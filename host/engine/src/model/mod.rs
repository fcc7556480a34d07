//! The scheduler's own, validated view of Kubernetes objects.
//!
//! Manifests and API objects are converted here once; everything past this
//! point works with types that cannot hold an invalid operator, effect or
//! quantity.

pub mod budget;
pub mod constraints;
pub mod container_resources;
pub mod declared_features;
pub mod dra;
pub mod dra_capacity;
pub mod dra_extended;
pub mod dra_quantity;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod pod_group;
mod pod_requests;
mod pod_spec;
pub mod pod_volume;
pub mod priority;
/// One quantity parser for the scheduler and its plugins (`wasmsched-shared`).
pub use wasmsched_shared::quantity;
pub mod resources;
pub mod selector;
pub mod validation;
pub mod volume;
pub mod workload;

pub use node::{Node, Taint};
pub use pod::{Pod, Toleration};
pub use pod_group::PodGroup;
pub use resources::Resources;

use thiserror::Error;

/// A Kubernetes object that cannot be scheduled with, naming the field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{object}: {field}: {cause}")]
pub struct ModelError {
    /// `Pod ns/name` or `Node name`.
    pub object: String,
    /// The field path, as in the manifest (`spec.taints[0].effect`).
    pub field: String,
    pub cause: String,
}

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "NoSchedule" => Ok(Self::NoSchedule),
            "PreferNoSchedule" => Ok(Self::PreferNoSchedule),
            "NoExecute" => Ok(Self::NoExecute),
            o => Err(format!("unknown taint effect {o:?}")),
        }
    }
}
