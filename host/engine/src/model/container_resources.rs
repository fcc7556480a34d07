//! Per-container extended resources, for plugins that place devices
//! container by container (HAMi's vGPUs): a plugin sees a pod's effective
//! requests, summed over containers, so the host adds the
//! `wasmsched.io/container-resources` annotation to the pod record it
//! gives plugins (never to the API object). Format and reader:
//! `wasmsched_shared::hami::request`.

use wasmsched_shared::hami::request::{encode_container_resources, ContainerResources};

use super::Resources;

/// A container's extended resources (domain-qualified names outside
/// `kubernetes.io/`), after the API server's defaulting of requests from
/// limits.
pub fn extended(init: bool, requests: &Resources) -> ContainerResources {
    ContainerResources {
        init,
        resources: requests
            .iter()
            .filter(|(name, _)| {
                name.contains('/')
                    && !name.contains("kubernetes.io/")
                    && !name.starts_with("requests.")
            })
            .map(|(name, amount)| (name.to_string(), amount))
            .collect(),
    }
}

/// The annotation's value, init containers first; `None` when no
/// container asks for an extended resource.
pub fn annotation(init: Vec<ContainerResources>, app: Vec<ContainerResources>) -> Option<String> {
    let all: Vec<ContainerResources> = init.into_iter().chain(app).collect();
    all.iter()
        .any(|c| !c.resources.is_empty())
        .then(|| encode_container_resources(&all))
}
