//! The plugin's model, free of SDK types and dependencies so that the host
//! can link it natively (build this crate with `default-features = false`):
//! the peer annotations and their label-selector grammar, the topology cost
//! model, and the traffic report.

pub mod annotations;
pub mod report;
// The selector grammar lives in the plugin SDK, for every plugin author;
// it is compiled here from the same file (it uses only `std`) so that this
// module stays free of the SDK and its wit-bindgen glue for the host,
// which links it natively.
#[path = "../../../sdk/src/selector.rs"]
pub mod selector;
pub mod topology;

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
