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
        use $crate::framework::Change;
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

        /// The node as a plugin with `keys` interests sees it.
        pub fn node(n: &Node, keys: &Interests) -> wit::Node {
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
                metrics: n.metrics.clone(),
            }
        }

        /// Snapshot changes as contract deltas.
        pub fn deltas(changes: &[Change], keys: &Interests) -> Vec<wit::Delta> {
            changes
                .iter()
                .map(|c| match c {
                    Change::NodeSet(i, n) => wit::Delta::NodeSet((*i, node(n, keys))),
                    Change::NodeRemove(i) => wit::Delta::NodeRemove(*i),
                    Change::PodAdd(i, p) => wit::Delta::PodAdd(wit::Placement {
                        node: *i,
                        pod: pod(p, keys),
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
