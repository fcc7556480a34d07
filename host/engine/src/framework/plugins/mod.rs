//! The native core plugins: kube-scheduler's default Filter, Score and
//! Bind plugins, reimplemented against the framework traits with
//! upstream's semantics and reason strings. Each module has a `new`
//! factory that the registry (`../registry_table.rs`) names.

pub mod balanced_allocation;
pub mod coscheduling;
pub mod default_binder;
pub mod default_preemption;
pub mod dynamic_resources;
pub mod hami_node_lock;
pub mod helpers;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod scheduling_gates;
pub mod taint_toleration;
pub mod volume;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testutil::*;
    use crate::framework::handle::Handle;
    use crate::framework::registry;
    use crate::framework::{CycleContext, CycleState, PluginBundle, Rejection};

    fn build(name: &str, args: Option<&serde_json::Value>) -> Result<PluginBundle, String> {
        let f = registry::native(name).ok_or_else(|| format!("unknown plugin {name:?}"))?;
        f(args, &Handle::default())
    }

    #[test]
    fn every_native_plugin_takes_empty_args() {
        for n in registry::native_names() {
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
        let ctx = ctx(&pod, &snap);
        let big = P::new("big").req(&[("cpu", "5")]).build();
        let big_ctx = super::testutil::ctx(&big, &snap);
        let f = p.filter.as_deref().unwrap();
        let state = CycleState::default();
        assert_eq!(f.filter(&ctx, &state, snap.by_name("a").unwrap()), Ok(()));
        assert_eq!(
            f.filter(&big_ctx, &state, snap.by_name("a").unwrap()),
            Err(Rejection::unresolvable("Insufficient cpu"))
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
        let ctx: CycleContext = ctx(&pod, &snap);
        let bundles: Vec<PluginBundle> = registry::REGISTRY
            .iter()
            .filter(|r| r.default)
            .filter_map(|r| registry::native(r.name))
            .map(|f| f(None, &Handle::default()).unwrap())
            .collect();
        let mut state = CycleState::default();
        for b in &bundles {
            if let Some(p) = &b.pre_filter {
                p.pre_filter(&ctx, &mut state).unwrap();
            }
        }
        let verdict = |node: &str| {
            let n = snap.by_name(node).unwrap();
            bundles
                .iter()
                .filter_map(|b| b.filter.as_ref())
                .find_map(|p| p.filter(&ctx, &state, n).err())
        };
        assert_eq!(
            verdict("cordoned"),
            Some(Rejection::unresolvable("node(s) were unschedulable"))
        );
        assert_eq!(
            verdict("tainted"),
            Some(Rejection::unresolvable("node(s) had untolerated taint(s)"))
        );
        assert_eq!(
            verdict("small"),
            Some(Rejection::unresolvable("Insufficient cpu"))
        );
        assert_eq!(verdict("good"), None);
    }
}
