//! The trait every plugin implements, whatever its extension points.

use super::cycle_state::CycleState;
use super::status::PluginHealth;

/// Every plugin has a name.
pub trait Plugin: Send + Sync {
    fn name(&self) -> &str;

    /// Its failure counters, when it keeps any.
    fn health(&self) -> Option<PluginHealth> {
        None
    }

    /// Lines `--explain` shows for this plugin about the cycle that just
    /// ran (`state`), which placed the pod on `chosen` (if anywhere):
    /// what it chose beyond a node, such as devices.
    fn explain(&self, _state: &CycleState, _chosen: Option<&str>) -> Vec<String> {
        Vec::new()
    }
}
