//! The PodGroup of kubernetes-sigs/scheduler-plugins' coscheduling plugin
//! (`scheduling.x-k8s.io/v1alpha1`, kind `PodGroup`), as Kubeflow's
//! training operator and Kueue create it, plus wasmsched's topology
//! annotations. Pods join a group with the label
//! `scheduling.x-k8s.io/pod-group: <name>` (same namespace).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::{validation, ModelError, Resources};
use crate::escape;

pub const API_GROUP: &str = "scheduling.x-k8s.io";
pub const API_VERSION: &str = "v1alpha1";
pub const KIND: &str = "PodGroup";
pub const PLURAL: &str = "podgroups";

/// The label that makes a pod a member (upstream `PodGroupLabel`).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// PodGroup annotation: every member lands in one domain of this node
/// label (an NVLink domain, rack or zone label), or the group waits.
pub const REQUIRED_TOPOLOGY: &str = "scheduling.wasmsched.io/required-topology";
/// PodGroup annotation: the members go to the domain of this node label
/// that fits the whole group best, or to the fewest domains.
pub const PREFERRED_TOPOLOGY: &str = "scheduling.wasmsched.io/preferred-topology";

/// The group's status phases (upstream `PodGroupPhase`).
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const PRE_SCHEDULING: &str = "PreScheduling";
    pub const SCHEDULING: &str = "Scheduling";
    pub const SCHEDULED: &str = "Scheduled";
    pub const RUNNING: &str = "Running";
    pub const FINISHED: &str = "Finished";
    pub const FAILED: &str = "Failed";
}

/// How strictly a group keeps to one topology domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopologyMode {
    Required,
    Preferred,
}

/// A topology constraint: a node label and how strictly to keep to one of
/// its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub label: String,
    pub mode: TopologyMode,
}

/// The status fields the scheduler writes (`podgroups/status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default)]
    pub scheduled: u32,
    #[serde(default)]
    pub running: u32,
    #[serde(default)]
    pub succeeded: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_start_time: Option<String>,
}

/// A validated PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    pub namespace: String,
    pub name: String,
    pub creation_ms: i64,
    /// `spec.minMember`: no member binds until this many can.
    pub min_member: u32,
    /// `spec.minResources`: what the minimal group needs, checked against
    /// the cluster's free capacity before any member is reserved.
    pub min_resources: Option<Resources>,
    /// `spec.scheduleTimeoutSeconds` (unset or 0: the plugin's default).
    pub schedule_timeout: Option<Duration>,
    pub topology: Option<Topology>,
    /// The status as last read from the API server.
    pub status: PodGroupStatus,
}

/// The API object, as serde reads it (manifests and the watch).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodGroupObject {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodGroupSpec,
    #[serde(default)]
    pub status: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    #[serde(default)]
    pub min_member: Option<i64>,
    #[serde(default)]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    #[serde(default)]
    pub schedule_timeout_seconds: Option<i64>,
}

impl PodGroup {
    /// `namespace/name`, as the group's members name it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn from_object(obj: &PodGroupObject) -> Result<Self, ModelError> {
        let meta = &obj.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let object = format!(
            "PodGroup {}/{}",
            escape::name(&namespace),
            escape::name(&name)
        );
        let err = |field: &str, cause: String| ModelError {
            object: object.clone(),
            field: field.to_string(),
            cause,
        };
        let spec = &obj.spec;
        validation::pod_group(meta, spec.min_resources.as_ref())
            .map_err(|(field, cause)| err(&field, cause))?;
        let min_member = match spec.min_member.unwrap_or(0) {
            n @ 0..=0x7fff_ffff => n as u32,
            n => return Err(err("spec.minMember", format!("must be 0 or more, got {n}"))),
        };
        let schedule_timeout = match spec.schedule_timeout_seconds.unwrap_or(0) {
            0 => None,
            n @ 1..=0x7fff_ffff => Some(Duration::from_secs(n as u64)),
            n => {
                return Err(err(
                    "spec.scheduleTimeoutSeconds",
                    format!("must be 0 or more, got {n}"),
                ))
            }
        };
        let min_resources = match &spec.min_resources {
            Some(list) => Some(
                Resources::from_k8s(list)
                    .map_err(|(res, e)| err(&format!("spec.minResources.{res}"), e.to_string()))?,
            ),
            None => None,
        };
        let annotations = meta.annotations.clone().unwrap_or_default();
        let topology = topology(&annotations).map_err(|c| err("metadata.annotations", c))?;
        let status = obj
            .status
            .clone()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        Ok(Self {
            creation_ms: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond())
                .unwrap_or(0),
            namespace,
            name,
            min_member,
            min_resources,
            schedule_timeout,
            topology,
            status,
        })
    }
}

