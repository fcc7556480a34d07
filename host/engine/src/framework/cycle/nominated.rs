//! Nominated pods in the Filter phase (upstream's two passes of
//! `PodPassesFiltersOnNode`): on a node with pods nominated to it of equal
//! or higher priority, the pod must also fit with those pods added, so it
//! does not take the room preemption made for them.

use parking_lot::Mutex;

use crate::framework::node_info::NodeInfo;
use crate::framework::nominated::add_nominated;

use super::post_filter::Runner;
use super::verdict::NodeRejection;
use super::Cycle;

impl Cycle<'_> {
    /// Re-checks `nodes` that have nominated pods with them added; a
    /// rejection there is the node's verdict (upstream's first pass).
    pub(super) fn check_nominated(
        &self,
        nodes: &[&NodeInfo],
        verdicts: &mut [Option<NodeRejection>],
    ) {
        let runner = Runner {
            profile: self.profile,
            skipped: &self.skip_filter,
            pool: None,
            recording: false,
            explained: Mutex::new(None),
        };
        for (node, verdict) in nodes.iter().zip(verdicts) {
            let rejection = match add_nominated(&runner, &self.ctx, &self.state, node) {
                Ok(None) => continue,
                Ok(Some((state, with))) => match runner.filter_at(&self.ctx, &state, &with) {
                    Ok(()) => continue,
                    Err(r) => r,
                },
                Err(r) => (0, r),
            };
            let (plugin, r) = rejection;
            *verdict = Some(NodeRejection {
                plugin,
                reasons: r.reasons,
                unresolvable: r.unresolvable,
                error: r.error,
            });
        }
    }
}
