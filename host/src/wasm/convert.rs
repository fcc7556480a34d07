//! Model -> contract records. Maps are already sorted (BTreeMap), which
//! the contract promises to plugins.

use std::collections::BTreeMap;

use crate::model::pod::TolerationOp;
use crate::model::{Node, Pod, Resources, TaintEffect};

use super::bindings::types as wit;

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
