//! Read helpers on the contract's records (labels and annotations are
//! sorted key/value lists).

use crate::types::{Node, Pod, ResourceAmount};

fn lookup<'a>(map: &'a [(String, String)], key: &str) -> Option<&'a str> {
    match map.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
        Ok(i) => Some(map[i].1.as_str()),
        // Hand-built records may not be sorted: fall back to a scan.
        Err(_) => map.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()),
    }
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
}

/// Lookups on a node.
pub trait NodeExt {
    fn label(&self, key: &str) -> Option<&str>;
    fn annotation(&self, key: &str) -> Option<&str>;
    fn allocatable(&self, resource: &str) -> i64;
    fn metric(&self, name: &str) -> Option<f64>;
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
}
