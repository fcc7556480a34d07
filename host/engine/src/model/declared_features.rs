//! Node declared features (gate NodeDeclaredFeatures, GA in 1.37): the
//! features a kubelet lists in `status.declaredFeatures`, and which of
//! them a pod needs to run. One table, [`REGISTRY`], mirrors upstream's
//! registry (`k8s.io/component-helpers/nodedeclaredfeatures/features/
//! registry.go`, `AllFeatures`) with each feature's
//! `InferForScheduling`; a new feature is one row (and, when pods can
//! need it, one function). No feature of 1.37.2 sets a `MaxVersion`, so
//! every one counts at this version.

use k8s_openapi::api::core::v1 as k8s;

/// One declared feature: its name, and whether a pod needs it to be
/// scheduled (`None`: the feature only matters to pod updates, or is
/// checked elsewhere, so no pod needs it at scheduling).
pub struct Feature {
    pub name: &'static str,
    pub infer_for_scheduling: Option<fn(&k8s::PodSpec) -> bool>,
}

/// Upstream's registry, in name order (as upstream's `Framework` sorts
/// it).
pub const REGISTRY: &[Feature] = &[
    // Only for claims' allocation, which the DRA plugin checks.
    Feature {
        name: "DRANodeAllocatableResources",
        infer_for_scheduling: None,
    },
    // Claims' status is set at PreBind; DynamicResources filters for it.
    Feature {
        name: "DRAOptionalNodeOperations",
        infer_for_scheduling: None,
    },
    Feature {
        name: "ExtendWebSocketsToKubelet",
        infer_for_scheduling: None,
    },
    // The resize features matter to pod updates only.
    Feature {
        name: "InPlacePodLevelResourcesVerticalScaling",
        infer_for_scheduling: None,
    },
    Feature {
        name: "InPlacePodVerticalScalingInitContainers",
        infer_for_scheduling: None,
    },
    Feature {
        name: "InPlacePodVerticalScalingMemoryBackedVolumes",
        infer_for_scheduling: None,
    },
    Feature {
        name: "RestartAllContainersOnContainerExits",
        infer_for_scheduling: Some(restart_all_containers),
    },
    Feature {
        name: "UserNamespacesHostNetworkSupport",
        infer_for_scheduling: Some(user_namespaces_host_network),
    },
    Feature {
        name: "VolumeBindMountOptions",
        infer_for_scheduling: Some(volume_bind_mount_options),
    },
];

/// `restartallcontainers`: a container or init container with a restart
/// rule whose action is `RestartAllContainers`.
fn restart_all_containers(spec: &k8s::PodSpec) -> bool {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|r| r.action == "RestartAllContainers")
}

/// `usernamespaceshostnetwork`: host network in a user namespace
/// (`hostUsers: false`).
fn user_namespaces_host_network(spec: &k8s::PodSpec) -> bool {
    spec.host_network == Some(true) && spec.host_users == Some(false)
}

/// `volumebindmountoptions`: a volume mount of any container (init and
/// ephemeral ones included) with `bindMountOptions`.
fn volume_bind_mount_options(spec: &k8s::PodSpec) -> bool {
    let has = |mounts: Option<&Vec<k8s::VolumeMount>>| {
        mounts
            .into_iter()
            .flatten()
            .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| has(c.volume_mounts.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| has(c.volume_mounts.as_ref()))
}

/// Upstream `InferForPodScheduling`: the features of [`REGISTRY`] the pod
/// needs, in name order.
pub fn required(spec: &k8s::PodSpec) -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|f| f.infer_for_scheduling.is_some_and(|infer| infer(spec)))
        .map(|f| f.name)
        .collect()
}

/// The features of `required` a node declaring `declared` lacks (upstream
/// `MatchNodeFeatureSet`'s unsatisfied requirements). A declared feature
/// the registry does not know is ignored, as upstream's `TryMap` does.
pub fn unsatisfied<'a>(required: &[&'a str], declared: &[String]) -> Vec<&'a str> {
    required
        .iter()
        .copied()
        .filter(|r| !declared.iter().any(|d| d == r))
        .collect()
}

#[cfg(test)]
#[path = "declared_features_tests.rs"]
mod tests;
