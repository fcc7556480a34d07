//! The scheduling framework: the extension points (traits), the profile
//! and the one table of plugins, the cycle, scheduling one pod, the queue
//! and the scheduler cache, NodeInfo, and the native core plugins. It
//! knows plugins only through its traits: the wasm adapter lives in the
//! host crate (`wasmsched::wasm`), which this crate does not depend on.

pub mod advisor;
pub mod assumption;
pub mod binding_cycle;
pub mod cache;
pub mod clock;
pub mod context;
pub mod cycle;
pub mod cycle_state;
pub mod device_rank;
pub mod explain;
pub mod fit_error;
pub mod handle;
pub mod interface;
pub mod metric_values;
pub mod node_info;
pub mod nominated;
pub mod nominator;
pub mod objects;
pub mod plugin;
pub mod plugins;
pub mod points;
pub mod profile;
pub mod queue;
pub mod registry;
pub mod status;
pub mod timings;
pub mod volumes;
pub mod waiting;

pub use advisor::{Advice, Candidate, PreemptionAdvisor, Victim};
pub use binding_cycle::{Assumption, Refusal};
pub use cache::Cache;
pub use clock::Clock;
pub use context::DeviceRanker;
pub use cycle::{CycleResult, Framework, Outcome, Placement};
pub use cycle_state::CycleState;
pub use device_rank::{DeviceSet, RankDevice, RankInput};
pub use explain::{
    CandidateExplanation, Explanation, FilterVerdict, NodeExplanation, PreemptionExplanation,
    ScoreDetail,
};
pub use fit_error::FitError;
pub use interface::{
    BindAction, BindPlugin, CycleContext, Decision, FilterPlugin, FilterRunner, Filtered,
    InformerPlugin, Nomination, Permit, PermitPlugin, Plugin, PluginError, PluginHealth,
    PostBindPlugin, PostFilterPlugin, PostFilterResult, PreBindPlugin, PreEnqueuePlugin,
    PreFilterPlugin, PreScorePlugin, QueueSortPlugin, Rejection, ReservePlugin, SchedulingError,
    ScorePlugin, SortKey, MAX_NODE_SCORE,
};
pub use metric_values::MetricValues;
pub use node_info::{Change, NodeInfo, Snapshot};
pub use profile::{PluginBundle, Point, Profile, WeightedScore};
pub use timings::TimingSink;
pub use waiting::{WaitEnd, WaitingPods};
