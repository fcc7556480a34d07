//! The plugin contracts in one place (a facade): the extension points
//! (`points`), the context they receive (`context`), what they answer
//! besides results (`status`) and the base trait (`plugin`).

pub use super::context::CycleContext;
pub use super::plugin::Plugin;
pub use super::points::{
    BindAction, BindPlugin, FilterPlugin, FilterRunner, Filtered, InformerPlugin, Nomination,
    Permit, PermitPlugin, PostBindPlugin, PostFilterPlugin, PostFilterResult, PreBindPlugin,
    PreEnqueuePlugin, PreFilterPlugin, PreScorePlugin, QueueSortPlugin, ReservePlugin, ScorePlugin,
    SortKey,
};
pub use super::status::{
    default_normalize, Decision, PluginError, PluginHealth, Rejection, SchedulingError,
    MAX_NODE_SCORE,
};
