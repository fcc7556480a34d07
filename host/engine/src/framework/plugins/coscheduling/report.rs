//! `simulate`'s view of pod groups: each group with its status, the
//! topology domains its members landed in, and where each member went.

use serde::{Deserialize, Serialize};

use super::PodGroups;
use crate::framework::objects::PluginReport;
use crate::framework::Snapshot;
use crate::model::pod_group::TopologyMode;

/// One member of a group.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupMember {
    pub pod: String,
    /// Null while unscheduled.
    pub node: Option<String>,
    /// The node's value of the group's topology label, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// A group's topology annotation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupTopology {
    pub label: String,
    pub mode: TopologyMode,
}

/// One pod group after the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GroupReport {
    pub namespace: String,
    pub name: String,
    /// Null when no PodGroup object names the group.
    pub min_member: Option<u32>,
    /// The status phase the scheduler would write.
    pub phase: String,
    /// Members bound (already, or by this run).
    pub scheduled: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<GroupTopology>,
    /// The distinct domains of the bound members.
    pub domains: Vec<String>,
    /// Why the group cannot be scheduled at all (no or an invalid
    /// PodGroup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub members: Vec<GroupMember>,
}

/// Every group with members or a PodGroup, by key.
pub fn report(groups: &PodGroups, snapshot: &Snapshot) -> Vec<GroupReport> {
    groups
        .summaries()
        .into_iter()
        .map(|s| {
            let (namespace, name) = s.key.split_once('/').unwrap_or(("", &s.key));
            let spec = s.spec.as_ref().and_then(|r| r.as_ref().ok());
            let topology = spec.and_then(|g| g.topology.clone());
            let domain_of = |node: &str| {
                let t = topology.as_ref()?;
                snapshot.by_name(node)?.node.labels.get(&t.label).cloned()
            };
            let mut members: Vec<GroupMember> = s
                .members
                .iter()
                .map(|m| GroupMember {
                    pod: m.pod.name.clone(),
                    domain: m.node.as_deref().and_then(domain_of),
                    node: m.node.clone(),
                })
                .collect();
            members.sort_by(|a, b| a.pod.cmp(&b.pod));
            let mut domains: Vec<String> =
                members.iter().filter_map(|m| m.domain.clone()).collect();
            domains.sort();
            domains.dedup();
            let error = match &s.spec {
                None => Some(format!("pod group {} not found", s.key)),
                Some(Err(e)) => Some(e.clone()),
                Some(Ok(_)) => None,
            };
            GroupReport {
                namespace: namespace.to_string(),
                name: name.to_string(),
                min_member: spec.map(|g| g.min_member),
                phase: s.status.phase.clone(),
                scheduled: s.status.scheduled,
                topology: topology.map(|t| GroupTopology {
                    label: t.label,
                    mode: t.mode,
                }),
                domains,
                error,
                members,
            }
        })
        .collect()
}

/// The key of the report's section in `simulate --output json`.
pub const REPORT_KEY: &str = "pod_groups";

/// The report's section and its table.
pub fn plugin_report(groups: &PodGroups, snapshot: &Snapshot) -> Option<PluginReport> {
    let reports = report(groups, snapshot);
    if reports.is_empty() {
        return None;
    }
    let rows = reports.iter().map(row).collect();
    Some(PluginReport {
        key: REPORT_KEY,
        json: serde_json::to_value(&reports).unwrap_or_default(),
        title: format!("Pod groups ({}):", reports.len()),
        header: vec![
            "POD GROUP",
            "PHASE",
            "BOUND",
            "TOPOLOGY",
            "DOMAINS",
            "MEMBERS",
        ],
        rows,
    })
}

/// One group's row: phase, members bound of minMember, topology, domains,
/// and each member's node.
fn row(g: &GroupReport) -> Vec<String> {
    let min = g.min_member.map_or("-".to_string(), |m| m.to_string());
    let topology = g.topology.as_ref().map_or("-".to_string(), |t| {
        let mode = serde_json::to_value(t.mode).ok();
        let mode = mode.as_ref().and_then(|m| m.as_str()).unwrap_or("");
        format!("{} ({mode})", t.label)
    });
    let members: Vec<String> = g
        .members
        .iter()
        .map(|m| match (&m.node, &m.domain) {
            (Some(n), Some(d)) => format!("{} -> {n} [{d}]", m.pod),
            (Some(n), None) => format!("{} -> {n}", m.pod),
            (None, _) => format!("{} -> (pending)", m.pod),
        })
        .collect();
    let phase = match &g.error {
        Some(e) => format!("{}\n{e}", g.phase),
        None => g.phase.clone(),
    };
    vec![
        format!("{}/{}", g.namespace, g.name),
        phase,
        format!("{}/{min}", g.scheduled),
        topology,
        if g.domains.is_empty() {
            "-".to_string()
        } else {
            g.domains.join(", ")
        },
        members.join("\n"),
    ]
}
