//! Where a node is: the well-known topology labels kubelet and cloud
//! providers set, with the legacy beta labels older clusters still carry.

use crate::types::Node;
use crate::view::NodeExt;

/// `topology.kubernetes.io/zone`.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// Before Kubernetes 1.17.
pub const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LEGACY_REGION_LABEL: &str = "failure-domain.beta.kubernetes.io/region";
/// `kubernetes.io/hostname`.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// The node's zone (the GA label, else the legacy one).
pub fn zone(node: &Node) -> Option<&str> {
    node.label(ZONE_LABEL)
        .or_else(|| node.label(LEGACY_ZONE_LABEL))
}

/// The node's region (the GA label, else the legacy one).
pub fn region(node: &Node) -> Option<&str> {
    node.label(REGION_LABEL)
        .or_else(|| node.label(LEGACY_REGION_LABEL))
}

/// The node's hostname label, else its name (they differ on some clouds).
pub fn hostname(node: &Node) -> &str {
    node.label(HOSTNAME_LABEL).unwrap_or(&node.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)]) -> Node {
        Node {
            name: "node-1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: vec![],
            allocatable: vec![],
            taints: vec![],
            unschedulable: false,
            metrics: vec![],
        }
    }

    #[test]
    fn ga_labels_win_over_legacy_ones() {
        let n = node(&[(LEGACY_ZONE_LABEL, "old"), (ZONE_LABEL, "eu-1a")]);
        assert_eq!(zone(&n), Some("eu-1a"));
        let legacy = node(&[(LEGACY_REGION_LABEL, "eu-1")]);
        assert_eq!(region(&legacy), Some("eu-1"));
        assert_eq!(zone(&legacy), None);
        assert_eq!(hostname(&legacy), "node-1");
        assert_eq!(
            hostname(&node(&[(HOSTNAME_LABEL, "ip-10-0-0-1")])),
            "ip-10-0-0-1"
        );
    }
}
