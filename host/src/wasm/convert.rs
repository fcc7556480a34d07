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
        use std::collections::BTreeMap;

        use $crate::framework::Change;
        use $crate::model::pod::TolerationOp;
        use $crate::model::{Node, Pod, Resources, TaintEffect};
        use $wit as wit;

        fn map(m: &BTreeMap<String, String>) -> Vec<(String, String)> {
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }

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

        pub fn pod(p: &Pod) -> wit::Pod {
            wit::Pod {
                uid: p.uid.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                labels: map(&p.labels),
                annotations: map(&p.annotations),
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

        pub fn node(n: &Node) -> wit::Node {
            wit::Node {
                name: n.name.clone(),
                labels: map(&n.labels),
                annotations: map(&n.annotations),
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
                metrics: n.metrics.clone(),
            }
        }

        /// Snapshot changes as contract deltas.
        pub fn deltas(changes: &[Change]) -> Vec<wit::Delta> {
            changes
                .iter()
                .map(|c| match c {
                    Change::NodeSet(i, n) => wit::Delta::NodeSet((*i, node(n))),
                    Change::NodeRemove(i) => wit::Delta::NodeRemove(*i),
                    Change::PodAdd(i, p) => wit::Delta::PodAdd(wit::Placement {
                        node: *i,
                        pod: pod(p),
                    }),
                    Change::PodRemove(i, uid) => wit::Delta::PodRemove(wit::Removal {
                        node: *i,
                        pod_uid: uid.clone(),
                    }),
                })
                .collect()
        }
    };
}

crate::wit_conversions!(super::bindings::types);
