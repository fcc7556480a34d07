//! Nominated pods (upstream's `nominatedPodMap`): pods that preempted
//! others and wait for their node. In later cycles a nominated pod's
//! requests count against its node for pods of equal or lower priority, so
//! the room made for it is not handed to them.
//!
//! A nomination comes from PostFilter (in memory at once, as upstream's
//! `AddNominatedPod`) or from a pending pod's `status.nominatedNodeName`
//! (after a restart or a failover). It ends when the pod is assumed or
//! bound (anywhere), deleted, or displaced by a higher-priority pod
//! nominated to the same node.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::Pod;

/// Nominated pods by node name.
#[derive(Debug, Clone, Default)]
pub struct Nominator {
    by_node: HashMap<String, Vec<Arc<Pod>>>,
    node_of: HashMap<String, String>,
}

impl Nominator {
    /// The pods nominated to `node`.
    pub fn for_node(&self, node: &str) -> &[Arc<Pod>] {
        self.by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// The node `uid` is nominated to.
    pub fn node_of(&self, uid: &str) -> Option<&str> {
        self.node_of.get(uid).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }

    /// Nominates `pod` to `node`, or, without a node, to its
    /// `status.nominatedNodeName` (if any). Replaces an earlier nomination.
    pub fn add(&mut self, pod: Arc<Pod>, node: Option<&str>) {
        self.remove(&pod.uid);
        let Some(node) = node.or(pod.nominated_node.as_deref()).map(str::to_string) else {
            return;
        };
        self.node_of.insert(pod.uid.clone(), node.clone());
        self.by_node.entry(node).or_default().push(pod);
    }

    /// Ends `uid`'s nomination; returns the node it had.
    pub fn remove(&mut self, uid: &str) -> Option<String> {
        let node = self.node_of.remove(uid)?;
        if let Some(pods) = self.by_node.get_mut(&node) {
            pods.retain(|p| p.uid != uid);
            if pods.is_empty() {
                self.by_node.remove(&node);
            }
        }
        Some(node)
    }

    /// A pending pod's new version (upstream's `UpdateNominatedPod`): a
    /// nomination made in memory is kept while neither version carries one
    /// in its status (the watch may deliver an update from before the
    /// status patch).
    pub fn update(&mut self, old: Option<&Pod>, new: Arc<Pod>) {
        let keep = match old {
            Some(old) if old.nominated_node.is_none() && new.nominated_node.is_none() => {
                self.node_of.get(&new.uid).cloned()
            }
            _ => None,
        };
        self.add(new, keep.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use crate::framework::plugins::testutil::P;

    use super::*;

    #[test]
    fn nominations_follow_upstreams_rules() {
        let mut n = Nominator::default();
        let a = Arc::new(P::new("a").priority(10).build());
        n.add(a.clone(), Some("n1"));
        assert_eq!(n.node_of("a"), Some("n1"));
        // An update without a status nomination keeps the in-memory one.
        n.update(Some(&a), Arc::new(P::new("a").priority(10).build()));
        assert_eq!(n.node_of("a"), Some("n1"));
        // A status nomination that went away ends it.
        let mut with = P::new("a").priority(10).build();
        with.nominated_node = Some("n1".into());
        n.update(None, Arc::new(with.clone()));
        n.update(Some(&with), Arc::new(P::new("a").priority(10).build()));
        assert_eq!(n.node_of("a"), None);
        assert!(n.for_node("n1").is_empty());
        n.add(Arc::new(P::new("b").priority(1).build()), Some("n2"));
        n.add(Arc::new(P::new("b").priority(1).build()), Some("n3"));
        assert!(
            n.for_node("n2").is_empty(),
            "a new nomination replaces the old"
        );
        assert_eq!(n.remove("b").as_deref(), Some("n3"));
        assert!(n.is_empty());
    }
}
