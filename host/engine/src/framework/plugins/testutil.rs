//! Test helpers: pods and nodes built as Kubernetes JSON and converted by
//! the model exactly as API objects are, plus drivers that run a plugin's
//! extension points the way the cycle does.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use serde_json::{json, Value};

use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, PreFilterPlugin, PreScorePlugin,
    Rejection, ScorePlugin, Snapshot,
};
use crate::model::{Node, Pod};

fn kv(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

/// A pod under construction, as Kubernetes JSON.
pub struct P(Value);

impl P {
    /// Pod `name` in namespace `default` (uid = name), no containers yet;
    /// `build` adds an empty one when none was added.
    pub fn new(name: &str) -> Self {
        Self(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": []}
        }))
    }

    pub fn ns(mut self, ns: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(ns);
        self
    }

    pub fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["metadata"]["labels"] = kv(pairs);
        self
    }

    /// Adds a container requesting `requests`.
    pub fn req(mut self, requests: &[(&str, &str)]) -> Self {
        let i = self.0["spec"]["containers"].as_array().map_or(0, Vec::len);
        let c = json!({"name": format!("c{i}"), "resources": {"requests": kv(requests)}});
        if let Some(a) = self.0["spec"]["containers"].as_array_mut() {
            a.push(c);
        }
        self
    }

    /// Adds an init container requesting `requests`.
    pub fn init_req(mut self, requests: &[(&str, &str)]) -> Self {
        if self.0["spec"]["initContainers"].is_null() {
            self.0["spec"]["initContainers"] = json!([]);
        }
        let i = self.0["spec"]["initContainers"]
            .as_array()
            .map_or(0, Vec::len);
        let c = json!({"name": format!("i{i}"), "resources": {"requests": kv(requests)}});
        if let Some(a) = self.0["spec"]["initContainers"].as_array_mut() {
            a.push(c);
        }
        self
    }

    /// Adds a container with these `ports` entries.
    pub fn ports(mut self, ports: Value) -> Self {
        let i = self.0["spec"]["containers"].as_array().map_or(0, Vec::len);
        if let Some(a) = self.0["spec"]["containers"].as_array_mut() {
            a.push(json!({"name": format!("c{i}"), "ports": ports}));
        }
        self
    }

    /// Sets `spec.<field>`.
    pub fn spec(mut self, field: &str, v: Value) -> Self {
        self.0["spec"][field] = v;
        self
    }

    pub fn node_selector(self, pairs: &[(&str, &str)]) -> Self {
        self.spec("nodeSelector", kv(pairs))
    }

    pub fn tolerations(self, t: Value) -> Self {
        self.spec("tolerations", t)
    }

    pub fn affinity(self, a: Value) -> Self {
        self.spec("affinity", a)
    }

    /// A controller owner reference (`apiVersion`, `kind`, `name`).
    pub fn owner(mut self, api_version: &str, kind: &str, name: &str) -> Self {
        self.0["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind,
            "name": name, "uid": format!("uid-{name}"), "controller": true}]);
        self
    }

    pub fn priority(self, p: i32) -> Self {
        self.spec("priority", json!(p))
    }

    /// Sets `status` (a resize state, say).
    pub fn status(mut self, status: Value) -> Self {
        self.0["status"] = status;
        self
    }

    pub fn build(mut self) -> Pod {
        if self.0["spec"]["containers"]
            .as_array()
            .is_some_and(Vec::is_empty)
        {
            self.0["spec"]["containers"] = json!([{"name": "c0"}]);
        }
        let k: k8s::Pod = serde_json::from_value(self.0).expect("test pod JSON");
        Pod::from_k8s(&k).expect("test pod converts")
    }
}

/// A node under construction, as Kubernetes JSON.
pub struct N(Value);

impl N {
    /// Node `name` with 4 cpu, 8Gi memory, 110 pods allocatable.
    pub fn new(name: &str) -> Self {
        Self(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        }))
    }

    pub fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["metadata"]["labels"] = kv(pairs);
        self
    }

    /// Replaces allocatable.
    pub fn alloc(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["status"]["allocatable"] = kv(pairs);
        self
    }

    pub fn taints(mut self, t: Value) -> Self {
        self.0["spec"]["taints"] = t;
        self
    }

    pub fn unschedulable(mut self) -> Self {
        self.0["spec"]["unschedulable"] = json!(true);
        self
    }

    pub fn annotations(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["metadata"]["annotations"] = kv(pairs);
        self
    }

    /// Sets `status.<field>`.
    pub fn status_field(mut self, field: &str, v: Value) -> Self {
        self.0["status"][field] = v;
        self
    }

    pub fn build(self) -> Node {
        let k: k8s::Node = serde_json::from_value(self.0).expect("test node JSON");
        Node::from_k8s(&k).expect("test node converts")
    }
}

