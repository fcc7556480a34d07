//! Consumable capacity (DRAConsumableCapacity): a device's capacities
//! with their `requestPolicy`, a request's `capacity.requests`, and what
//! an allocation result says it consumed (`consumedCapacity`, `shareID`).
//! Names are kept as written (upstream compares them so: a request's
//! `memory` matches a device's `memory`, not `<driver>/memory`).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::dra_quantity::{nanos, Nanos};

/// A quantity: its exact value and its text as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Q {
    pub n: Nanos,
    pub raw: String,
}

impl Q {
    pub fn parse(q: &Quantity) -> Result<Self, String> {
        Ok(Self {
            n: nanos(&q.0)?,
            raw: q.0.clone(),
        })
    }
}

/// `requestPolicy.validRange`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityRange {
    pub min: Q,
    pub max: Option<Q>,
    pub step: Option<Q>,
}

/// A capacity's `requestPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapacityPolicy {
    pub default: Option<Q>,
    /// Sorted ascending (API validation).
    pub valid_values: Vec<Q>,
    pub valid_range: Option<CapacityRange>,
}

/// One capacity of a device, as consumable capacity sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCapacity {
    /// As written in the slice.
    pub name: String,
    pub value: Q,
    pub policy: Option<CapacityPolicy>,
}

/// A device's capacities (sorted by name as written).
pub(crate) fn device_capacities(d: &api::Device) -> Result<Vec<DeviceCapacity>, String> {
    let mut out = Vec::new();
    for (k, c) in d.capacity.iter().flatten() {
        let at = |e: String| format!("capacity.{k}.{e}");
        let value = Q::parse(&c.value).map_err(|e| at(format!("value: {e}")))?;
        let policy = match &c.request_policy {
            None => None,
            Some(p) => {
                let q = |f: &str, v: &Quantity| {
                    Q::parse(v).map_err(|e| at(format!("requestPolicy.{f}: {e}")))
                };
                let default = p.default.as_ref().map(|v| q("default", v)).transpose()?;
                let mut valid_values = Vec::new();
                for (i, v) in p.valid_values.iter().flatten().enumerate() {
                    valid_values.push(q(&format!("validValues[{i}]"), v)?);
                }
                let valid_range = match &p.valid_range {
                    None => None,
                    Some(r) => {
                        let step = r
                            .step
                            .as_ref()
                            .map(|v| q("validRange.step", v))
                            .transpose()?;
                        if step.as_ref().is_some_and(|s| s.n <= 0) {
                            return Err(at(
                                "requestPolicy.validRange.step: must be positive".into()
                            ));
                        }
                        Some(CapacityRange {
                            min: q("validRange.min", &r.min)?,
                            max: r.max.as_ref().map(|v| q("validRange.max", v)).transpose()?,
                            step,
                        })
                    }
                };
                Some(CapacityPolicy {
                    default,
                    valid_values,
                    valid_range,
                })
            }
        };
        out.push(DeviceCapacity {
            name: k.clone(),
            value,
            policy,
        });
    }
    Ok(out)
}

/// A request's `capacity.requests`, by name as written.
pub(crate) fn capacity_requests(
    c: Option<&api::CapacityRequirements>,
) -> Result<BTreeMap<String, Q>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in c.and_then(|c| c.requests.as_ref()).into_iter().flatten() {
        out.insert(
            k.clone(),
            Q::parse(v).map_err(|e| format!("capacity.requests.{k}: {e}"))?,
        );
    }
    Ok(out)
}

/// An allocation result's `consumedCapacity`, by name as written.
pub(crate) fn consumed_capacity(
    r: &api::DeviceRequestAllocationResult,
) -> Result<BTreeMap<String, Nanos>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in r.consumed_capacity.iter().flatten() {
        out.insert(
            k.clone(),
            nanos(&v.0).map_err(|e| format!("consumedCapacity.{k}: {e}"))?,
        );
    }
    Ok(out)
}

/// Every result's `consumedCapacity` can be read (the field at fault).
pub(crate) fn check_consumed(a: &api::AllocationResult) -> Result<(), String> {
    for (i, r) in a
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .enumerate()
    {
        consumed_capacity(r).map_err(|e| format!("status.allocation.devices.results[{i}].{e}"))?;
    }
    Ok(())
}
