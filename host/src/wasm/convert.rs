//! Model -> contract records. Maps are already sorted (BTreeMap), which
//! the contract promises to plugins.
//!
//! Written as a macro because two generated type families mirror the same
//! WIT records: the host's wasmtime bindings, and (in the native benchmark
//! build) the guest SDK's wit-bindgen types.

/// Defines `pod`, `node` and `deltas` conversions into the WIT type module
/// `$wit` (a path to the generated `types` module).
#[macro_export]
#[doc(hidden)]
macro_rules! wit_conversions {
    ($wit:path) => {
        use $crate::framework::{Change, MetricValues};
        use $crate::model::pod::TolerationOp;
        use $crate::model::{Node, Pod, Resources, TaintEffect};
        use $crate::wasm::interests::Interests;
        use $wit as wit;

        fn resources(r: &Resources) -> Vec<wit::ResourceAmount> {
            r.iter()
                .filter(|(_, v)| *v != 0)
                .map(|(name, amount)| wit::ResourceAmount {
                    name: name.to_string(),
                    amount,
                })
                .collect()
        }

        fn effect(e: TaintEffect) -> wit::TaintEffect {
            match e {
                TaintEffect::NoSchedule => wit::TaintEffect::NoSchedule,
                TaintEffect::PreferNoSchedule => wit::TaintEffect::PreferNoSchedule,
                TaintEffect::NoExecute => wit::TaintEffect::NoExecute,
            }
        }

        /// The pod's annotations a plugin with `keys` interests reads, with
        /// the host-provided per-container resources among them.
        fn annotations(p: &Pod, keys: &Interests) -> Vec<(String, String)> {
            use wasmsched_shared::hami::request::CONTAINER_RESOURCES as KEY;
            let mut out = keys.pod_annotations.select(&p.annotations);
            if let Some(v) = &p.container_resources {
                if keys.pod_annotations.wants(KEY) {
                    match out.binary_search_by(|(k, _)| k.as_str().cmp(KEY)) {
                        Ok(i) => out[i].1 = v.clone(),
                        Err(i) => out.insert(i, (KEY.to_string(), v.clone())),
                    }
                }
            }
            out
        }

        /// The pod as a plugin with `keys` interests sees it.
        pub fn pod(p: &Pod, keys: &Interests) -> wit::Pod {
            wit::Pod {
                uid: p.uid.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                labels: keys.pod_labels.select(&p.labels),
                annotations: annotations(p, keys),
                requests: resources(&p.requests),
                limits: resources(&p.limits),
                tolerations: p
                    .tolerations
                    .iter()
                    .map(|t| wit::Toleration {
                        key: t.key.clone(),
                        operator: match t.op {
                            TolerationOp::Equal => wit::TolerationOperator::Equal,
                            TolerationOp::Exists => wit::TolerationOperator::Exists,
                        },
                        value: t.value.clone(),
                        effect: t.effect.map(effect),
                    })
                    .collect(),
                priority: p.priority,
                creation_timestamp_ms: p.creation_ms,
                owner: p.owner.as_ref().map(|o| wit::Owner {
                    kind: o.kind.clone(),
                    name: o.name.clone(),
                }),
                node_name: p.node_name.clone(),
            }
        }

        /// The node with its `metrics` as a plugin with `keys` interests
        /// sees it.
        pub fn node(n: &Node, metrics: &MetricValues, keys: &Interests) -> wit::Node {
            wit::Node {
                name: n.name.clone(),
                labels: keys.node_labels.select(&n.labels),
                annotations: keys.node_annotations.select(&n.annotations),
                allocatable: resources(&n.allocatable),
                taints: n
                    .taints
                    .iter()
                    .map(|t| wit::Taint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: effect(t.effect),
                    })
                    .collect(),
                unschedulable: n.unschedulable,
                metrics: match &keys.metrics {
                    Some(wanted) => wanted.select_metrics(metrics),
                    None => metrics.to_vec(),
                },
            }
        }

        /// One call that brings an instance forward: `lifecycle.apply`,
        /// or (0.4 `metric-interests`) `set-metrics`.
        #[derive(Debug, Clone)]
        pub enum Batch {
            Apply(Vec<wit::Delta>),
            Metrics(Vec<(u32, Vec<(String, f64)>)>),
            /// `set-metric-values`: the names are those the plugin has;
            /// each node with its count of values, then every value.
            Values(Vec<(u32, u32)>, Vec<f64>),
        }

        /// Snapshot changes as the calls that carry them to a plugin with
        /// `keys` interests, in order: metrics-only changes as
        /// `set-metrics` when the plugin declared its metric interests
        /// (none when it reads no metric), otherwise as `node-set`.
        pub fn deltas(changes: &[Change], keys: &Interests) -> Vec<Batch> {
            let mut out: Vec<Batch> = Vec::new();
            for c in changes {
                let delta = match c {
                    Change::NodeMetrics {
                        index: i,
                        node: n,
                        metrics,
                        same_names,
                    } => match &keys.metrics {
                        Some(wanted) if wanted.is_none() => continue,
                        Some(wanted) if *same_names => {
                            if !matches!(out.last(), Some(Batch::Values(..))) {
                                // Room for every node of a pass at once.
                                let n = changes.len();
                                out.push(Batch::Values(
                                    Vec::with_capacity(n),
                                    Vec::with_capacity(n * metrics.len()),
                                ));
                            }
                            if let Some(Batch::Values(nodes, values)) = out.last_mut() {
                                let before = values.len();
                                wanted.select_values(metrics, values);
                                nodes.push((*i, (values.len() - before) as u32));
                            }
                            continue;
                        }
                        Some(wanted) => {
                            let values = wanted.select_metrics(metrics);
                            match out.last_mut() {
                                Some(Batch::Metrics(m)) => m.push((*i, values)),
                                _ => out.push(Batch::Metrics(vec![(*i, values)])),
                            }
                            continue;
                        }
                        None => wit::Delta::NodeSet((*i, node(n, metrics, keys))),
                    },
                    Change::NodeSet(i, n, metrics) => {
                        wit::Delta::NodeSet((*i, node(n, metrics, keys)))
                    }
                    Change::NodeRemove(i) => wit::Delta::NodeRemove(*i),
                    Change::PodAdd(i, p) => wit::Delta::PodAdd(wit::Placement {
                        node: *i,
                        pod: pod(p, keys),
                    }),
                    Change::PodRemove(i, uid) => wit::Delta::PodRemove(wit::Removal {
                        node: *i,
                        pod_uid: uid.clone(),
                    }),
                };
                match out.last_mut() {
                    Some(Batch::Apply(d)) => d.push(delta),
                    _ => out.push(Batch::Apply(vec![delta])),
                }
            }
            out
        }
    };
}

