//! network-locality: a wasmsched plugin that places pods near the
//! workloads they talk to.
//!
//! A pod names its peers in the `network.wasmsched.io/peers` annotation
//! (label selectors with traffic weights). Score prefers nodes with a low
//! weighted network cost to the placed peers (same node < same zone < same
//! region < other region), in both directions: a placed pod whose peers
//! select the incoming pod draws it too. An opt-in Filter
//! (`network.wasmsched.io/max-distance`) keeps the pod within a node, zone
//! or region of its placed peers. See `docs/network-locality.md`.
//!
//! The annotation grammar, the cost model and the traffic report are the
//! shared [`locality`] model (`wasmsched-shared`), which the host's
//! `simulate` also uses.

pub use wasmsched_plugin_sdk::locality;

mod index;
mod plugin;

pub use plugin::{normalize_costs, parse_args, too_far_reason, Cycle, NetworkLocality, MAX_COST};

#[cfg(test)]
mod tests;
