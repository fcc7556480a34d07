//! NodeUnschedulable: keeps pods off cordoned nodes (`spec.unschedulable`)
//! unless they tolerate the taint a cordon implies.

use std::sync::Arc;

use crate::framework::{CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, Rejection};
use crate::model::pod::tolerated;
use crate::model::{Taint, TaintEffect};

pub const NAME: &str = "NodeUnschedulable";

/// Upstream `ErrReasonUnschedulable`.
pub const ERR_REASON: &str = "node(s) were unschedulable";

/// The taint kube-scheduler treats `spec.unschedulable` as (the node
/// lifecycle controller also adds it), so DaemonSet-style pods that
/// tolerate it may still land on cordoned nodes.
pub use crate::model::node::UNSCHEDULABLE_TAINT_KEY as TAINT_KEY;

#[derive(Debug, Clone, Copy, Default)]
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        if !node.node.unschedulable {
            return Ok(());
        }
        let taint = Taint {
            key: TAINT_KEY.to_string(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        };
        if tolerated(&ctx.pod.tolerations, &taint) {
            Ok(())
        } else {
            // No preemption can uncordon a node.
            Err(Rejection::unresolvable(ERR_REASON))
        }
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(NodeUnschedulable);
    Ok(crate::framework::PluginBundle::new(p.clone()).with_filter(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::framework::plugins::testutil::*;

    fn run(pod: P, node: N) -> Result<(), Rejection> {
        let snap = cluster(vec![node.build()], vec![]);
        filter_all(&NodeUnschedulable, &pod.build(), &snap)
            .remove("n1")
            .expect("n1")
    }

    #[test]
    fn schedulable_node_passes() {
        assert_eq!(run(P::new("p"), N::new("n1")), ok());
    }

    #[test]
    fn cordoned_node_rejects_unresolvably() {
        assert_eq!(
            run(P::new("p"), N::new("n1").unschedulable()),
            unresolvable(ERR_REASON)
        );
    }

    #[test]
    fn toleration_of_the_unschedulable_taint_lets_the_pod_in() {
        let exists = P::new("p").tolerations(json!([
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
        ]));
        assert_eq!(run(exists, N::new("n1").unschedulable()), ok());
        // An empty key with Exists tolerates everything.
        let all = P::new("p").tolerations(json!([{"operator": "Exists"}]));
        assert_eq!(run(all, N::new("n1").unschedulable()), ok());
    }

    #[test]
    fn toleration_for_another_effect_or_key_does_not_help() {
        let wrong_effect = P::new("p").tolerations(json!([
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}
        ]));
        assert_eq!(
            run(wrong_effect, N::new("n1").unschedulable()),
            unresolvable(ERR_REASON)
        );
        let wrong_key = P::new("p").tolerations(json!([{"key": "other", "operator": "Exists"}]));
        assert_eq!(
            run(wrong_key, N::new("n1").unschedulable()),
            unresolvable(ERR_REASON)
        );
    }
}