crate::wit_conversions!(super::bindings::types);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{deltas, Batch};
    use crate::framework::{Change, MetricValues};
    use crate::model::Node;
    use crate::wasm::bindings::types as wit;
    use crate::wasm::interests::{Interests, KeySelector};

    fn node(name: &str) -> Arc<Node> {
        Arc::new(Node {
            name: name.into(),
            ..Node::default()
        })
    }

    fn metrics(pairs: &[(&str, f64)]) -> MetricValues {
        MetricValues::new(pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect())
    }

    /// A pass with the same series, one with other series, and a node
    /// update between them.
    fn changes() -> Vec<Change> {
        let m = metrics(&[("DCGM_FI_DEV_GPU_UTIL", 40.0), ("node_load1", 2.0)]);
        vec![
            Change::NodeMetrics {
                index: 0,
                node: node("a"),
                metrics: m.clone(),
                same_names: true,
            },
            Change::NodeMetrics {
                index: 1,
                node: node("b"),
                metrics: m.clone(),
                same_names: true,
            },
            Change::NodeSet(2, node("c"), m.clone()),
            Change::NodeMetrics {
                index: 0,
                node: node("a"),
                metrics: metrics(&[("DCGM_FI_DEV_GPU_UTIL", 5.0)]),
                same_names: false,
            },
        ]
    }

    fn with_metrics(names: &[&str]) -> Interests {
        Interests {
            metrics: Some(KeySelector::from_names(
                names.iter().map(|n| n.to_string()).collect(),
            )),
            ..Interests::default()
        }
    }

    #[test]
    fn metric_changes_reach_each_plugin_as_it_asked() {
        // Before 0.4 (no metric interests): whole nodes, every metric.
        let old = deltas(&changes(), &Interests::default());
        let [Batch::Apply(d)] = old.as_slice() else {
            panic!("one apply: {old:?}")
        };
        assert_eq!(d.len(), 4);
        let wit::Delta::NodeSet((0, n)) = &d[0] else {
            panic!("{:?}", d[0])
        };
        assert_eq!(n.metrics.len(), 2);
        // Interested in one metric: values in one list, then the node
        // (with that metric only), then names and values for new series.
        let new = deltas(&changes(), &with_metrics(&["DCGM_FI_DEV_GPU_*"]));
        assert_eq!(new.len(), 3, "{new:?}");
        let Batch::Values(nodes, values) = &new[0] else {
            panic!("{:?}", new[0])
        };
        assert_eq!(nodes, &[(0, 1), (1, 1)]);
        assert_eq!(values, &[40.0, 40.0]);
        let Batch::Apply(d) = &new[1] else {
            panic!("{:?}", new[1])
        };
        let wit::Delta::NodeSet((2, n)) = &d[0] else {
            panic!("{:?}", d[0])
        };
        assert_eq!(n.metrics, [("DCGM_FI_DEV_GPU_UTIL".to_string(), 40.0)]);
        let Batch::Metrics(m) = &new[2] else {
            panic!("{:?}", new[2])
        };
        assert_eq!(m, &[(0, vec![("DCGM_FI_DEV_GPU_UTIL".to_string(), 5.0)])]);
        // Interested in none: metrics-only changes are not sent at all.
        let none = deltas(&changes(), &with_metrics(&[]));
        let [Batch::Apply(d)] = none.as_slice() else {
            panic!("{none:?}")
        };
        let wit::Delta::NodeSet((2, n)) = &d[0] else {
            panic!("{:?}", d[0])
        };
        assert!(n.metrics.is_empty());
    }
}
