//! Helpers shared by the core plugins: upstream's resource-name classes,
//! the "requested vs allocatable" pairs the resource scorers use, the pod's
//! required node affinity, topology-pair counters, and strict args parsing.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::framework::NodeInfo;
use crate::model::resources::{CPU, EPHEMERAL_STORAGE, MEMORY};
use crate::model::selector::any_term_matches;
use crate::model::{Node, Pod};

// ---------------------------------------------------------------------------
// Resource names
// ---------------------------------------------------------------------------

/// Upstream `schedutil.IsScalarResourceName`: extended resources
/// (`vendor.com/x`), `kubernetes.io/`-prefixed native ones, hugepages and
/// attachable volumes. Only these are checked besides cpu, memory,
/// ephemeral-storage and pods; anything else a pod names is ignored, as
/// upstream's `framework.Resource` drops it.
pub fn is_scalar_resource(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || name.contains("kubernetes.io/")
        || (name.contains('/') && !name.starts_with("requests."))
}

/// Upstream `v1helper.IsExtendedResourceName`: a domain-qualified name
/// outside `kubernetes.io/`. Only these can be ignored through
/// `ignoredResources`/`ignoredResourceGroups`.
pub fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Upstream `resourceAllocationScorer.calculateResourceAllocatableRequest`:
/// the node's allocatable amount of `resource` and what would be requested
/// on it with the pod placed, or `(0, 0)` when the resource is not to be
/// scored on this node.
///
/// `use_requested` picks the actual requests (BalancedAllocation) rather
/// than the non-zero-defaulted cpu/memory requests (NodeResourcesFit), so
/// that pods without requests still count when spreading by load; for
/// the latter the incoming pod counts its containers alone
/// ([`Pod::containers_non_zero_milli_cpu`]), as in kube-scheduler 1.37.
pub fn allocatable_and_requested(
    pod: &Pod,
    node: &NodeInfo,
    resource: &str,
    use_requested: bool,
) -> (i64, i64) {
    let alloc = &node.node.allocatable;
    // BalancedAllocation reads the pod's requests with its resize state;
    // NodeResourcesFit's scorer (built with no feature on) the spec's.
    let requests = if use_requested {
        &pod.requests
    } else {
        &pod.spec_requests
    };
    match resource {
        CPU => {
            let (on_node, by_pod) = if use_requested {
                (node.requested.get(CPU), pod.requests.get(CPU))
            } else {
                (node.non_zero_milli_cpu, pod.containers_non_zero_milli_cpu)
            };
            (alloc.get(CPU), on_node.saturating_add(by_pod))
        }
        MEMORY => {
            let (on_node, by_pod) = if use_requested {
                (node.requested.get(MEMORY), pod.requests.get(MEMORY))
            } else {
                (node.non_zero_memory, pod.containers_non_zero_memory)
            };
            (alloc.get(MEMORY), on_node.saturating_add(by_pod))
        }
        EPHEMERAL_STORAGE => (
            alloc.get(EPHEMERAL_STORAGE),
            node.requested
                .get(EPHEMERAL_STORAGE)
                .saturating_add(requests.get(EPHEMERAL_STORAGE)),
        ),
        name if is_scalar_resource(name) => {
            // An extended resource the pod does not ask for is left out of
            // the score entirely, so that nodes with GPUs are not penalised
            // for pods that do not need them.
            let by_pod = requests.get(name);
            if by_pod == 0 {
                return (0, 0);
            }
            (
                alloc.get(name),
                node.requested.get(name).saturating_add(by_pod),
            )
        }
        _ => (0, 0),
    }
}

// ---------------------------------------------------------------------------
// Node affinity
// ---------------------------------------------------------------------------

/// Upstream `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`: every
/// `nodeSelector` entry matches and, when required node affinity is set,
/// at least one of its (ORed) terms matches.
pub fn matches_required_node_affinity(pod: &Pod, node: &Node) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && pod
            .node_affinity
            .required
            .as_ref()
            .is_none_or(|terms| any_term_matches(terms, &node.name, &node.labels))
}

/// Nodes per chunk when a walk over every node is split over the workers.
const NODE_CHUNK: usize = 512;

