//! Device rankers: plugins that rank the device sets DynamicResources'
//! allocator found for a pod's claims on a node (the contract's
//! `device-rank`, 0.3.0, and `node-device-rank`, 0.5.0). Upstream's allocator takes the first devices
//! that fit; with a ranker the best-ranked set is allocated instead and
//! the node scores by its best set. Without any, allocation is exactly
//! upstream's first fit.

/// A device of the node's pools, as a ranker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankDevice {
    pub driver: String,
    pub pool: String,
    pub name: String,
    /// Fully qualified attribute name (`<domain>/<name>`; the driver is the
    /// domain of a bare name) to its value as text (integers in decimal,
    /// booleans `true`/`false`, versions as given).
    pub attributes: Vec<(String, String)>,
    /// Fully qualified capacity name to its quantity.
    pub capacity: Vec<(String, String)>,
}

/// One way to satisfy the pod's unallocated claims on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSet {
    /// Positions into [`RankInput::devices`].
    pub devices: Vec<u32>,
    /// For each device, the position into [`RankInput::requests`] of the
    /// request it serves.
    pub requests: Vec<u32>,
}

/// What rankers see for one node.
#[derive(Debug, Clone)]
pub struct RankInput<'a> {
    /// The node's devices in the pools the claims can use.
    pub devices: Vec<&'a RankDevice>,
    /// Per device: allocated to another claim, or in flight to one.
    pub allocated: Vec<bool>,
    /// `<claim>/<request>` names the sets' devices serve.
    pub requests: Vec<String>,
    pub sets: Vec<DeviceSet>,
    /// Which devices `devices` are: two inputs with the same key have the
    /// same devices in the same order (the `allocated` flags aside), so a
    /// ranker that kept them need not be sent them again. `None`: no such
    /// promise.
    pub devices_key: Option<Vec<u64>>,
}
