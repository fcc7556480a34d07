//! The extension points native plugins implement, in the scheduling
//! framework's vocabulary.

use std::any::Any;
use std::collections::HashMap;

use crate::model::Pod;

use super::node_info::{NodeInfo, Snapshot};

/// Why a node does not fit (one plugin's Filter verdict). A node can fail
/// for several reasons at once (`Insufficient cpu`, `Insufficient memory`);
/// each is counted in the FitError message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reasons: Vec<String>,
    /// UnschedulableAndUnresolvable: no preemption on this node can help.
    pub unresolvable: bool,
}

impl Rejection {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reasons: vec![reason.into()],
            unresolvable: false,
        }
    }

    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self {
            reasons: vec![reason.into()],
            unresolvable: true,
        }
    }
}

/// A plugin could not do its job (not a verdict about the node).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(pub String);

/// Per-cycle scratch space, keyed by plugin name (upstream CycleState).
/// PreFilter/PreScore write, Filter/Score read (possibly in parallel).
#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn Any + Send + Sync>>,
}

impl CycleState {
    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    pub fn read<T: Any + Send + Sync>(&self, key: &'static str) -> Option<&T> {
        self.data.get(key).and_then(|b| b.downcast_ref())
    }

    pub fn read_mut<T: Any + Send + Sync>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data.get_mut(key).and_then(|b| b.downcast_mut())
    }
}

/// What every extension point receives about the cycle.
pub struct CycleContext<'a> {
    pub pod: &'a Pod,
    pub snapshot: &'a Snapshot,
}

/// The PreFilter and Filter extension points.
pub trait FilterPlugin: Send + Sync {
    fn name(&self) -> &'static str;

    /// PreFilter: computes what Filter needs once per cycle. A rejection
    /// here rejects every node with that reason.
    fn pre_filter(&self, _ctx: &CycleContext, _state: &mut CycleState) -> Result<(), Rejection> {
        Ok(())
    }

    /// Filter: whether the pod fits `node`. Called in parallel.
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection>;
}

/// The PreScore, Score and NormalizeScore extension points.
pub trait ScorePlugin: Send + Sync {
    fn name(&self) -> &'static str;

    /// PreScore: computes what Score needs, given the feasible nodes.
    fn pre_score(
        &self,
        _ctx: &CycleContext,
        _state: &mut CycleState,
        _feasible: &[&NodeInfo],
    ) -> Result<(), PluginError> {
        Ok(())
    }

    /// Score: the pod on `node`, raw.
    fn score(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError>;

    /// NormalizeScore: maps the raw scores (same order as `feasible` was
    /// given to PreScore) into 0..=100. The default keeps them as they are.
    fn normalize(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
        _scores: &mut [i64],
    ) -> Result<(), PluginError> {
        Ok(())
    }
}

/// Upstream's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// Upstream's `helper.DefaultNormalizeScore`: scales scores so the highest
/// is `MAX_NODE_SCORE` (optionally reversed).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let mut v = MAX_NODE_SCORE * *s / max;
        if reverse {
            v = MAX_NODE_SCORE - v;
        }
        *s = v;
    }
}
