//! Resource amounts in kube-scheduler's integer units.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{milli_value, value, QuantityError};

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";
pub const GPU: &str = "nvidia.com/gpu";

/// kube-scheduler's defaults for pods that request nothing, used only when
/// scoring (so that empty pods are not all piled onto one node).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A set of resource amounts: cpu in millicores, everything else in units
/// rounded up. Mirrors the scheduler framework's `Resource`: the four
/// standard resources are fields (NodeResourcesFit reads them for every
/// node of every cycle), the extended ones a small sorted list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// cpu, memory, ephemeral-storage, pods; `None` when not set.
    standard: [Option<i64>; 4],
    /// Extended resources (`nvidia.com/gpu`, hugepages, ...), by name.
    scalar: Vec<(String, i64)>,
}

const STANDARD: [&str; 4] = [CPU, MEMORY, EPHEMERAL_STORAGE, PODS];

fn standard_slot(name: &str) -> Option<usize> {
    STANDARD.iter().position(|s| *s == name)
}

impl Resources {
    /// Parses a Kubernetes resource list (`requests`, `allocatable`, ...).
    pub fn from_k8s(list: &BTreeMap<String, Quantity>) -> Result<Self, (String, QuantityError)> {
        let mut out = Self::default();
        for (name, q) in list {
            let v = if name == CPU {
                milli_value(&q.0)
            } else {
                value(&q.0)
            }
            .map_err(|e| (name.clone(), e))?;
            out.set(name, v);
        }
        Ok(out)
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut out = Self::default();
        for (k, v) in pairs {
            out.set(k, v);
        }
        out
    }

    /// The amount of `name`, 0 when absent.
    pub fn get(&self, name: &str) -> i64 {
        match standard_slot(name) {
            Some(i) => self.standard[i].unwrap_or(0),
            None => self
                .scalar
                .iter()
                .find(|(k, _)| k == name)
                .map_or(0, |(_, v)| *v),
        }
    }

    pub fn set(&mut self, name: &str, amount: i64) {
        match standard_slot(name) {
            Some(i) => self.standard[i] = Some(amount),
            None => match self.scalar.binary_search_by(|(k, _)| k.as_str().cmp(name)) {
                Ok(i) => self.scalar[i].1 = amount,
                Err(i) => self.scalar.insert(i, (name.to_string(), amount)),
            },
        }
    }

    /// Every set amount: the standard resources, then the extended ones
    /// sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        STANDARD
            .iter()
            .zip(self.standard.iter())
            .filter_map(|(k, v)| v.map(|v| (*k, v)))
            .chain(self.scalar.iter().map(|(k, v)| (k.as_str(), *v)))
    }

    /// Whether `name` is set (an explicit 0 included).
    pub fn has(&self, name: &str) -> bool {
        self.iter().any(|(k, _)| k == name)
    }

    /// Upstream's `applyPodLevelResources`: each amount `pod_level` sets
    /// replaces the containers' aggregate.
    pub fn apply_pod_level(&mut self, pod_level: &Resources) {
        for (k, v) in pod_level.iter() {
            self.set(k, v);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.iter().all(|(_, v)| v == 0)
    }

    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        for (k, v) in other.iter() {
            let current = self.get(k);
            self.set(k, f(current, v));
        }
    }

    /// Adds every amount of `other` (saturating, so hostile input cannot
    /// overflow).
    pub fn add(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_add);
    }

    /// Subtracts every amount of `other`.
    pub fn sub(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_sub);
    }

    /// Raises every amount to at least the one in `other`.
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_and_extended_resources() {
        let mut r =
            Resources::from_pairs([("cpu", 500), ("nvidia.com/gpu", 2), ("example.com/a", 1)]);
        assert_eq!(r.get(CPU), 500);
        assert_eq!(r.get(GPU), 2);
        assert_eq!(r.get(MEMORY), 0);
        r.add(&Resources::from_pairs([
            ("cpu", 250),
            ("memory", 10),
            ("nvidia.com/gpu", 1),
        ]));
        assert_eq!(r.get(CPU), 750);
        assert_eq!(r.get(MEMORY), 10);
        assert_eq!(r.get(GPU), 3);
        r.sub(&Resources::from_pairs([("nvidia.com/gpu", 3)]));
        assert_eq!(r.get(GPU), 0);
        r.max_with(&Resources::from_pairs([("cpu", 100), ("pods", 5)]));
        assert_eq!((r.get(CPU), r.get(PODS)), (750, 5));
        let names: Vec<&str> = r.iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            ["cpu", "memory", "pods", "example.com/a", "nvidia.com/gpu"]
        );
        assert!(!r.is_empty());
        assert!(Resources::from_pairs([("cpu", 0)]).is_empty());
        r.add(&Resources::from_pairs([("cpu", i64::MAX)]));
        assert_eq!(r.get(CPU), i64::MAX, "saturates");
    }
}