/// A snapshot of `nodes` with `placed` pods on the named nodes.
pub fn cluster(nodes: Vec<Node>, placed: Vec<(&str, Pod)>) -> Snapshot {
    let mut s = Snapshot::default();
    for n in nodes {
        s.set_node(n);
    }
    for (node, pod) in placed {
        let i = s.index_of(node).expect("placed on a known node");
        assert!(s.add_pod(i, Arc::new(pod)));
    }
    s
}

/// A plugin under test: its PreFilter and PreScore, where it has them.
pub trait Prep {
    fn pre_filter_plugin(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    fn pre_score_plugin(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
}

impl Prep for dyn FilterPlugin {}
impl Prep for dyn ScorePlugin {}
impl Prep for super::NodeUnschedulable {}
impl Prep for super::NodeName {}
impl Prep for super::TaintToleration {}
impl Prep for super::NodeAffinity {}
impl Prep for super::NodePorts {}
impl Prep for super::NodeResourcesFit {}
impl Prep for super::BalancedAllocation {}

impl Prep for super::image_locality::ImageLocality {
    fn pre_score_plugin(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
}

impl Prep for super::PodTopologySpread {
    fn pre_filter_plugin(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn pre_score_plugin(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
}

impl Prep for super::InterPodAffinity {
    fn pre_filter_plugin(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn pre_score_plugin(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
}

/// The cycle context of `pod` on `snap`.
pub fn ctx<'a>(pod: &'a Pod, snap: &'a Snapshot) -> CycleContext<'a> {
    CycleContext {
        pod,
        snapshot: snap,
        cycle: 1,
        pool: None,
        device_rankers: &[],
        explaining: false,
    }
}

/// PreFilter then Filter on every node, as the cycle does; a PreFilter
/// rejection rejects every node, a Skip passes them all.
pub fn filter_all<T: FilterPlugin + Prep + ?Sized>(
    plugin: &T,
    pod: &Pod,
    snap: &Snapshot,
) -> BTreeMap<String, Result<(), Rejection>> {
    let ctx = ctx(pod, snap);
    let mut state = CycleState::default();
    let pre = match plugin.pre_filter_plugin() {
        Some(p) => p.pre_filter(&ctx, &mut state),
        None => Ok(Decision::Run),
    };
    snap.nodes()
        .map(|n| {
            let r = match &pre {
                Err(rej) => Err(rej.clone()),
                // Skip: the cycle does not run this plugin's Filter.
                Ok(Decision::Skip) => Ok(()),
                Ok(Decision::Run) => plugin.filter(&ctx, &state, n),
            };
            (n.name().to_string(), r)
        })
        .collect()
}

/// PreScore, Score and NormalizeScore over every node of the snapshot.
pub fn score_all<T: ScorePlugin + Prep + ?Sized>(
    plugin: &T,
    pod: &Pod,
    snap: &Snapshot,
) -> BTreeMap<String, i64> {
    let nodes: Vec<&NodeInfo> = snap.nodes().collect();
    score_nodes(plugin, pod, snap, &nodes, true)
}

/// Score without normalization, over every node.
pub fn raw_scores<T: ScorePlugin + Prep + ?Sized>(
    plugin: &T,
    pod: &Pod,
    snap: &Snapshot,
) -> BTreeMap<String, i64> {
    let nodes: Vec<&NodeInfo> = snap.nodes().collect();
    score_nodes(plugin, pod, snap, &nodes, false)
}

/// PreScore/Score(/NormalizeScore) over `feasible`, a subset of the snapshot.
pub fn score_nodes<T: ScorePlugin + Prep + ?Sized>(
    plugin: &T,
    pod: &Pod,
    snap: &Snapshot,
    feasible: &[&NodeInfo],
    normalize: bool,
) -> BTreeMap<String, i64> {
    let ctx = ctx(pod, snap);
    let mut state = CycleState::default();
    if let Some(p) = plugin.pre_score_plugin() {
        let decision = p.pre_score(&ctx, &mut state, feasible).expect("pre_score");
        // A Skip: the framework calls neither Score nor NormalizeScore, the
        // plugin adds nothing to any node.
        if decision == Decision::Skip {
            return feasible.iter().map(|n| (n.name().to_string(), 0)).collect();
        }
    }
    let mut scores: Vec<i64> = feasible
        .iter()
        .map(|n| plugin.score(&ctx, &state, n).expect("score"))
        .collect();
    if normalize {
        plugin
            .normalize(&ctx, &state, feasible, &mut scores)
            .expect("normalize");
    }
    feasible
        .iter()
        .map(|n| n.name().to_string())
        .zip(scores)
        .collect()
}

/// The node infos of `names`, in that order.
pub fn infos<'a>(snap: &'a Snapshot, names: &[&str]) -> Vec<&'a NodeInfo> {
    names
        .iter()
        .map(|n| snap.by_name(n).expect("known node"))
        .collect()
}

pub fn ok() -> Result<(), Rejection> {
    Ok(())
}

pub fn unschedulable(reason: &str) -> Result<(), Rejection> {
    Err(Rejection::new(reason))
}

pub fn unresolvable(reason: &str) -> Result<(), Rejection> {
    Err(Rejection::unresolvable(reason))
}
