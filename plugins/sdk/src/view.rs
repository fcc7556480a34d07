//! Read helpers on the contract's records (labels and annotations are
//! sorted key/value lists).

use crate::selector::{LabelLookup, Selector};
use crate::types::{Node, Pod, ResourceAmount};

fn lookup<'a>(map: &'a [(String, String)], key: &str) -> Option<&'a str> {
    map.lookup(key)
}

fn amount(list: &[ResourceAmount], name: &str) -> i64 {
    list.iter()
        .find(|r| r.name == name)
        .map(|r| r.amount)
        .unwrap_or(0)
}

/// Lookups on a pod.
pub trait PodExt {
    fn label(&self, key: &str) -> Option<&str>;
    fn annotation(&self, key: &str) -> Option<&str>;
    /// Effective request of `resource` (0 when absent).
    fn request(&self, resource: &str) -> i64;
    /// Effective limit of `resource` (0 when absent).
    fn limit(&self, resource: &str) -> i64;
    /// Whether the pod's labels match `selector`.
    fn matches(&self, selector: &Selector) -> bool;
}

impl PodExt for Pod {
    fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }
    fn request(&self, resource: &str) -> i64 {
        amount(&self.requests, resource)
    }
    fn limit(&self, resource: &str) -> i64 {
        amount(&self.limits, resource)
    }
    fn matches(&self, selector: &Selector) -> bool {
        selector.matches(&self.labels)
    }
}

/// Lookups on a node.
pub trait NodeExt {
    fn label(&self, key: &str) -> Option<&str>;
    fn annotation(&self, key: &str) -> Option<&str>;
    fn allocatable(&self, resource: &str) -> i64;
    fn metric(&self, name: &str) -> Option<f64>;
    /// Whether the node's labels match `selector`.
    fn matches(&self, selector: &Selector) -> bool;
    /// `topology.kubernetes.io/zone` (or the legacy beta label).
    fn zone(&self) -> Option<&str>;
    /// `topology.kubernetes.io/region` (or the legacy beta label).
    fn region(&self) -> Option<&str>;
}

impl NodeExt for Node {
    fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }
    fn allocatable(&self, resource: &str) -> i64 {
        amount(&self.allocatable, resource)
    }
    fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }
    fn matches(&self, selector: &Selector) -> bool {
        selector.matches(&self.labels)
    }
    fn zone(&self) -> Option<&str> {
        crate::topology::zone(self)
    }
    fn region(&self) -> Option<&str> {
        crate::topology::region(self)
    }
}
