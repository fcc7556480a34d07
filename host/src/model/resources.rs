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
/// rounded up. Mirrors the scheduler framework's `Resource`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    amounts: BTreeMap<String, i64>,
}

impl Resources {
    /// Parses a Kubernetes resource list (`requests`, `allocatable`, ...).
    pub fn from_k8s(list: &BTreeMap<String, Quantity>) -> Result<Self, (String, QuantityError)> {
        let mut amounts = BTreeMap::new();
        for (name, q) in list {
            let v = if name == CPU {
                milli_value(&q.0)
            } else {
                value(&q.0)
            }
            .map_err(|e| (name.clone(), e))?;
            amounts.insert(name.clone(), v);
        }
        Ok(Self { amounts })
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        Self {
            amounts: pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    /// The amount of `name`, 0 when absent.
    pub fn get(&self, name: &str) -> i64 {
        self.amounts.get(name).copied().unwrap_or(0)
    }

    pub fn set(&mut self, name: &str, amount: i64) {
        self.amounts.insert(name.to_string(), amount);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.amounts.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn is_empty(&self) -> bool {
        self.amounts.values().all(|v| *v == 0)
    }

    /// Adds every amount of `other` (saturating, so hostile input cannot
    /// overflow).
    pub fn add(&mut self, other: &Resources) {
        for (k, v) in &other.amounts {
            let e = self.amounts.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }

    /// Subtracts every amount of `other`.
    pub fn sub(&mut self, other: &Resources) {
        for (k, v) in &other.amounts {
            let e = self.amounts.entry(k.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
        }
    }

    /// Raises every amount to at least the one in `other`.
    pub fn max_with(&mut self, other: &Resources) {
        for (k, v) in &other.amounts {
            let e = self.amounts.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }
}
