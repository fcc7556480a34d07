//! Where a node is (node, zone, region) and what traffic between two
//! places costs.

use std::collections::BTreeMap;

use super::annotations::MaxDistance;
use crate::selector::LabelLookup;

pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// Read when [`ZONE_LABEL`] is absent (nodes of older clusters).
pub const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
/// Read when [`REGION_LABEL`] is absent.
pub const LEGACY_REGION_LABEL: &str = "failure-domain.beta.kubernetes.io/region";

/// A node's place in the topology. An empty label value counts as absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location<'a> {
    /// The node name: two pods on nodes with the same name share a node.
    pub node: &'a str,
    pub zone: Option<&'a str>,
    pub region: Option<&'a str>,
}

fn label<'a, L: LabelLookup + ?Sized>(labels: &'a L, key: &str, legacy: &str) -> Option<&'a str> {
    labels
        .lookup(key)
        .filter(|v| !v.is_empty())
        .or_else(|| labels.lookup(legacy).filter(|v| !v.is_empty()))
}

impl<'a> Location<'a> {
    /// Reads the zone and region labels of node `node`.
    pub fn of<L: LabelLookup + ?Sized>(node: &'a str, labels: &'a L) -> Self {
        Self {
            node,
            zone: label(labels, ZONE_LABEL, LEGACY_ZONE_LABEL),
            region: label(labels, REGION_LABEL, LEGACY_REGION_LABEL),
        }
    }

    /// Whether `self` is within `max` of `other`. Unknown labels never
    /// count as equal.
    pub fn within(&self, other: &Location<'_>, max: MaxDistance) -> bool {
        let same_node = self.node == other.node;
        let same_zone = same_node || same_known(self.zone, other.zone);
        match max {
            MaxDistance::Node => same_node,
            MaxDistance::Zone => same_zone,
            MaxDistance::Region => same_zone || same_known(self.region, other.region),
        }
    }
}

fn same_known(a: Option<&str>, b: Option<&str>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a == b)
}

/// How close two placements are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proximity {
    /// The same node.
    SameNode,
    /// Different nodes, both zone labels present and equal.
    SameZone,
    /// Both zone labels present and different, both region labels present
    /// and equal.
    CrossZone,
    /// Both region labels present and different.
    CrossRegion,
    /// The labels do not tell (for example a zone or region label missing
    /// where it matters).
    Unknown,
}

/// The proximity of two different nodes from their zone/region labels.
pub fn topology_proximity(
    zone_a: Option<&str>,
    region_a: Option<&str>,
    zone_b: Option<&str>,
    region_b: Option<&str>,
) -> Proximity {
    if same_known(zone_a, zone_b) {
        return Proximity::SameZone;
    }
    match (region_a, region_b) {
        (Some(a), Some(b)) if a != b => Proximity::CrossRegion,
        (Some(_), Some(_)) if zone_a.is_some() && zone_b.is_some() => Proximity::CrossZone,
        _ => Proximity::Unknown,
    }
}

/// The proximity of two placements.
pub fn proximity(a: &Location<'_>, b: &Location<'_>) -> Proximity {
    if a.node == b.node {
        Proximity::SameNode
    } else {
        topology_proximity(a.zone, a.region, b.zone, b.region)
    }
}

/// Cost per unit of traffic weight for each proximity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    pub same_node: u64,
    pub same_zone: u64,
    /// Same region, different zones.
    pub same_region: u64,
    pub cross_region: u64,
    pub unknown: u64,
}

impl Default for Costs {
    /// NetworkAware's scale: 0, 1, 10, 100, and 100 when unknown.
    fn default() -> Self {
        Self {
            same_node: 0,
            same_zone: 1,
            same_region: 10,
            cross_region: 100,
            unknown: 100,
        }
    }
}

impl Costs {
    pub fn of(&self, p: Proximity) -> u64 {
        match p {
            Proximity::SameNode => self.same_node,
            Proximity::SameZone => self.same_zone,
            Proximity::CrossZone => self.same_region,
            Proximity::CrossRegion => self.cross_region,
            Proximity::Unknown => self.unknown,
        }
    }
}

/// The cost model: per-proximity costs, overridden between two labelled
/// zones by a symmetric zone-to-zone matrix (like NetworkTopology's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostModel {
    pub costs: Costs,
    /// Both directions of every entry.
    zone_costs: BTreeMap<String, BTreeMap<String, u64>>,
}

impl CostModel {
    pub fn new(costs: Costs) -> Self {
        Self {
            costs,
            zone_costs: BTreeMap::new(),
        }
    }

