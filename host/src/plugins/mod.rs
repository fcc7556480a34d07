//! The native core plugins: kube-scheduler's default Filter and Score
//! plugins, reimplemented against the framework traits with upstream's
//! semantics and reason strings, plus the registry that builds them by
//! name from `pluginConfig` args.

use std::sync::Arc;

use serde_json::Value;

use crate::framework::{FilterPlugin, ScorePlugin};

pub mod balanced_allocation;
pub mod helpers;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod taint_toleration;

#[cfg(test)]
pub(crate) mod testutil;

pub use balanced_allocation::BalancedAllocation;
pub use inter_pod_affinity::InterPodAffinity;
pub use node_affinity::NodeAffinity;
pub use node_name::NodeName;
pub use node_ports::NodePorts;
pub use node_resources_fit::{FitArgs, NodeResourcesFit, ScoringStrategy};
pub use node_unschedulable::NodeUnschedulable;
pub use pod_topology_spread::PodTopologySpread;
pub use taint_toleration::TaintToleration;

/// Every core plugin name, in upstream's default order (filters first).
pub const NAMES: &[&str] = &[
    node_unschedulable::NAME,
    node_name::NAME,
    taint_toleration::NAME,
    node_affinity::NAME,
    node_ports::NAME,
    node_resources_fit::NAME,
    pod_topology_spread::NAME,
    inter_pod_affinity::NAME,
    balanced_allocation::NAME,
];

/// A built core plugin: its Filter and/or Score side. A plugin with both
/// shares one instance (and so one configuration) between them.
#[derive(Clone)]
pub struct CorePlugin {
    pub name: &'static str,
    pub filter: Option<Arc<dyn FilterPlugin>>,
    pub score: Option<Arc<dyn ScorePlugin>>,
}

impl std::fmt::Debug for CorePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorePlugin")
            .field("name", &self.name)
            .field("filter", &self.filter.is_some())
            .field("score", &self.score.is_some())
            .finish()
    }
}

impl CorePlugin {
    fn filter_only<T: FilterPlugin + 'static>(name: &'static str, p: T) -> Self {
        Self {
            name,
            filter: Some(Arc::new(p)),
            score: None,
        }
    }

    fn score_only<T: ScorePlugin + 'static>(name: &'static str, p: T) -> Self {
        Self {
            name,
            filter: None,
            score: Some(Arc::new(p)),
        }
    }

    fn both<T: FilterPlugin + ScorePlugin + 'static>(name: &'static str, p: T) -> Self {
        let p = Arc::new(p);
        Self {
            name,
            filter: Some(p.clone()),
            score: Some(p),
        }
    }
}

/// Builds the core plugin `name` with `args` (`pluginConfig[].args`;
/// `None`, `null` and `{}` mean defaults). Plugins without args reject
/// non-empty ones; args errors name the offending field.
pub fn build(name: &str, args: Option<&Value>) -> Result<CorePlugin, String> {
    use helpers::no_args;
    let p = match name {
        node_unschedulable::NAME => {
            no_args(name, args)?;
            CorePlugin::filter_only(node_unschedulable::NAME, NodeUnschedulable)
        }
        node_name::NAME => {
            no_args(name, args)?;
            CorePlugin::filter_only(node_name::NAME, NodeName)
        }
        taint_toleration::NAME => {
            no_args(name, args)?;
            CorePlugin::both(taint_toleration::NAME, TaintToleration)
        }
        node_affinity::NAME => {
            no_args(name, args)?;
            CorePlugin::both(node_affinity::NAME, NodeAffinity)
        }
        node_ports::NAME => {
            no_args(name, args)?;
            CorePlugin::filter_only(node_ports::NAME, NodePorts)
        }
        node_resources_fit::NAME => CorePlugin::both(
            node_resources_fit::NAME,
            NodeResourcesFit::new(FitArgs::parse(args).map_err(|e| format!("{name} args: {e}"))?),
        ),
        balanced_allocation::NAME => CorePlugin::score_only(
            balanced_allocation::NAME,
            BalancedAllocation::from_args(args).map_err(|e| format!("{name} args: {e}"))?,
        ),
        pod_topology_spread::NAME => CorePlugin::both(
            pod_topology_spread::NAME,
            PodTopologySpread::from_args(args).map_err(|e| format!("{name} args: {e}"))?,
        ),
        inter_pod_affinity::NAME => CorePlugin::both(
            inter_pod_affinity::NAME,
            InterPodAffinity::from_args(args).map_err(|e| format!("{name} args: {e}"))?,
        ),
        other => return Err(format!("unknown plugin {other:?}")),
    };
    Ok(p)
}

