//! A pod assumed on a node: what its binding cycle needs.

use std::sync::Arc;

use crate::model::Pod;

use super::cycle::Placement;
use super::cycle_state::CycleState;
use super::points::BindAction;

/// A pod assumed on a node, on its way to being bound.
#[derive(Debug)]
pub struct Assumption {
    /// The assumed copy: `node_name` set, PreBind labels and annotations
    /// merged.
    pub pod: Arc<Pod>,
    pub placement: Placement,
    pub state: CycleState,
    /// What the binding cycle does, in order: PreBind output, then Bind.
    pub actions: Vec<BindAction>,
    /// Scheduling attempts so far, this one included.
    pub attempts: u32,
}
