//! What every extension point of the scheduling cycle receives.

use crate::model::Pod;

use std::sync::Arc;

use super::cycle_state::CycleState;
use super::device_rank::RankInput;
use super::node_info::NodeInfo;
use super::node_info::Snapshot;
use super::plugin::Plugin;
use super::status::PluginError;

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
    /// The cycle is recorded for an explanation (`--explain`): plugins
    /// keep what only the explanation needs.
    pub explaining: bool,
}

/// Ranks candidate device sets (0..=100 each, higher is better).
pub trait DeviceRanker: Plugin {
    /// One score per set, in order; an empty answer abstains. Called in
    /// the cycle of `ctx.pod`, per feasible node, during Filter.
    fn rank_devices(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
        input: &RankInput,
    ) -> Result<Vec<u8>, PluginError>;
}
