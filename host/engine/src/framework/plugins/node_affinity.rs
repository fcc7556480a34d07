//! NodeAffinity: `nodeSelector` and required node affinity filter nodes;
//! preferred node affinity terms add their weights to a node's score.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::interface::default_normalize;
use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PluginError,
    PreFilterPlugin, Rejection, ScorePlugin,
};
use crate::model::selector::SelectorOp;
use crate::model::Pod;

use super::helpers::matches_required_node_affinity;

pub const NAME: &str = "NodeAffinity";

/// Upstream `ErrReasonPod`.
pub const ERR_REASON: &str = "node(s) didn't match Pod's node affinity/selector";

/// Upstream `errReasonConflict`: every required term names nodes by
/// `metadata.name`, and no name is left.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

#[derive(Debug, Clone, Copy, Default)]
pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &str {
        NAME
    }
}

/// The node names the required terms allow, when every term names its
/// nodes (`matchFields: metadata.name In [...]`, intersected within a term,
/// united across terms); `None` when some term allows any name.
fn named_nodes(pod: &Pod) -> Option<BTreeSet<String>> {
    let terms = pod.node_affinity.required.as_ref()?;
    if terms.is_empty() {
        return None;
    }
    let mut names = BTreeSet::new();
    for term in terms {
        let mut term_names: Option<BTreeSet<String>> = None;
        for r in &term.match_fields {
            if r.key != "metadata.name" || r.op != SelectorOp::In {
                continue;
            }
            let values: BTreeSet<String> = r.values.iter().cloned().collect();
            term_names = Some(match term_names {
                None => values,
                Some(t) => t.intersection(&values).cloned().collect(),
            });
        }
        names.extend(term_names?);
    }
    Some(names)
}

/// Upstream's PreFilter: Skip when there is nothing to match; a conflict
/// when the terms' node names leave none; the named nodes as the
/// PreFilterResult.
impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        _state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let pod = ctx.pod;
        if pod.node_affinity.required.is_none() && pod.node_selector.is_empty() {
            return Ok(Decision::Skip);
        }
        match named_nodes(pod) {
            Some(names) if names.is_empty() => Err(Rejection::unresolvable(ERR_REASON_CONFLICT)),
            _ => Ok(Decision::Run),
        }
    }

    fn pre_filter_nodes(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
    ) -> Option<BTreeSet<String>> {
        named_nodes(ctx.pod)
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        if matches_required_node_affinity(ctx.pod, &node.node) {
            Ok(())
        } else {
            // Labels do not change by preempting pods.
            Err(Rejection::unresolvable(ERR_REASON))
        }
    }
}

impl ScorePlugin for NodeAffinity {
    /// The sum of the weights of the preferred terms the node matches
    /// (an empty term matches nothing, as upstream).
    fn score(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let n = &node.node;
        Ok(ctx
            .pod
            .node_affinity
            .preferred
            .iter()
            .filter(|(_, term)| term.matches(&n.name, &n.labels))
            .map(|(w, _)| i64::from(*w))
            .sum())
    }

