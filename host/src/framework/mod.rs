//! The scheduling framework: queue, cycle, extension points, NodeInfo.

pub mod interface;
pub mod node_info;

pub use interface::{CycleContext, CycleState, FilterPlugin, PluginError, Rejection, ScorePlugin};
pub use node_info::{NodeInfo, Snapshot};
