//! The trait every plugin implements, whatever its extension points.

use super::status::PluginHealth;

/// Every plugin has a name.
pub trait Plugin: Send + Sync {
    fn name(&self) -> &str;

    /// Its failure counters, when it keeps any.
    fn health(&self) -> Option<PluginHealth> {
        None
    }
}
