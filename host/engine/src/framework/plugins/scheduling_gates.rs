//! SchedulingGates (upstream's PreEnqueue plugin of that name): a pod with
//! `spec.schedulingGates` (Kueue's `kueue.x-k8s.io/admission`, for one) is
//! held, never attempted and given no event, until an update removes its
//! last gate. The API server refuses to bind a gated pod.

use std::sync::Arc;

use crate::framework::points::Release;
use crate::framework::{Plugin, PluginBundle, PreEnqueuePlugin};
use crate::model::Pod;

pub const NAME: &str = "SchedulingGates";

#[derive(Debug, Clone, Copy, Default)]
pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &str {
        NAME
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &Pod) -> Result<(), String> {
        if pod.scheduling_gates.is_empty() {
            Ok(())
        } else {
            // Upstream's message (Go's %v of the names).
            Err(format!(
                "waiting for scheduling gates: [{}]",
                pod.scheduling_gates.join(" ")
            ))
        }
    }

    /// Only the pod's own update removes a gate.
    fn released_by(&self, _pod: &Pod) -> Release {
        Release::PodUpdate
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(SchedulingGates);
    Ok(PluginBundle::new(p.clone()).with_pre_enqueue(&p))
}