    /// Sets the cost between zones `a` and `b` (both directions; `a == b`
    /// overrides `sameZone` for that zone). Returns the previous value.
    pub fn set_zone_cost(&mut self, a: &str, b: &str, cost: u64) -> Option<u64> {
        self.zone_costs
            .entry(b.to_string())
            .or_default()
            .insert(a.to_string(), cost);
        self.zone_costs
            .entry(a.to_string())
            .or_default()
            .insert(b.to_string(), cost)
    }

    /// The matrix entry for two zones, if any.
    pub fn zone_cost(&self, a: &str, b: &str) -> Option<u64> {
        self.zone_costs.get(a).and_then(|row| row.get(b)).copied()
    }

    /// Whether any zone pair has a matrix entry.
    pub fn has_zone_costs(&self) -> bool {
        !self.zone_costs.is_empty()
    }

    /// The cost between two different nodes with these labels.
    pub fn topology_cost(
        &self,
        zone_a: Option<&str>,
        region_a: Option<&str>,
        zone_b: Option<&str>,
        region_b: Option<&str>,
    ) -> u64 {
        if let (Some(a), Some(b)) = (zone_a, zone_b) {
            if let Some(c) = self.zone_cost(a, b) {
                return c;
            }
        }
        self.costs
            .of(topology_proximity(zone_a, region_a, zone_b, region_b))
    }

    /// The cost between two placements.
    pub fn cost(&self, a: &Location<'_>, b: &Location<'_>) -> u64 {
        if a.node == b.node {
            self.costs.same_node
        } else {
            self.topology_cost(a.zone, a.region, b.zone, b.region)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc<'a>(node: &'a str, zone: Option<&'a str>, region: Option<&'a str>) -> Location<'a> {
        Location { node, zone, region }
    }

    #[test]
    fn proximity_and_default_costs() {
        let m = CostModel::default();
        let a = loc("a", Some("z1"), Some("r1"));
        let cases = [
            (loc("a", None, None), Proximity::SameNode, 0),
            (loc("b", Some("z1"), Some("r1")), Proximity::SameZone, 1),
            (loc("b", Some("z1"), None), Proximity::SameZone, 1),
            (loc("b", Some("z2"), Some("r1")), Proximity::CrossZone, 10),
            (
                loc("b", Some("z3"), Some("r2")),
                Proximity::CrossRegion,
                100,
            ),
            (loc("b", None, Some("r2")), Proximity::CrossRegion, 100),
            (loc("b", None, Some("r1")), Proximity::Unknown, 100),
            (loc("b", Some("z2"), None), Proximity::Unknown, 100),
            (loc("b", None, None), Proximity::Unknown, 100),
        ];
        for (b, p, c) in cases {
            assert_eq!(proximity(&a, &b), p, "{b:?}");
            assert_eq!(proximity(&b, &a), p, "{b:?}");
            assert_eq!(m.cost(&a, &b), c, "{b:?}");
        }
    }

    #[test]
    fn zone_matrix_overrides_symmetrically() {
        let mut m = CostModel::default();
        m.set_zone_cost("us-east-1b", "us-east-1a", 5);
        m.set_zone_cost("eu-1a", "eu-1a", 3);
        let a = loc("n1", Some("us-east-1a"), Some("us-east-1"));
        let b = loc("n2", Some("us-east-1b"), Some("us-east-1"));
        assert_eq!(m.cost(&a, &b), 5);
        assert_eq!(m.cost(&b, &a), 5);
        // Same-node is never overridden; the diagonal overrides sameZone.
        assert_eq!(m.cost(&a, &a), 0);
        assert_eq!(
            m.cost(
                &loc("x", Some("eu-1a"), None),
                &loc("y", Some("eu-1a"), None)
            ),
            3
        );
        // Without region labels the matrix still applies between labelled zones.
        assert_eq!(
            m.cost(
                &loc("x", Some("us-east-1a"), None),
                &loc("y", Some("us-east-1b"), None)
            ),
            5
        );
        assert_eq!(m.zone_cost("us-east-1a", "us-east-1c"), None);
    }

    #[test]
    fn within_max_distance() {
        let a = loc("a", Some("z1"), Some("r1"));
        let same_zone = loc("b", Some("z1"), Some("r1"));
        let other_zone = loc("c", Some("z2"), Some("r1"));
        let other_region = loc("d", Some("z3"), Some("r2"));
        let bare = loc("e", None, None);
        assert!(a.within(&a, MaxDistance::Node));
        assert!(!a.within(&same_zone, MaxDistance::Node));
        assert!(a.within(&same_zone, MaxDistance::Zone));
        assert!(!a.within(&other_zone, MaxDistance::Zone));
        assert!(a.within(&other_zone, MaxDistance::Region));
        assert!(!a.within(&other_region, MaxDistance::Region));
        assert!(!a.within(&bare, MaxDistance::Region));
        assert!(bare.within(&bare, MaxDistance::Zone));
    }
}
