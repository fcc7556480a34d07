//! The traffic report: how much declared peer traffic stays on a node,
//! in a zone, crosses zones or regions, for a set of placements.

use std::collections::BTreeMap;

use super::annotations::PeerSpec;
use super::topology::{proximity, Location, Proximity};

/// A node with its labels.
#[derive(Debug, Clone, Copy)]
pub struct TopologyNode<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// A pod placed on a node.
#[derive(Debug, Clone, Copy)]
pub struct PlacedPod<'a> {
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    /// The node's name; a node missing from the report's node list has no
    /// zone or region.
    pub node: &'a str,
}

/// Summed weights of declared peer pairs, by proximity. Each directed
/// declaration counts once: when A's peers annotation selects B with
/// weight 10 and B's selects A with weight 2, the pair adds 12.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficReport {
    pub same_node: u64,
    pub same_zone: u64,
    /// Same region, different zones.
    pub cross_zone: u64,
    pub cross_region: u64,
    /// Missing zone/region labels do not tell.
    pub unknown: u64,
}

impl TrafficReport {
    pub fn add(&mut self, p: Proximity, weight: u64) {
        let slot = match p {
            Proximity::SameNode => &mut self.same_node,
            Proximity::SameZone => &mut self.same_zone,
            Proximity::CrossZone => &mut self.cross_zone,
            Proximity::CrossRegion => &mut self.cross_region,
            Proximity::Unknown => &mut self.unknown,
        };
        *slot = slot.saturating_add(weight);
    }

    pub fn total(&self) -> u64 {
        [
            self.same_node,
            self.same_zone,
            self.cross_zone,
            self.cross_region,
            self.unknown,
        ]
        .iter()
        .fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// Sums, by proximity, the weight of every (declaring pod, selected pod)
/// pair among `pods`. A pod's weight for another is the largest weight
/// among its entries that select it (in its peer namespaces); a pod never
/// pairs with itself. Pods with an invalid peers or peer-namespaces
/// annotation declare nothing (they can still be selected by others).
pub fn traffic_report(nodes: &[TopologyNode<'_>], pods: &[PlacedPod<'_>]) -> TrafficReport {
    let by_name: BTreeMap<&str, &BTreeMap<String, String>> =
        nodes.iter().map(|n| (n.name, n.labels)).collect();
    let empty = BTreeMap::new();
    let locations: Vec<Location<'_>> = pods
        .iter()
        .map(|p| Location::of(p.node, by_name.get(p.node).copied().unwrap_or(&empty)))
        .collect();
    let mut report = TrafficReport::default();
    for (i, declarer) in pods.iter().enumerate() {
        let Ok(Some(spec)) = PeerSpec::from_annotations(declarer.annotations) else {
            continue;
        };
        for (j, target) in pods.iter().enumerate() {
            if i == j {
                continue;
            }
            if let Some(w) = spec.weight_for(declarer.namespace, target.namespace, target.labels) {
                report.add(proximity(&locations[i], &locations[j]), u64::from(w));
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locality::annotations::PEERS_ANNOTATION;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn topo(zone: &str, region: &str) -> BTreeMap<String, String> {
        map(&[
            ("topology.kubernetes.io/zone", zone),
            ("topology.kubernetes.io/region", region),
        ])
    }

    #[test]
    fn counts_each_directed_declaration_once_by_category() {
        let n1 = topo("a1", "r1");
        let n2 = topo("a1", "r1");
        let n3 = topo("a2", "r1");
        let n4 = topo("b1", "r2");
        let bare = map(&[]);
        let nodes = [
            TopologyNode {
                name: "n1",
                labels: &n1,
            },
            TopologyNode {
                name: "n2",
                labels: &n2,
            },
            TopologyNode {
                name: "n3",
                labels: &n3,
            },
            TopologyNode {
                name: "n4",
                labels: &n4,
            },
            TopologyNode {
                name: "n5",
                labels: &bare,
            },
        ];
        let web = map(&[("app", "web")]);
        let db = map(&[("app", "db")]);
        let cache = map(&[("app", "cache")]);
        let web_ann = map(&[(PEERS_ANNOTATION, "app=db:10; app=cache:2")]);
        let db_ann = map(&[(PEERS_ANNOTATION, "app=web:3")]);
        let broken = map(&[(PEERS_ANNOTATION, "app in (db")]);
        let none = map(&[]);
        let pod = |labels, annotations, node| PlacedPod {
            namespace: "prod",
            labels,
            annotations,
            node,
        };
        let pods = [
            pod(&web, &web_ann, "n1"), // -> db on n1 (10, same node), n3 (10, cross zone); cache n2 (2, same zone)
            pod(&db, &db_ann, "n1"),   // -> web on n1 (3, same node)
            pod(&db, &none, "n3"),     //
            pod(&cache, &none, "n2"),  //
            pod(&web, &broken, "n4"),  // declares nothing; db on n1 selects it: 3, cross region
            pod(&cache, &none, "n5"),  // web on n1 -> 2, unknown
            pod(&cache, &none, "gone"), // node not listed: unknown, 2
        ];
        let r = traffic_report(&nodes, &pods);
        assert_eq!(
            r,
            TrafficReport {
                same_node: 10 + 3,
                same_zone: 2,
                cross_zone: 10,
                cross_region: 3,
                unknown: 2 + 2,
            }
        );
        assert_eq!(r.total(), 32);
    }

    #[test]
    fn respects_namespaces() {
        let n = topo("a", "r");
        let nodes = [TopologyNode {
            name: "n",
            labels: &n,
        }];
        let web = map(&[("app", "web")]);
        let db = map(&[("app", "db")]);
        let own = map(&[(PEERS_ANNOTATION, "app=db")]);
        let cross = map(&[
            (PEERS_ANNOTATION, "app=db:4"),
            ("network.wasmsched.io/peer-namespaces", "data"),
        ]);
        let none = map(&[]);
        let pods = [
            PlacedPod {
                namespace: "prod",
                labels: &web,
                annotations: &own,
                node: "n",
            },
            PlacedPod {
                namespace: "prod",
                labels: &web,
                annotations: &cross,
                node: "n",
            },
            PlacedPod {
                namespace: "data",
                labels: &db,
                annotations: &none,
                node: "n",
            },
        ];
        assert_eq!(
            traffic_report(&nodes, &pods),
            TrafficReport {
                same_node: 4,
                ..Default::default()
            }
        );
    }
}