    fn normalize(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        default_normalize(scores, false);
        Ok(Decision::Run)
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(NodeAffinity);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_score(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::framework::plugins::testutil::*;

    fn required(terms: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]})
    }

    /// Filter verdicts of `pod` against nodes labelled as given.
    fn fits(pod: P, nodes: &[(&str, &[(&str, &str)])]) -> Vec<bool> {
        let snap = cluster(
            nodes
                .iter()
                .map(|(n, l)| N::new(n).labels(l).build())
                .collect(),
            vec![],
        );
        let res = filter_all(&NodeAffinity, &pod.build(), &snap);
        nodes
            .iter()
            .map(|(n, _)| match &res[*n] {
                Ok(()) => true,
                Err(r) => {
                    assert_eq!(r, &Rejection::unresolvable(ERR_REASON));
                    false
                }
            })
            .collect()
    }

    const FOO_BAR: &[(&str, &str)] = &[("foo", "bar")];
    const FOO_BAZ: &[(&str, &str)] = &[("foo", "baz")];
    const NONE: &[(&str, &str)] = &[];

    #[test]
    fn node_selector_requires_every_label() {
        let pod = P::new("p").node_selector(&[("foo", "bar"), ("zone", "a")]);
        let v = fits(
            pod,
            &[
                ("n1", FOO_BAR),
                ("n2", &[("foo", "bar"), ("zone", "a"), ("x", "y")]),
            ],
        );
        assert_eq!(v, vec![false, true]);
    }

    #[test]
    fn operator_in_and_not_in() {
        let pod = P::new("p").affinity(required(json!([expr("foo", "In", &["bar", "qux"])])));
        assert_eq!(
            fits(pod, &[("n1", FOO_BAR), ("n2", FOO_BAZ), ("n3", NONE)]),
            vec![true, false, false]
        );
        // NotIn also matches a node without the label.
        let pod = P::new("p").affinity(required(json!([expr("foo", "NotIn", &["bar"])])));
        assert_eq!(
            fits(pod, &[("n1", FOO_BAR), ("n2", FOO_BAZ), ("n3", NONE)]),
            vec![false, true, true]
        );
    }

    #[test]
    fn operator_exists_and_does_not_exist() {
        let pod = P::new("p").affinity(required(
            json!([{"matchExpressions": [{"key": "foo", "operator": "Exists"}]}]),
        ));
        assert_eq!(
            fits(pod, &[("n1", FOO_BAR), ("n2", NONE)]),
            vec![true, false]
        );
        let pod = P::new("p").affinity(required(
            json!([{"matchExpressions": [{"key": "foo", "operator": "DoesNotExist"}]}]),
        ));
        assert_eq!(
            fits(pod, &[("n1", FOO_BAR), ("n2", NONE)]),
            vec![false, true]
        );
    }

    #[test]
    fn operator_gt_and_lt_compare_integers() {
        let nodes: &[(&str, &[(&str, &str)])] = &[
            ("n1", &[("gpus", "4")]),
            ("n2", &[("gpus", "2")]),
            ("n3", &[("gpus", "many")]),
            ("n4", NONE),
        ];
        let gt = P::new("p").affinity(required(json!([expr("gpus", "Gt", &["2"])])));
        assert_eq!(fits(gt, nodes), vec![true, false, false, false]);
        let lt = P::new("p").affinity(required(json!([expr("gpus", "Lt", &["4"])])));
        assert_eq!(fits(lt, nodes), vec![false, true, false, false]);
    }

    #[test]
    fn match_fields_metadata_name() {
        let pod = P::new("p").affinity(required(json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
        ])));
        assert_eq!(fits(pod, &[("n1", NONE), ("n2", NONE)]), vec![false, true]);
    }

    #[test]
    fn expressions_and_fields_in_one_term_are_anded() {
        let pod = P::new("p").affinity(required(json!([{
            "matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]
        }])));
        assert_eq!(
            fits(pod, &[("n1", FOO_BAR), ("n2", FOO_BAR), ("n3", FOO_BAZ)]),
            vec![false, true, false]
        );
    }

    #[test]
    fn terms_are_ored() {
        let pod = P::new("p").affinity(required(json!([
            expr("foo", "In", &["bar"]),
            expr("zone", "In", &["a"])
        ])));
        assert_eq!(
            fits(
                pod,
                &[("n1", FOO_BAR), ("n2", &[("zone", "a")]), ("n3", FOO_BAZ)]
            ),
            vec![true, true, false]
        );
    }

    #[test]
    fn an_empty_term_matches_nothing() {
        let pod = P::new("p").affinity(required(json!([{}])));
        assert_eq!(
            fits(pod, &[("n1", FOO_BAR), ("n2", NONE)]),
            vec![false, false]
        );
        let pod = P::new("p").affinity(required(json!([{"matchExpressions": []}])));
        assert_eq!(fits(pod, &[("n1", FOO_BAR)]), vec![false]);
    }

    #[test]
    fn node_selector_and_affinity_must_both_match() {
        let pod = P::new("p")
            .node_selector(&[("zone", "a")])
            .affinity(required(json!([expr("foo", "In", &["bar"])])));
        let v = fits(
            pod,
            &[
                ("n1", FOO_BAR),
                ("n2", &[("zone", "a")]),
                ("n3", &[("foo", "bar"), ("zone", "a")]),
            ],
        );
        assert_eq!(v, vec![false, false, true]);
    }

    #[test]
    fn no_constraints_fit_everywhere() {
        assert_eq!(
            fits(P::new("p"), &[("n1", FOO_BAR), ("n2", NONE)]),
            vec![true, true]
        );
    }

    #[test]
    fn preferred_terms_score_by_weight() {
        // Upstream TestNodeAffinityPriority "all machines matches the preferred
        // scheduling requirements of pod but with different priorities".
        let pod = P::new("p")
            .affinity(json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 2, "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}},
                {"weight": 4, "preference": {"matchExpressions": [{"key": "key", "operator": "In", "values": ["value"]}]}},
                {"weight": 5, "preference": {"matchExpressions": [
                    {"key": "foo", "operator": "In", "values": ["bar"]},
                    {"key": "key", "operator": "In", "values": ["value"]},
                    {"key": "az", "operator": "In", "values": ["az1"]}
                ]}}
            ]}}))
            .build();
        let snap = cluster(
            vec![
                N::new("machine1").labels(&[("foo", "bar")]).build(),
                N::new("machine5")
                    .labels(&[("foo", "bar"), ("key", "value"), ("az", "az1")])
                    .build(),
                N::new("machine2").labels(&[("key", "value")]).build(),
                N::new("machine3").labels(&[("other", "x")]).build(),
            ],
            vec![],
        );
        let raw = raw_scores(&NodeAffinity, &pod, &snap);
        assert_eq!(
            (
                raw["machine1"],
                raw["machine5"],
                raw["machine2"],
                raw["machine3"]
            ),
            (2, 11, 4, 0)
        );
        let s = score_all(&NodeAffinity, &pod, &snap);
        assert_eq!(
            (s["machine1"], s["machine5"], s["machine2"], s["machine3"]),
            (18, 100, 36, 0)
        );
    }

    #[test]
    fn no_preferred_terms_score_zero() {
        let snap = cluster(
            vec![N::new("a").labels(FOO_BAR).build(), N::new("b").build()],
            vec![],
        );
        let s = score_all(&NodeAffinity, &P::new("p").build(), &snap);
        assert_eq!((s["a"], s["b"]), (0, 0));
    }
}