/// Upstream's default Filter plugins, in upstream order (cheap checks
/// first, so most nodes are rejected before the costly ones run).
pub fn default_filter_plugins() -> Vec<Arc<dyn FilterPlugin>> {
    vec![
        Arc::new(NodeUnschedulable),
        Arc::new(NodeName),
        Arc::new(TaintToleration),
        Arc::new(NodeAffinity),
        Arc::new(NodePorts),
        Arc::new(NodeResourcesFit::default()),
        Arc::new(PodTopologySpread),
        Arc::new(InterPodAffinity::default()),
    ]
}

/// Upstream's default weight of a core Score plugin.
pub fn default_weight(name: &str) -> Option<i64> {
    match name {
        taint_toleration::NAME => Some(3),
        node_affinity::NAME | pod_topology_spread::NAME | inter_pod_affinity::NAME => Some(2),
        node_resources_fit::NAME | balanced_allocation::NAME => Some(1),
        _ => None,
    }
}

/// Upstream's default Score plugins with their default weights.
pub fn default_score_plugins() -> Vec<(Arc<dyn ScorePlugin>, i64)> {
    vec![
        (Arc::new(TaintToleration), 3),
        (Arc::new(NodeAffinity), 2),
        (Arc::new(PodTopologySpread), 2),
        (Arc::new(InterPodAffinity::default()), 2),
        (Arc::new(NodeResourcesFit::default()), 1),
        (Arc::new(BalancedAllocation::default()), 1),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testutil::*;
    use super::*;
    use crate::framework::{CycleContext, CycleState, Rejection};

    #[test]
    fn default_filters_are_in_upstream_order() {
        let names: Vec<&str> = default_filter_plugins().iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity"
            ]
        );
    }

    #[test]
    fn default_scores_have_upstream_weights() {
        let got: Vec<(&str, i64)> = default_score_plugins()
            .iter()
            .map(|(p, w)| (p.name(), *w))
            .collect();
        assert_eq!(
            got,
            [
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesFit", 1),
                ("NodeResourcesBalancedAllocation", 1)
            ]
        );
        for (name, w) in got {
            assert_eq!(default_weight(name), Some(w));
        }
        assert_eq!(default_weight("NodePorts"), None);
    }

    #[test]
    fn build_gives_the_right_extension_points() {
        let points = |n: &str| {
            let p = build(n, None).unwrap();
            assert_eq!(p.name, n);
            if let Some(f) = &p.filter {
                assert_eq!(f.name(), n);
            }
            if let Some(s) = &p.score {
                assert_eq!(s.name(), n);
            }
            (p.filter.is_some(), p.score.is_some())
        };
        assert_eq!(points("NodeUnschedulable"), (true, false));
        assert_eq!(points("NodeName"), (true, false));
        assert_eq!(points("NodePorts"), (true, false));
        assert_eq!(points("TaintToleration"), (true, true));
        assert_eq!(points("NodeAffinity"), (true, true));
        assert_eq!(points("NodeResourcesFit"), (true, true));
        assert_eq!(points("PodTopologySpread"), (true, true));
        assert_eq!(points("InterPodAffinity"), (true, true));
        assert_eq!(points("NodeResourcesBalancedAllocation"), (false, true));
        for n in NAMES {
            assert!(build(n, Some(&json!({}))).is_ok(), "{n}");
            assert!(build(n, Some(&serde_json::Value::Null)).is_ok(), "{n}");
        }
    }

    #[test]
    fn build_rejects_unknown_names_and_bad_args() {
        assert_eq!(
            build("NodeResourcesFitt", None).unwrap_err(),
            "unknown plugin \"NodeResourcesFitt\""
        );
        assert!(build("NodeName", Some(&json!({"x": 1})))
            .unwrap_err()
            .contains("takes no args"));
        assert!(build("NodeAffinity", Some(&json!({"addedAffinity": {}})))
            .unwrap_err()
            .contains("takes no args"));
        let e = build(
            "NodeResourcesFit",
            Some(&json!({"scoringStrategy": {"type": "Nope"}})),
        )
        .unwrap_err();
        assert!(
            e.starts_with("NodeResourcesFit args: scoringStrategy.type"),
            "{e}"
        );
    }

    #[test]
    fn build_applies_args_to_both_sides() {
        // MostAllocated through the registry: the score side packs.
        let p = build(
            "NodeResourcesFit",
            Some(&json!({"scoringStrategy": {"type": "MostAllocated"}})),
        )
        .unwrap();
        let snap = cluster(
            vec![N::new("a")
                .alloc(&[("cpu", "4"), ("memory", "10000")])
                .build()],
            vec![],
        );
        let pod = P::new("p").req(&[("cpu", "1"), ("memory", "2000")]).build();
        let s = score_all(p.score.as_deref().unwrap(), &pod, &snap);
        assert_eq!(s["a"], 22);
        let ctx = CycleContext {
            pod: &pod,
            snapshot: &snap,
        };
        let big = P::new("big").req(&[("cpu", "5")]).build();
        let big_ctx = CycleContext {
            pod: &big,
            snapshot: &snap,
        };
        let f = p.filter.as_deref().unwrap();
        let state = CycleState::default();
        assert_eq!(f.filter(&ctx, &state, snap.by_name("a").unwrap()), Ok(()));
        assert_eq!(
            f.filter(&big_ctx, &state, snap.by_name("a").unwrap()),
            Err(Rejection::new("Insufficient cpu"))
        );
    }

    #[test]
    fn default_filters_together_report_the_first_failure() {
        // A cordoned node, a tainted node, a node that is too small, and
        // one that fits: each is rejected by the first failing plugin.
        let snap = cluster(
            vec![
                N::new("cordoned").unschedulable().build(),
                N::new("tainted")
                    .taints(json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]))
                    .build(),
                N::new("small")
                    .alloc(&[("cpu", "1"), ("memory", "1Gi")])
                    .build(),
                N::new("good").build(),
            ],
            vec![],
        );
        let pod = P::new("p").req(&[("cpu", "2"), ("memory", "1Gi")]).build();
        let ctx = CycleContext {
            pod: &pod,
            snapshot: &snap,
        };
        let plugins = default_filter_plugins();
        let mut state = CycleState::default();
        for p in &plugins {
            p.pre_filter(&ctx, &mut state).unwrap();
        }
        let verdict = |node: &str| {
            let n = snap.by_name(node).unwrap();
            plugins.iter().find_map(|p| p.filter(&ctx, &state, n).err())
        };
        assert_eq!(
            verdict("cordoned"),
            Some(Rejection::unresolvable("node(s) were unschedulable"))
        );
        assert_eq!(
            verdict("tainted"),
            Some(Rejection::unresolvable(
                "node(s) had untolerated taint {gpu: true}"
            ))
        );
        assert_eq!(verdict("small"), Some(Rejection::new("Insufficient cpu")));
        assert_eq!(verdict("good"), None);
    }
}
