//! PrioritySort (upstream's default QueueSort): higher priority first,
//! then the older pod. The queue compares priorities itself; this
//! plugin's key is the pod's creation time.

use std::sync::Arc;

use crate::framework::{Plugin, PluginBundle, QueueSortPlugin, SortKey};
use crate::model::Pod;

pub const NAME: &str = "PrioritySort";

#[derive(Debug, Clone, Copy, Default)]
pub struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &str {
        NAME
    }
}

impl QueueSortPlugin for PrioritySort {
    fn sort_key(&self, _pod: &Pod) -> Option<SortKey> {
        None
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(PrioritySort);
    Ok(PluginBundle::new(p.clone()).with_queue_sort(&p))
}
