//! What a pod's containers ask of extended resources that DRA may serve
//! (DRAExtendedResource, kube-scheduler 1.37): kept per container, because
//! the claim the scheduler makes for them has one request per container
//! and resource, named by the container's index and the resource's index
//! among the container's requests (upstream's `createRequestsAndMappings`).

use super::Resources;

/// The prefix of a DeviceClass's implicit extended resource name
/// (`deviceclass.resource.kubernetes.io/<class>`).
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Upstream's `IsDRAExtendedResourceName`: an extended resource name
/// (domain-qualified, outside `kubernetes.io/`) or a class's implicit
/// name.
pub fn is_dra_extended_name(name: &str) -> bool {
    (name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests."))
        || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// One container (init containers first, then the app containers, as
/// upstream numbers them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub name: String,
    /// An init container that is not a native sidecar (runs before the
    /// others, alone).
    pub short_lived: bool,
    /// Every resource the container requests, sorted (a request's index
    /// among them names the claim's request).
    pub keys: Vec<String>,
    /// The nonzero requests of names [`is_dra_extended_name`] accepts.
    pub extended: Vec<(String, i64)>,
}

impl Container {
    pub fn new(name: &str, short_lived: bool, requests: &Resources) -> Self {
        let mut keys: Vec<String> = requests.iter().map(|(k, _)| k.to_string()).collect();
        keys.sort();
        Self {
            name: name.to_string(),
            short_lived,
            keys,
            extended: requests
                .iter()
                .filter(|(k, v)| *v != 0 && is_dra_extended_name(k))
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }

    /// The container's request of `resource` (0: none).
    pub fn request(&self, resource: &str) -> i64 {
        self.extended
            .iter()
            .find(|(k, _)| k == resource)
            .map_or(0, |(_, v)| *v)
    }
}

/// The pod's containers when any asks for such a resource, else nothing
/// (most pods: no allocation).
pub fn containers(all: Vec<Container>) -> Vec<Container> {
    if all.iter().any(|c| !c.extended.is_empty()) {
        all
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_dra_may_serve() {
        assert!(is_dra_extended_name("example.com/gpu"));
        assert!(is_dra_extended_name(
            "deviceclass.resource.kubernetes.io/gpu"
        ));
        assert!(!is_dra_extended_name("cpu"));
        assert!(!is_dra_extended_name("hugepages-2Mi"));
        assert!(!is_dra_extended_name("kubernetes.io/foo"));
        assert!(!is_dra_extended_name("requests.example.com/gpu"));
    }

    #[test]
    fn keys_are_every_request_sorted() {
        let r = Resources::from_pairs([("example.com/gpu", 2), ("cpu", 100), ("memory", 5)]);
        let c = Container::new("c", false, &r);
        assert_eq!(c.keys, ["cpu", "example.com/gpu", "memory"]);
        assert_eq!(c.extended, [("example.com/gpu".to_string(), 2)]);
        assert_eq!(c.request("example.com/gpu"), 2);
        assert!(containers(vec![Container::new("x", false, &Resources::default())]).is_empty());
    }
}
