//! NodeDeclaredFeatures (kube-scheduler 1.37, gate NodeDeclaredFeatures,
//! GA; `pkg/scheduler/framework/plugins/nodedeclaredfeatures/`): a pod
//! that needs a declared node feature (inferred from its spec by
//! [`crate::model::declared_features`]) fits only nodes whose
//! `status.declaredFeatures` lists it. PreFilter says Skip for a pod that
//! needs none; Filter rejects, unresolvable (no preemption declares a
//! feature), every node that lacks one. No score.
//!
//! Upstream re-queues a pod on a node added or whose declared features
//! changed, and on an update of the pod that changes what it needs;
//! wasmsched's queue re-tries on every cluster event, which covers both.

use std::sync::Arc;

use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PreFilterPlugin, Rejection,
};
use crate::model::declared_features;

pub const NAME: &str = "NodeDeclaredFeatures";

/// Upstream `errReasonUnsatisfiedRequirements`.
pub const ERR_REASON: &str = "node(s) didn't match Pod's required features";

#[derive(Debug, Clone, Copy, Default)]
pub struct NodeDeclaredFeatures;

impl Plugin for NodeDeclaredFeatures {
    fn name(&self) -> &str {
        NAME
    }
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        _state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        // The pod's needs are inferred once, when it is read
        // (`Pod::required_features`).
        if ctx.pod.required_features.is_empty() {
            Ok(Decision::Skip)
        } else {
            Ok(Decision::Run)
        }
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        let missing = declared_features::unsatisfied(
            &ctx.pod.required_features,
            &node.node.declared_features,
        );
        if missing.is_empty() {
            Ok(())
        } else {
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
    let p = Arc::new(NodeDeclaredFeatures);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::framework::plugins::testutil::*;

    fn node(name: &str, features: &[&str]) -> N {
        N::new(name).status_field("declaredFeatures", json!(features))
    }

    /// A pod whose container restarts all containers on exit code 42:
    /// it needs `RestartAllContainersOnContainerExits`.
    fn restart_all() -> P {
        P::new("p").spec(
            "containers",
            json!([{"name": "c", "image": "x", "restartPolicy": "Never",
                    "restartPolicyRules": [{"action": "RestartAllContainers",
                                            "exitCodes": {"operator": "In", "values": [42]}}]}]),
        )
    }

    fn verdicts(pod: P, nodes: Vec<N>) -> Vec<(String, Result<(), Rejection>)> {
        let snap = cluster(nodes.into_iter().map(N::build).collect(), vec![]);
        let pod = pod.build();
        let c = ctx(&pod, &snap);
        let mut state = CycleState::default();
        match NodeDeclaredFeatures.pre_filter(&c, &mut state).unwrap() {
            // A skipped Filter passes every node.
            Decision::Skip => snap
                .nodes()
                .map(|n| (n.node.name.clone(), Ok(())))
                .collect(),
            Decision::Run => snap
                .nodes()
                .map(|n| {
                    (
                        n.node.name.clone(),
                        NodeDeclaredFeatures.filter(&c, &state, n),
                    )
                })
                .collect(),
        }
    }

    // Upstream nodedeclaredfeatures_test.go, TestPreFilter and TestFilter.
    #[test]
    fn a_pod_needing_no_feature_is_skipped() {
        let snap = cluster(vec![N::new("n1").build()], vec![]);
        let pod = P::new("p").build();
        let mut state = CycleState::default();
        assert_eq!(
            NodeDeclaredFeatures.pre_filter(&ctx(&pod, &snap), &mut state),
            Ok(Decision::Skip)
        );
        assert_eq!(
            verdicts(P::new("p"), vec![N::new("n1")]),
            vec![("n1".to_string(), Ok(()))]
        );
    }

    #[test]
    fn only_nodes_declaring_the_feature_fit() {
        let got = verdicts(
            restart_all(),
            vec![
                node("declares", &["RestartAllContainersOnContainerExits"]),
                node("other", &["VolumeBindMountOptions"]),
                N::new("none"),
                // Features the registry does not know are ignored.
                node(
                    "more",
                    &["SomeFutureFeature", "RestartAllContainersOnContainerExits"],
                ),
            ],
        );
        let want = |n: &str, r: Result<(), Rejection>| (n.to_string(), r);
        assert_eq!(
            got,
            vec![
                want("declares", Ok(())),
                want("other", Err(Rejection::unresolvable(ERR_REASON))),
                want("none", Err(Rejection::unresolvable(ERR_REASON))),
                want("more", Ok(())),
            ]
        );
    }

    #[test]
    fn every_needed_feature_must_be_declared() {
        // Host network in a user namespace, and a bind mount option.
        let pod = P::new("p")
            .spec("hostNetwork", json!(true))
            .spec("hostUsers", json!(false))
            .spec(
                "containers",
                json!([{"name": "c", "image": "x",
                        "volumeMounts": [{"name": "v", "mountPath": "/v",
                                          "bindMountOptions": ["nosymfollow"]}]}]),
            );
        let got = verdicts(
            pod,
            vec![
                node(
                    "both",
                    &["UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"],
                ),
                node("one", &["UserNamespacesHostNetworkSupport"]),
            ],
        );
        assert_eq!(got[0], ("both".to_string(), Ok(())));
        assert_eq!(
            got[1],
            ("one".to_string(), Err(Rejection::unresolvable(ERR_REASON)))
        );
    }
}