/// `count` over `nodes`: in chunks over `pool`'s workers, their results
/// combined with `merge`, when there is a pool and enough nodes to share;
/// on this thread otherwise. `merge` must not depend on the order.
pub fn split_over_nodes<'n, T: Send>(
    nodes: &[&'n NodeInfo],
    pool: Option<&rayon::ThreadPool>,
    count: impl Fn(&[&'n NodeInfo]) -> T + Sync,
    merge: impl Fn(T, T) -> T + Sync + Send,
) -> T {
    use rayon::prelude::*;
    match pool {
        Some(pool) if nodes.len() >= 2 * NODE_CHUNK => pool.install(|| {
            nodes
                .par_chunks(NODE_CHUNK)
                .map(&count)
                .reduce_with(&merge)
                .unwrap_or_else(|| count(&[]))
        }),
        _ => count(nodes),
    }
}

// ---------------------------------------------------------------------------
// Topology-pair counters
// ---------------------------------------------------------------------------

/// Counts per topology pair, nested `key -> value -> count` so that a node's
/// labels can be looked up without building owned pairs in the hot path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyCounts {
    map: HashMap<String, HashMap<String, i64>>,
}

impl TopologyCounts {
    /// Adds `delta` to the pair (`key`, the node's value for `key`); nodes
    /// without the label contribute nothing, as upstream.
    pub fn add_for_node(&mut self, node: &Node, key: &str, delta: i64) {
        if let Some(value) = node.labels.get(key) {
            self.add(key, value, delta);
        }
    }

    /// The pairwise sum of two counts (of disjoint sets of nodes).
    pub fn merged(mut self, other: TopologyCounts) -> TopologyCounts {
        for (key, values) in other.map {
            let mine = self.map.entry(key).or_default();
            for (value, n) in values {
                let e = mine.entry(value).or_insert(0);
                *e = e.saturating_add(n);
            }
        }
        self
    }

    pub fn add(&mut self, key: &str, value: &str, delta: i64) {
        // Look up before inserting: the pairs repeat across many pods, and
        // owned keys are only needed the first time.
        if let Some(e) = self.map.get_mut(key).and_then(|m| m.get_mut(value)) {
            *e = e.saturating_add(delta);
            return;
        }
        self.map
            .entry(key.to_string())
            .or_default()
            .insert(value.to_string(), delta);
    }

    /// [`TopologyCounts::add_for_node`], dropping a pair whose count
    /// comes to zero (upstream's term counts in what-if updates, whose
    /// emptiness matters).
    pub fn add_for_node_dropping_zero(&mut self, node: &Node, key: &str, delta: i64) {
        let Some(value) = node.labels.get(key) else {
            return;
        };
        self.add(key, value, delta);
        if self.get(key, value) == 0 {
            if let Some(m) = self.map.get_mut(key) {
                m.remove(value);
            }
        }
    }

    /// Sets a pair's count, replacing what was there.
    pub fn set(&mut self, key: &str, value: &str, count: i64) {
        self.map
            .entry(key.to_string())
            .or_default()
            .insert(value.to_string(), count);
    }

    pub fn get(&self, key: &str, value: &str) -> i64 {
        self.map
            .get(key)
            .and_then(|m| m.get(value))
            .copied()
            .unwrap_or(0)
    }

    /// The count of the pair the node's label forms, 0 without the label.
    pub fn get_for_node(&self, node: &Node, key: &str) -> i64 {
        node.labels.get(key).map_or(0, |v| self.get(key, v))
    }

    /// `true` when no pair has been recorded.
    pub fn is_empty(&self) -> bool {
        self.map.values().all(|m| m.is_empty())
    }

    /// The recorded values of `key` and their counts.
    pub fn values_of(&self, key: &str) -> impl Iterator<Item = (&str, i64)> {
        self.map
            .get(key)
            .into_iter()
            .flatten()
            .map(|(v, c)| (v.as_str(), *c))
    }

    /// Whether any of the node's labels forms a pair with a positive count.
    pub fn any_positive_for_labels(&self, node: &Node) -> bool {
        node.labels.iter().any(|(k, v)| self.get(k, v) > 0)
    }

    /// Sum over the recorded keys of the count the node's label forms.
    pub fn sum_for_node(&self, node: &Node) -> i64 {
        self.map
            .iter()
            .filter_map(|(k, values)| node.labels.get(k).and_then(|v| values.get(v)))
            .fold(0i64, |acc, c| acc.saturating_add(*c))
    }
}

// ---------------------------------------------------------------------------
// Args
// ---------------------------------------------------------------------------

/// The args object of `plugin`, or `None` when args are absent, `null` or
/// `{}`. Anything but an object is rejected. `apiVersion` and `kind`
/// (as users copy them from typed KubeSchedulerConfiguration args) are
/// accepted and removed; `kind` must then be `<plugin>Args`.
pub fn args_object(
    plugin: &str,
    args: Option<&Value>,
) -> Result<Option<Map<String, Value>>, String> {
    let obj = match args {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(other) => {
            return Err(format!(
                "{plugin} args: expected an object, got {}",
                json_type(other)
            ))
        }
    };
    let mut obj = obj.clone();
    if let Some(kind) = obj.remove("kind") {
        let want = format!("{plugin}Args");
        if kind.as_str() != Some(want.as_str()) {
            return Err(format!(
                "{plugin} args: kind: expected {want:?}, got {kind}"
            ));
        }
    }
    if let Some(v) = obj.remove("apiVersion") {
        if !v.is_string() {
            return Err(format!(
                "{plugin} args: apiVersion: expected a string, got {}",
                json_type(&v)
            ));
        }
    }
    Ok(if obj.is_empty() { None } else { Some(obj) })
}

/// Rejects args for a plugin that takes none.
pub fn no_args(plugin: &str, args: Option<&Value>) -> Result<(), String> {
    match args_object(plugin, args)? {
        None => Ok(()),
        Some(obj) => {
            let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            Err(format!(
                "{plugin} takes no args, got field(s) {}",
                keys.join(", ")
            ))
        }
    }
}

/// Rejects any key of `obj` outside `allowed`, naming the field by `path`.
pub fn reject_unknown(
    obj: &Map<String, Value>,
    allowed: &[&str],
    path: &str,
) -> Result<(), String> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!(
                "{path}{k}: unknown field (expected one of: {})",
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

/// An integer field in `range`, naming the field by `path` when it is not.
pub fn int_in(v: &Value, range: std::ops::RangeInclusive<i64>, path: &str) -> Result<i64, String> {
    match v.as_i64() {
        Some(n) if range.contains(&n) => Ok(n),
        _ if range.start() == range.end() => {
            Err(format!("{path}: must be {}, got {v}", range.start()))
        }
        _ => Err(format!(
            "{path}: must be an integer in {}..={}, got {v}",
            range.start(),
            range.end()
        )),
    }
}

/// A short name of a JSON value's type for error messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalar_and_extended_resource_names_follow_upstream() {
        assert!(is_scalar_resource("nvidia.com/gpu"));
        assert!(is_scalar_resource("hugepages-2Mi"));
        assert!(is_scalar_resource("attachable-volumes-aws-ebs"));
        assert!(is_scalar_resource("kubernetes.io/something"));
        assert!(!is_scalar_resource("cpu"));
        assert!(!is_scalar_resource("pods"));
        assert!(!is_scalar_resource("foo"));
        assert!(is_extended_resource("example.com/aaa"));
        assert!(!is_extended_resource("kubernetes.io/something"));
        assert!(!is_extended_resource("subdomain.kubernetes.io/something"));
        assert!(!is_extended_resource("hugepages-2Mi"));
    }

    #[test]
    fn args_object_accepts_empty_and_typed_headers() {
        assert_eq!(args_object("X", None).unwrap(), None);
        assert_eq!(args_object("X", Some(&Value::Null)).unwrap(), None);
        assert_eq!(args_object("X", Some(&json!({}))).unwrap(), None);
        assert_eq!(
            args_object(
                "X",
                Some(&json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "XArgs"}))
            )
            .unwrap(),
            None
        );
        assert!(args_object("X", Some(&json!({"kind": "YArgs"})))
            .unwrap_err()
            .contains("kind"));
        assert!(args_object("X", Some(&json!([1])))
            .unwrap_err()
            .contains("expected an object"));
        assert!(no_args("NodeName", Some(&json!({"a": 1})))
            .unwrap_err()
            .contains("takes no args"));
    }

    #[test]
    fn topology_counts_nested_lookup() {
        let mut c = TopologyCounts::default();
        assert!(c.is_empty());
        c.add("zone", "a", 2);
        c.add("zone", "a", -1);
        c.set("zone", "b", 5);
        assert_eq!(c.get("zone", "a"), 1);
        assert_eq!(c.get("zone", "b"), 5);
        assert_eq!(c.get("zone", "c"), 0);
        assert_eq!(c.get("rack", "a"), 0);
        assert!(!c.is_empty());
    }
}
