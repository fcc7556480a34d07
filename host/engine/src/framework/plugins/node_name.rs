//! NodeName: a pod that names its node (`spec.nodeName`) fits only there.
//!
//! Pods the scheduler picks up normally have no node name; this filter
//! matters when a caller asks to place (or re-check) a pod that already
//! names one, and keeps upstream's semantics for it.

use std::sync::Arc;

use crate::framework::{CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, Rejection};

pub const NAME: &str = "NodeName";

/// Upstream `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

#[derive(Debug, Clone, Copy, Default)]
pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for NodeName {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        match ctx.pod.node_name.as_deref() {
            Some(wanted) if wanted != node.name() => Err(Rejection::unresolvable(ERR_REASON)),
            _ => Ok(()),
        }
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(NodeName);
    Ok(crate::framework::PluginBundle::new(p.clone()).with_filter(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::framework::plugins::testutil::*;

    #[test]
    fn pod_without_node_name_fits_everywhere() {
        let snap = cluster(vec![N::new("n1").build(), N::new("n2").build()], vec![]);
        let res = filter_all(&NodeName, &P::new("p").build(), &snap);
        assert!(res.values().all(Result::is_ok));
    }

    #[test]
    fn pod_with_node_name_fits_only_that_node() {
        let snap = cluster(vec![N::new("n1").build(), N::new("n2").build()], vec![]);
        let pod = P::new("p").spec("nodeName", json!("n2")).build();
        let res = filter_all(&NodeName, &pod, &snap);
        assert_eq!(res["n1"], unresolvable(ERR_REASON));
        assert_eq!(res["n2"], ok());
    }
}
