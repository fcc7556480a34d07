//! The minResources check (upstream `CheckClusterResource`): before a
//! group's first member is reserved, its `minResources` plus `minMember`
//! pods must fit the cluster's free capacity, counting capacity the
//! group's own pods hold as free.

use crate::framework::node_info::Snapshot;
use crate::model::resources::PODS;
use crate::model::{Pod, Resources};

use super::groups::group_key;

/// What is missing, as `name amount` pairs (empty: it fits).
pub fn shortfall(
    snapshot: &Snapshot,
    key: &str,
    min_resources: &Resources,
    min_member: u32,
) -> Vec<(String, i64)> {
    let mut want = min_resources.clone();
    want.set(PODS, i64::from(min_member));
    let mut free = Resources::default();
    for n in snapshot.nodes() {
        let mut node_free = n.node.allocatable.clone();
        node_free.sub(&n.requested);
        let own: Vec<&std::sync::Arc<Pod>> = n
            .pods
            .iter()
            .filter(|p| group_key(p).as_deref() == Some(key))
            .collect();
        for p in &own {
            node_free.add(&p.requests);
        }
        let pods_free = n.node.allocatable.get(PODS) - (n.pods.len() - own.len()) as i64;
        node_free.set(PODS, pods_free);
        for (r, _) in want.iter() {
            let v = node_free.get(r).max(0);
            free.set(r, free.get(r).saturating_add(v));
        }
    }
    want.iter()
        .filter(|(r, w)| *w > free.get(r))
        .map(|(r, w)| (r.to_string(), w - free.get(r)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::plugins::testutil::{cluster, N, P};

    #[test]
    fn counts_free_capacity_across_nodes_and_the_groups_own_pods() {
        let nodes = vec![
            N::new("a")
                .alloc(&[("nvidia.com/gpu", "4"), ("cpu", "8")])
                .build(),
            N::new("b")
                .alloc(&[("nvidia.com/gpu", "4"), ("cpu", "8")])
                .build(),
        ];
        let other = P::new("other").req(&[("nvidia.com/gpu", "3")]).build();
        let own = P::new("own")
            .labels(&[("scheduling.x-k8s.io/pod-group", "g")])
            .req(&[("nvidia.com/gpu", "2")])
            .build();
        let snap = cluster(nodes, vec![("a", other), ("b", own)]);
        let want = Resources::from_pairs([("nvidia.com/gpu", 5)]);
        // Free: a 1 + b 4 (the group's own 2 count as free) = 5.
        assert!(shortfall(&snap, "default/g", &want, 2).is_empty());
        let want = Resources::from_pairs([("nvidia.com/gpu", 7)]);
        assert_eq!(
            shortfall(&snap, "default/g", &want, 2),
            vec![("nvidia.com/gpu".to_string(), 2)]
        );
        let none = Resources::default();
        assert_eq!(
            shortfall(&snap, "default/g", &none, 1000),
            vec![("pods".to_string(), 1000 - 219)]
        );
    }
}
