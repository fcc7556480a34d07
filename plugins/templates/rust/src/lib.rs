//! {{name}}: a wasmsched scheduling policy, made by `wasmsched plugin new`.
//!
//! - Filter: a node labelled `example.com/avoid: "true"` takes no pods
//!   (`node(s) marked example.com/avoid`, unresolvable).
//! - Score: a node labelled `example.com/preferred: "true"` scores 100, any
//!   other 0.
//!
//! The SDK keeps the cluster the scheduler streams to the plugin, so
//! `filter` and `score` see whole nodes while only node indices cross the
//! boundary; it also answers `contract-version` (the version of the
//! contract it was built against) and exports what `export_plugin!` names.
//! Build, check and test: README.md.

use serde::Deserialize;
use wasmsched_plugin_sdk::types::Pod;
use wasmsched_plugin_sdk::{
    args, export_plugin, reject_unresolvable, Cluster, NodeExt, NodeState, Plugin, Rejection,
};

pub const AVOID_LABEL: &str = "example.com/avoid";
pub const PREFERRED_LABEL: &str = "example.com/preferred";
pub const AVOID_REASON: &str = "node(s) marked example.com/avoid";

/// The plugin's args (its `pluginConfig` in a profile): none yet. Fields
/// added here are parsed from JSON, unknown ones refused, naming the field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {}

pub struct Policy;

impl Plugin for Policy {
    /// What `cycle_start` computes once per pod (kube-scheduler's
    /// CycleState) and `filter`/`score` receive: nothing yet.
    type Cycle = ();

    fn init(text: &str) -> Result<Self, String> {
        let Args {} = args::parse("{{name}}", text)?;
        Ok(Policy)
    }

    fn cycle_start(&self, _pod: &Pod, _cluster: &Cluster) -> Result<(), String> {
        Ok(())
    }

    fn filter(&self, _: &(), _pod: &Pod, node: &NodeState, _: &Cluster) -> Result<(), Rejection> {
        match node.node.label(AVOID_LABEL) {
            Some("true") => Err(reject_unresolvable(AVOID_REASON)),
            _ => Ok(()),
        }
    }

    fn score(&self, _: &(), _pod: &Pod, node: &NodeState, _: &Cluster) -> Result<i64, String> {
        Ok(match node.node.label(PREFERRED_LABEL) {
            Some("true") => 100,
            _ => 0,
        })
    }
}

// The extension points the component exports (and the scheduler calls):
// add `normalize_score`, `reserve`, `permit`, `pre_bind`, `post_filter`,
// `interests` as the plugin implements them (docs/writing-plugins.md).
export_plugin!(Policy: filter, score);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_plugin_sdk::runtime;
    use wasmsched_plugin_sdk::types::{Delta, Node};

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: vec![],
            allocatable: vec![],
            taints: vec![],
            unschedulable: false,
            metrics: vec![],
        }
    }

    fn pod() -> Pod {
        Pod {
            uid: "u".into(),
            namespace: "default".into(),
            name: "p".into(),
            labels: vec![],
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

    #[test]
    fn avoided_nodes_are_filtered_and_preferred_ones_score_100() {
        runtime::init::<Policy>("{}").unwrap();
        runtime::apply::<Policy>(vec![
            Delta::NodeSet((0, node("plain", &[]))),
            Delta::NodeSet((1, node("preferred", &[(PREFERRED_LABEL, "true")]))),
            Delta::NodeSet((2, node("avoided", &[(AVOID_LABEL, "true")]))),
        ]);
        runtime::cycle_start::<Policy>(pod()).unwrap();
        let verdicts = runtime::filter::<Policy>(&[0, 1, 2]);
        assert!(verdicts[0].is_none() && verdicts[1].is_none());
        assert_eq!(verdicts[2].as_ref().unwrap().reason, AVOID_REASON);
        assert_eq!(runtime::score::<Policy>(&[0, 1]).unwrap(), [0, 100]);
        assert!(runtime::init::<Policy>(r#"{"unknown": 1}"#).is_err());
    }
}