/// The topology annotation, if any.
fn topology(annotations: &BTreeMap<String, String>) -> Result<Option<Topology>, String> {
    let required = annotations.get(REQUIRED_TOPOLOGY);
    let preferred = annotations.get(PREFERRED_TOPOLOGY);
    let (label, mode, key) = match (required, preferred) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err(format!(
                "set one of {REQUIRED_TOPOLOGY} and {PREFERRED_TOPOLOGY}, not both"
            ))
        }
        (Some(l), None) => (l, TopologyMode::Required, REQUIRED_TOPOLOGY),
        (None, Some(l)) => (l, TopologyMode::Preferred, PREFERRED_TOPOLOGY),
    };
    let label = label.trim();
    if let Err(cause) = validation::qualified_name(label) {
        return Err(format!("{key}: not a node label key: {cause}"));
    }
    Ok(Some(Topology {
        label: label.to_string(),
        mode,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<PodGroup, ModelError> {
        PodGroup::from_object(&serde_json::from_value(v).unwrap())
    }

    #[test]
    fn reads_the_coscheduling_fields() {
        let g = parse(json!({
            "metadata": {"name": "train", "namespace": "ml",
                "creationTimestamp": "2024-01-01T00:00:10Z",
                "annotations": {REQUIRED_TOPOLOGY: "nvidia.com/gpu.clique"}},
            "spec": {"minMember": 8, "scheduleTimeoutSeconds": 30,
                "minResources": {"nvidia.com/gpu": "8", "cpu": "4"}},
            "status": {"phase": "Scheduling", "scheduled": 2}
        }))
        .unwrap();
        assert_eq!(g.key(), "ml/train");
        assert_eq!(g.min_member, 8);
        assert_eq!(g.schedule_timeout, Some(Duration::from_secs(30)));
        let r = g.min_resources.unwrap();
        assert_eq!((r.get("nvidia.com/gpu"), r.get("cpu")), (8, 4000));
        assert_eq!(
            g.topology,
            Some(Topology {
                label: "nvidia.com/gpu.clique".into(),
                mode: TopologyMode::Required
            })
        );
        assert_eq!(g.status.phase, "Scheduling");
        assert_eq!(g.status.scheduled, 2);
        assert_eq!(g.creation_ms, 1_704_067_210_000);
    }

    #[test]
    fn defaults_and_errors_name_the_field() {
        let g = parse(json!({"metadata": {"name": "g"}})).unwrap();
        assert_eq!((g.namespace.as_str(), g.min_member), ("default", 0));
        assert_eq!(g.schedule_timeout, None);
        let e = parse(json!({"metadata": {"name": "g"}, "spec": {"minMember": -1}})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "PodGroup default/g: spec.minMember: must be 0 or more, got -1"
        );
        let e =
            parse(json!({"metadata": {"name": "g"}, "spec": {"minResources": {"cpu": "lots"}}}))
                .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("PodGroup default/g: spec.minResources.cpu: "),
            "{e}"
        );
        let both = json!({"metadata": {"name": "g", "annotations": {
            REQUIRED_TOPOLOGY: "a", PREFERRED_TOPOLOGY: "b"}}});
        assert!(parse(both).unwrap_err().to_string().contains("not both"));
        let blank = json!({"metadata": {"name": "g", "annotations": {PREFERRED_TOPOLOGY: " "}}});
        assert!(parse(blank)
            .unwrap_err()
            .to_string()
            .contains("not a node label key"));
    }

    #[test]
    fn checked_as_the_api_server_checks_it() {
        let e = parse(json!({"metadata": {"name": "Bad\u{1b}[31m"}})).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("PodGroup default/Bad\\u{1b}[31m: metadata.name: "),
            "{msg}"
        );
        assert!(
            msg.contains("is not a lowercase RFC 1123 subdomain"),
            "{msg}"
        );
        let e = parse(json!({"metadata": {"name": "g", "namespace": "a_b"}})).unwrap_err();
        assert!(e.to_string().contains("metadata.namespace: "), "{e}");
        let e = parse(json!({"metadata": {"name": "g"}, "spec": {"minResources": {"cpu": "-1"}}}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "PodGroup default/g: spec.minResources.cpu: must not be negative, got \"-1\""
        );
        let odd = json!({"metadata": {"name": "g", "annotations": {REQUIRED_TOPOLOGY: "a\nb"}}});
        assert!(parse(odd)
            .unwrap_err()
            .to_string()
            .contains("not a node label key: \"a\\nb\" is not a qualified name"));
    }
}
