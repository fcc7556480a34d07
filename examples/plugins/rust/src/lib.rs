//! spot-affinity: the example policy of `examples/plugins/`, written here
//! in Rust with the SDK and in Python, JavaScript and C beside it (same
//! behaviour, checked by `host/tests/languages.rs`).
//!
//! - A pod's class is its `wasmsched.io/workload-class` label: `batch` or
//!   `latency-critical` (absent: unclassified; anything else is an error
//!   that makes the pod unschedulable, naming the label).
//! - Filter: a node labelled `wasmsched.io/reserved-for: CLASS` takes only
//!   pods of that class.
//! - Score: on spot capacity (`karpenter.sh/capacity-type: spot`), batch
//!   pods score 100 and latency-critical pods 0; elsewhere the reverse.
//!   Unclassified pods skip Score.

use serde::Deserialize;
use wasmsched_plugin_sdk::types::{CyclePlan, LogLevel, Pod};
use wasmsched_plugin_sdk::{
    args, export_plugin, log, reject_unresolvable, Cluster, NodeExt, NodeState, Plugin, PodExt,
    Rejection,
};

pub const CLASS_LABEL: &str = "wasmsched.io/workload-class";
pub const RESERVED_LABEL: &str = "wasmsched.io/reserved-for";
pub const CAPACITY_LABEL: &str = "karpenter.sh/capacity-type";
pub const RESERVED_REASON: &str = "node(s) reserved for another workload class";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Batch,
    LatencyCritical,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Batch => "batch",
            Class::LatencyCritical => "latency-critical",
        }
    }
}

/// The policy takes no args: `{}` (or nothing) only.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

pub struct SpotAffinity;

impl Plugin for SpotAffinity {
    /// The pod's class, read once per cycle.
    type Cycle = Option<Class>;

    fn init(text: &str) -> Result<Self, String> {
        let NoArgs {} = args::parse("spot-affinity", text)?;
        log(LogLevel::Debug, "spot-affinity (Rust) ready");
        Ok(SpotAffinity)
    }

    fn cycle_start(&self, pod: &Pod, _: &Cluster) -> Result<Option<Class>, String> {
        match pod.label(CLASS_LABEL) {
            None => Ok(None),
            Some("batch") => Ok(Some(Class::Batch)),
            Some("latency-critical") => Ok(Some(Class::LatencyCritical)),
            Some(other) => Err(format!(
                "invalid label {CLASS_LABEL}={other:?}: expected batch or latency-critical"
            )),
        }
    }

    fn plan(&self, class: &Option<Class>, _: &Pod) -> CyclePlan {
        CyclePlan {
            filter: true,
            score: class.is_some(),
        }
    }

    fn filter(
        &self,
        class: &Option<Class>,
        _: &Pod,
        node: &NodeState,
        _: &Cluster,
    ) -> Result<(), Rejection> {
        match node.node.label(RESERVED_LABEL) {
            Some(reserved) if Some(reserved) != class.map(Class::name) => {
                Err(reject_unresolvable(RESERVED_REASON))
            }
            _ => Ok(()),
        }
    }

    fn score(
        &self,
        class: &Option<Class>,
        _: &Pod,
        node: &NodeState,
        _: &Cluster,
    ) -> Result<i64, String> {
        let spot = node.node.label(CAPACITY_LABEL) == Some("spot");
        Ok(match (class, spot) {
            (Some(Class::Batch), true) | (Some(Class::LatencyCritical), false) => 100,
            _ => 0,
        })
    }
}

export_plugin!(SpotAffinity: filter, score);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_plugin_sdk::runtime;
    use wasmsched_plugin_sdk::types::{Delta, Node, Pod};

    fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.into(),
            labels: pairs(labels),
            annotations: vec![],
            allocatable: vec![],
            taints: vec![],
            unschedulable: false,
            metrics: vec![],
        }
    }

    fn pod(labels: &[(&str, &str)]) -> Pod {
        Pod {
            uid: "u".into(),
            namespace: "default".into(),
            name: "p".into(),
            labels: pairs(labels),
            annotations: vec![],
            requests: vec![],
            limits: vec![],
            tolerations: vec![],
            priority: 0,
            creation_timestamp_ms: 0,
            owner: None,
            node_name: None,
        }
    }

    fn setup() {
        runtime::init::<SpotAffinity>("{}").unwrap();
        runtime::apply::<SpotAffinity>(vec![
            Delta::NodeSet((0, node("spot", &[(CAPACITY_LABEL, "spot")]))),
            Delta::NodeSet((1, node("on-demand", &[(CAPACITY_LABEL, "on-demand")]))),
            Delta::NodeSet((2, node("reserved", &[(RESERVED_LABEL, "batch")]))),
        ]);
    }

    #[test]
    fn batch_prefers_spot_and_latency_critical_avoids_it() {
        setup();
        runtime::cycle_start::<SpotAffinity>(pod(&[(CLASS_LABEL, "batch")])).unwrap();
        assert_eq!(
            runtime::score::<SpotAffinity>(&[0, 1, 2]).unwrap(),
            [100, 0, 0]
        );
        runtime::cycle_start::<SpotAffinity>(pod(&[(CLASS_LABEL, "latency-critical")])).unwrap();
        assert_eq!(
            runtime::score::<SpotAffinity>(&[0, 1, 2]).unwrap(),
            [0, 100, 100]
        );
    }

    #[test]
    fn reserved_nodes_take_only_their_class() {
        setup();
        let plan = runtime::cycle_start::<SpotAffinity>(pod(&[])).unwrap();
        assert!(plan.filter && !plan.score);
        let verdicts = runtime::filter::<SpotAffinity>(&[0, 2]);
        assert!(verdicts[0].is_none());
        assert_eq!(verdicts[1].as_ref().unwrap().reason, RESERVED_REASON);
        runtime::cycle_start::<SpotAffinity>(pod(&[(CLASS_LABEL, "batch")])).unwrap();
        assert!(runtime::filter::<SpotAffinity>(&[2])[0].is_none());
    }

    #[test]
    fn bad_class_and_args_are_errors() {
        setup();
        let e = runtime::cycle_start::<SpotAffinity>(pod(&[(CLASS_LABEL, "web")])).unwrap_err();
        assert_eq!(
            e,
            "invalid label wasmsched.io/workload-class=\"web\": expected batch or latency-critical"
        );
        assert!(runtime::init::<SpotAffinity>(r#"{"x": 1}"#).is_err());
        assert!(runtime::init::<SpotAffinity>("").is_ok());
    }
}
