//! What the deletion-cost controller and the scale-down preview read of a
//! pod, extracted once from the Kubernetes object.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::jiff::Timestamp;

use super::annotation;

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
    /// Absent (a pod the kubelet has not reported on) or unrecognised.
    Unset,
}

impl Phase {
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("Pending") => Phase::Pending,
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some("Unknown") => Phase::Unknown,
            _ => Phase::Unset,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Unknown => "Unknown",
            Phase::Unset => "",
        }
    }

    /// Upstream `podPhaseToOrdinal`: Pending < Unknown < Running; any other
    /// phase counts as Pending.
    pub fn ordinal(self) -> u8 {
        match self {
            Phase::Unknown => 1,
            Phase::Running => 2,
            _ => 0,
        }
    }
}

/// The controller owning a pod (`ownerReferences[]` with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The controller reference of an object's metadata.
pub fn controller_ref(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ControllerRef> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| ControllerRef {
            kind: o.kind.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        })
}

/// Container restart counts as the ReplicaSet controller compares them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Restarts {
    /// Largest restart count of a regular container.
    pub max_regular: u32,
    /// Largest restart count of a sidecar (an init container with
    /// `restartPolicy: Always`).
    pub max_sidecar: u32,
    /// Sum over regular containers (what the contract's `restarts` says).
    pub total: u32,
}

/// One pod, as the controller and the preview see it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: Option<String>,
    pub phase: Phase,
    pub ready: bool,
    /// When the pod became ready (the Ready condition's last transition),
    /// for a ready pod.
    pub ready_since: Option<Timestamp>,
    pub restarts: Restarts,
    pub created: Option<Timestamp>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub owner: Option<ControllerRef>,
    pub pod_ip: Option<String>,
    pub resource_version: Option<String>,
    /// The scheduler's validated view (what the contract's `pod` record is
    /// made from), or why the pod does not convert.
    pub model: Result<Box<crate::model::Pod>, String>,
}

impl PodFacts {
    pub fn from_k8s(pod: &k8s::Pod) -> Self {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        let ready_condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
        let ready = ready_condition.is_some_and(|c| c.status == "True");
        let sidecars: Vec<&str> = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"))
            .map(|c| c.name.as_str())
            .collect();
        let regular = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.restart_count.max(0) as u32);
        let sidecar = status
            .and_then(|s| s.init_container_statuses.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| sidecars.contains(&c.name.as_str()))
            .map(|c| c.restart_count.max(0) as u32);
        let restarts = Restarts {
            max_regular: regular.clone().max().unwrap_or(0),
            max_sidecar: sidecar.max().unwrap_or(0),
            total: regular.fold(0u32, u32::saturating_add),
        };
        PodFacts {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            phase: Phase::parse(status.and_then(|s| s.phase.as_deref())),
            ready,
            ready_since: if ready {
                ready_condition
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| t.0)
            } else {
                None
            },
            restarts,
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            terminating: meta.deletion_timestamp.is_some(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            owner: controller_ref(meta),
            pod_ip: status
                .and_then(|s| s.pod_ip.clone())
                .filter(|ip| !ip.is_empty()),
            resource_version: meta.resource_version.clone(),
            model: crate::model::Pod::from_k8s(pod)
                .map(Box::new)
                .map_err(|e| e.to_string()),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Upstream `IsPodActive`: not Succeeded, not Failed, not terminating.
    pub fn active(&self) -> bool {
        !matches!(self.phase, Phase::Succeeded | Phase::Failed) && !self.terminating
    }

    /// The cost the ReplicaSet controller uses for this pod.
    pub fn deletion_cost(&self) -> i32 {
        annotation::effective(&self.annotations)
    }

    /// Whole seconds since creation at `now` (0 without a creation time).
    pub fn age_seconds(&self, now: Timestamp) -> i64 {
        self.created
            .map(|c| now.as_second().saturating_sub(c.as_second()).max(0))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_status_readiness_and_restarts() {
        let pod: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rsu", "controller": true}]},
            "spec": {"nodeName": "n1",
                "initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "init"}],
                "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
                "containerStatuses": [
                    {"name": "a", "restartCount": 2, "ready": true, "image": "", "imageID": ""},
                    {"name": "b", "restartCount": 3, "ready": true, "image": "", "imageID": ""}],
                "initContainerStatuses": [
                    {"name": "proxy", "restartCount": 7, "ready": true, "image": "", "imageID": ""},
                    {"name": "init", "restartCount": 9, "ready": true, "image": "", "imageID": ""}]}
        }))
        .unwrap();
        let f = PodFacts::from_k8s(&pod);
        assert_eq!(f.phase, Phase::Running);
        assert!(f.ready && f.active());
        assert_eq!(
            f.restarts,
            Restarts {
                max_regular: 3,
                max_sidecar: 7,
                total: 5
            }
        );
        assert_eq!(f.ready_since.unwrap().to_string(), "2026-01-01T00:01:00Z");
        assert_eq!(f.owner.as_ref().unwrap().name, "rs");
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        assert_eq!(f.age_seconds(now), 600);
    }
}
