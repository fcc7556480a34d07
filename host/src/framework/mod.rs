//! The scheduling framework: queue, cycle, extension points, NodeInfo.

pub mod cycle;
pub mod fit_error;
pub mod interface;
pub mod node_info;
pub mod profile;
pub mod queue;
pub mod timings;

pub use cycle::{Explanation, Framework, Outcome, Placement};
pub use fit_error::FitError;
pub use interface::{CycleContext, CycleState, FilterPlugin, PluginError, Rejection, ScorePlugin};
pub use node_info::{Change, NodeInfo, Snapshot};
pub use profile::{FilterEntry, Profile, ScoreEntry, WeightedScore};
pub use timings::TimingSink;
