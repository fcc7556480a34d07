//! TaintToleration: NoSchedule/NoExecute taints the pod does not tolerate
//! keep it off a node; untolerated PreferNoSchedule taints make the node
//! less attractive.

use std::sync::Arc;

use crate::framework::interface::default_normalize;
use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PluginError, Rejection,
    ScorePlugin,
};
use crate::model::pod::tolerated;
use crate::model::TaintEffect;

pub const NAME: &str = "TaintToleration";

#[derive(Debug, Clone, Copy, Default)]
pub struct TaintToleration;

/// Upstream's Filter reason (`taint_toleration.go`).
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

impl Plugin for TaintToleration {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for TaintToleration {
    /// Upstream (1.26+) reports `node(s) had untolerated taint(s)`; which
    /// taint blocked the pod is in `--explain`'s per-node verdicts only
    /// through this reason, as upstream logs it at V(4).
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        let blocking = node.node.taints.iter().find(|t| {
            matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
                && !tolerated(&ctx.pod.tolerations, t)
        });
        match blocking {
            // Preemption cannot remove a taint.
            Some(_) => Err(Rejection::unresolvable(ERR_REASON_UNTOLERATED)),
            None => Ok(()),
        }
    }
}

impl ScorePlugin for TaintToleration {
    /// The number of PreferNoSchedule taints the pod does not tolerate.
    fn score(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let n = node
            .node
            .taints
            .iter()
            .filter(|t| {
                t.effect == TaintEffect::PreferNoSchedule && !tolerated(&ctx.pod.tolerations, t)
            })
            .count();
        Ok(i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// Fewer untolerated taints score higher.
    fn normalize(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        default_normalize(scores, true);
        Ok(Decision::Run)
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(TaintToleration);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_filter(&p)
        .with_score(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::framework::plugins::testutil::*;

    fn filter(tolerations: Value, taints: Value) -> Result<(), Rejection> {
        let snap = cluster(vec![N::new("n1").taints(taints).build()], vec![]);
        let pod = P::new("p").tolerations(tolerations).build();
        filter_all(&TaintToleration, &pod, &snap)
            .remove("n1")
            .expect("n1")
    }

    #[test]
    fn untainted_node_passes() {
        assert_eq!(filter(json!([]), json!([])), ok());
    }

    #[test]
    fn no_schedule_and_no_execute_taints_reject_unresolvably() {
        assert_eq!(
            filter(
                json!([]),
                json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}])
            ),
            unresolvable("node(s) had untolerated taint(s)")
        );
        assert_eq!(
            filter(
                json!([]),
                json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])
            ),
            unresolvable("node(s) had untolerated taint(s)")
        );
    }

    #[test]
    fn prefer_no_schedule_does_not_filter() {
        assert_eq!(
            filter(
                json!([]),
                json!([{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])
            ),
            ok()
        );
    }

    #[test]
    fn reason_is_upstreams_generic_one() {
        let taints = json!([
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "value": "2", "effect": "NoSchedule"}
        ]);
        let tol_a =
            json!([{"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"}]);
        assert_eq!(
            filter(json!([]), taints.clone()),
            unresolvable("node(s) had untolerated taint(s)")
        );
        assert_eq!(
            filter(tol_a, taints),
            unresolvable("node(s) had untolerated taint(s)")
        );
    }

    #[test]
    fn equal_operator_needs_the_same_value() {
        let taint = json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]);
        let same = json!([{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"}]);
        let other = json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]);
        // An absent operator means Equal.
        let implicit = json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]);
        assert_eq!(filter(same, taint.clone()), ok());
        assert_eq!(filter(implicit, taint.clone()), ok());
        assert_eq!(
            filter(other, taint),
            unresolvable("node(s) had untolerated taint(s)")
        );
    }

    #[test]
    fn exists_operator_ignores_the_value() {
        let taint = json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]);
        let tol = json!([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]);
        assert_eq!(filter(tol, taint), ok());
    }

    #[test]
    fn empty_key_with_exists_tolerates_every_taint() {
        let taints = json!([
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "effect": "NoExecute"}
        ]);
        assert_eq!(
            filter(json!([{"operator": "Exists"}]), taints.clone()),
            ok()
        );
        // ...but only for its effect when it names one.
        assert_eq!(
            filter(
                json!([{"operator": "Exists", "effect": "NoSchedule"}]),
                taints
            ),
            unresolvable("node(s) had untolerated taint(s)")
        );
    }

    #[test]
    fn empty_effect_matches_every_effect() {
        let taints = json!([
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "k", "value": "v", "effect": "NoExecute"}
        ]);
        assert_eq!(
            filter(
                json!([{"key": "k", "operator": "Equal", "value": "v"}]),
                taints
            ),
            ok()
        );
    }

    #[test]
    fn toleration_with_another_effect_does_not_tolerate() {
        let taint = json!([{"key": "k", "value": "v", "effect": "NoExecute"}]);
        let tol = json!([{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]);
        assert_eq!(
            filter(tol, taint),
            unresolvable("node(s) had untolerated taint(s)")
        );
    }

    fn prefer(key: &str) -> Value {
        json!({"key": key, "value": "v", "effect": "PreferNoSchedule"})
    }

    #[test]
    fn score_counts_untolerated_prefer_no_schedule_taints_reversed() {
        // Upstream "the more intolerable taints a node has, the lower score it gets".
        let snap = cluster(
            vec![
                N::new("a").build(),
                N::new("b").taints(json!([prefer("t1")])).build(),
                N::new("c")
                    .taints(json!([prefer("t1"), prefer("t2"), prefer("t3")]))
                    .build(),
            ],
            vec![],
        );
        let pod = P::new("p").build();
        let raw = raw_scores(&TaintToleration, &pod, &snap);
        assert_eq!((raw["a"], raw["b"], raw["c"]), (0, 1, 3));
        let s = score_all(&TaintToleration, &pod, &snap);
        // 100 - 100*1/3 = 67 with integer division.
        assert_eq!((s["a"], s["b"], s["c"]), (100, 67, 0));
    }

    #[test]
    fn score_ignores_tolerated_and_hard_taints() {
        let snap = cluster(
            vec![
                N::new("a").taints(json!([prefer("t1")])).build(),
                N::new("b")
                    .taints(json!([prefer("t2"), {"key": "hard", "effect": "NoSchedule"}]))
                    .build(),
            ],
            vec![],
        );
        let pod = P::new("p")
            .tolerations(json!([{"key": "t1", "operator": "Exists", "effect": "PreferNoSchedule"}]))
            .build();
        let raw = raw_scores(&TaintToleration, &pod, &snap);
        assert_eq!((raw["a"], raw["b"]), (0, 1));
        let s = score_all(&TaintToleration, &pod, &snap);
        assert_eq!((s["a"], s["b"]), (100, 0));
    }

    #[test]
    fn no_prefer_taints_anywhere_scores_all_max() {
        let snap = cluster(vec![N::new("a").build(), N::new("b").build()], vec![]);
        let s = score_all(&TaintToleration, &P::new("p").build(), &snap);
        assert_eq!((s["a"], s["b"]), (100, 100));
    }
}
