//! The network-locality model, shared by the NetworkLocality plugin and the
//! host (`simulate`'s traffic report): the peer annotations, the topology
//! cost model, and the traffic report.

pub mod annotations;
pub mod report;
pub mod topology;

pub use crate::selector;

pub use annotations::{
    parse_peer_namespaces, parse_peers, MaxDistance, PeerEntry, PeerNamespaces, PeerSpec,
    MAX_DISTANCE_ANNOTATION, MAX_WEIGHT, PEERS_ANNOTATION, PEER_NAMESPACES_ANNOTATION,
};
pub use report::{traffic_report, PlacedPod, TopologyNode, TrafficReport};
pub use selector::{LabelLookup, Op, Requirement, Selector};
pub use topology::{
    proximity, topology_proximity, CostModel, Costs, Location, Proximity, LEGACY_REGION_LABEL,
    LEGACY_ZONE_LABEL, REGION_LABEL, ZONE_LABEL,
};
