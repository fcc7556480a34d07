//! What every extension point of the scheduling cycle receives.

use crate::model::Pod;

use std::sync::Arc;

use super::device_rank::DeviceRanker;
use super::node_info::Snapshot;

/// What every extension point of the scheduling cycle receives.
pub struct CycleContext<'a> {
    pub pod: &'a Pod,
    pub snapshot: &'a Snapshot,
    /// Identifies the cycle (stable for its duration, unique per process).
    pub cycle: u64,
    /// The framework's workers, for a plugin that splits a walk over every
    /// node (PreFilter, PreScore) across them; `None`: this thread only.
    pub pool: Option<&'a rayon::ThreadPool>,
    /// The profile's device rankers (DynamicResources consults them).
    pub device_rankers: &'a [Arc<dyn DeviceRanker>],
}
