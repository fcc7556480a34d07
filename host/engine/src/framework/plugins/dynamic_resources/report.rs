//! `simulate`'s view of ResourceClaims: each claim's allocated devices,
//! the node they bind it to, and its consumers.

use serde::{Deserialize, Serialize};

use super::Store;
use crate::framework::objects::PluginReport;

/// The key of the report's section in `simulate --output json`.
pub const REPORT_KEY: &str = "resource_claims";

/// One claim after the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimReport {
    pub namespace: String,
    pub name: String,
    /// `<driver>/<pool>/<device>` of each allocated device, by request.
    pub devices: Vec<AllocatedDevice>,
    /// The pods the claim is reserved for (`namespace` is the claim's).
    pub reserved_for: Vec<String>,
}

/// One allocated device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AllocatedDevice {
    pub request: String,
    pub device: String,
    /// A share of a device that allows multiple allocations: what it
    /// consumes, by capacity (consumable capacity).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub consumed: std::collections::BTreeMap<String, String>,
}

/// Every claim in the input (allocated or not), by key.
pub fn plugin_report(store: &Store) -> Option<PluginReport> {
    let claims = store.claims();
    if claims.is_empty() {
        return None;
    }
    let reports: Vec<ClaimReport> = claims
        .iter()
        .map(|c| ClaimReport {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            devices: c
                .allocation
                .iter()
                .flat_map(|a| &a.results)
                .map(|r| AllocatedDevice {
                    request: r.request.clone(),
                    device: r.id(),
                    consumed: r
                        .consumed
                        .iter()
                        .map(|(k, v)| (k.clone(), super::capacity::display(*v)))
                        .collect(),
                })
                .collect(),
            reserved_for: c.reserved_for.iter().map(|r| r.name.clone()).collect(),
        })
        .collect();
    let rows = reports
        .iter()
        .map(|c| {
            let devices: Vec<String> = c
                .devices
                .iter()
                .map(|d| {
                    let shares: Vec<String> =
                        d.consumed.iter().map(|(k, v)| format!("{k} {v}")).collect();
                    if shares.is_empty() {
                        format!("{}: {}", d.request, d.device)
                    } else {
                        format!("{}: {} ({})", d.request, d.device, shares.join(", "))
                    }
                })
                .collect();
            vec![
                format!("{}/{}", c.namespace, c.name),
                if devices.is_empty() {
                    "(not allocated)".into()
                } else {
                    devices.join("\n")
                },
                if c.reserved_for.is_empty() {
                    "-".into()
                } else {
                    c.reserved_for.join(", ")
                },
            ]
        })
        .collect();
    Some(PluginReport {
        key: REPORT_KEY,
        json: serde_json::to_value(&reports).unwrap_or_default(),
        title: format!("Resource claims ({}):", reports.len()),
        header: vec!["RESOURCE CLAIM", "DEVICES", "RESERVED FOR"],
        rows,
    })
}
