//! Dynamic Resource Allocation objects (`resource.k8s.io`), validated once
//! as they arrive: DeviceClasses, ResourceSlices (the devices drivers
//! publish) and ResourceClaims (what pods ask for, and what was
//! allocated). `v1` is the shape read; `v1beta1` and `v1beta2` objects (the
//! versions a 1.32 or 1.33 server serves) are converted to it first
//! ([`to_v1`]).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as api;
use serde_json::Value;

use super::selector::NodeSelectorTerm;

/// The API group.
pub const GROUP: &str = "resource.k8s.io";

/// The finalizer kube-scheduler puts on a claim it allocates.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// The annotation of a claim the scheduler made for a pod's extended
/// resources (upstream's `ExtendedResourceClaimAnnotation`).
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

/// Upstream's `AllocationResultsMaxSize`: devices per claim.
pub const MAX_RESULTS: usize = 32;

/// Upstream's `FirstAvailableDeviceRequestMaxSize` (Score's base).
pub const MAX_SUBREQUESTS: i64 = 8;

pub use super::dra_quantity::{nanos, Nanos};

/// Converts a `v1beta1` or `v1beta2` object of `kind` to the `v1` shape
/// (`v1beta1` keeps a device's fields under `basic` and a request's at
/// its top level, where `v1` has them in `exactly`; `v1beta2` is `v1`'s
/// shape). Other versions pass unchanged.
pub fn to_v1(kind: &str, version: &str, mut object: Value) -> Value {
    if version == "v1beta1" {
        match kind {
            "ResourceSlice" => {
                if let Some(devices) = object
                    .pointer_mut("/spec/devices")
                    .and_then(Value::as_array_mut)
                {
                    for d in devices {
                        flatten_basic(d);
                    }
                }
            }
            "ResourceClaim" => {
                if let Some(spec) = object.get_mut("spec") {
                    wrap_requests(spec);
                }
            }
            "ResourceClaimTemplate" => {
                if let Some(spec) = object.pointer_mut("/spec/spec") {
                    wrap_requests(spec);
                }
            }
            _ => {}
        }
    }
    if let Some(v) = object.get_mut("apiVersion") {
        *v = Value::String(format!("{GROUP}/v1"));
    }
    object
}

/// `{name, basic: {...}}` to `{name, ...}`.
fn flatten_basic(device: &mut Value) {
    let Some(obj) = device.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(basic)) = obj.remove("basic") {
        for (k, v) in basic {
            obj.entry(k).or_insert(v);
        }
    }
}

/// A `v1beta1` claim spec's requests: the flat fields of a single request
/// go into `exactly` (upstream's conversion).
fn wrap_requests(spec: &mut Value) {
    const FLAT: [&str; 7] = [
        "deviceClassName",
        "selectors",
        "allocationMode",
        "count",
        "adminAccess",
        "tolerations",
        "capacity",
    ];
    let Some(requests) = spec
        .pointer_mut("/devices/requests")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for r in requests {
        let Some(obj) = r.as_object_mut() else {
            continue;
        };
        let mut exactly = serde_json::Map::new();
        for f in FLAT {
            if let Some(v) = obj.remove(f) {
                exactly.insert(f.to_string(), v);
            }
        }
        if !exactly.is_empty() {
            obj.insert("exactly".into(), Value::Object(exactly));
        }
    }
}

/// A device attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    Int(i64),
    Bool(bool),
    Str(String),
    /// A semantic version, as written (parsed when CEL reads it).
    Version(String),
}

impl Attr {
    fn from_api(a: &api::DeviceAttribute) -> Option<Self> {
        if let Some(v) = a.int {
            Some(Self::Int(v))
        } else if let Some(v) = a.bool {
            Some(Self::Bool(v))
        } else if let Some(v) = &a.string {
            Some(Self::Str(v.clone()))
        } else {
            a.version.clone().map(Self::Version)
        }
    }
}

impl std::fmt::Display for Attr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(v) => write!(f, "{v}"),
            Self::Bool(v) => write!(f, "{v}"),
            Self::Str(v) | Self::Version(v) => f.write_str(v),
        }
    }
}

/// A quantity in [`Nanos`] as plain decimal text (`80000000000`, `0.5`).
pub fn nanos_text(v: Nanos) -> String {
    const ONE: Nanos = 1_000_000_000;
    let (sign, a) = if v < 0 { ("-", -v) } else { ("", v) };
    let (whole, frac) = (a / ONE, a % ONE);
    if frac == 0 {
        format!("{sign}{whole}")
    } else {
        let digits = format!("{frac:09}");
        format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
    }
}

/// Where a slice's (or a device's) devices can be used.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeScope {
    Name(String),
    /// `nodeSelector`: its terms (ORed), parsed and as written.
    Selector {
        terms: Vec<NodeSelectorTerm>,
        raw: Vec<Value>,
    },
    All,
    /// Each device says (`perDeviceNodeSelection`).
    PerDevice,
}

impl NodeScope {
    pub fn matches(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Name(n) => n == node,
            Self::Selector { terms, .. } => terms.iter().any(|t| t.matches(node, labels)),
            Self::All => true,
            Self::PerDevice => false,
        }
    }
}

/// A device taint (`NoSchedule`, `NoExecute`; `None` and others do not
/// keep pods off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// One device of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub name: String,
    /// By fully qualified name (`<domain>/<id>`; an unqualified name is
    /// qualified with the slice's driver).
    pub attributes: BTreeMap<String, Attr>,
    pub capacity: BTreeMap<String, Nanos>,
    /// (counter set, counter -> amount) the device consumes.
    pub consumes: Vec<(String, BTreeMap<String, Nanos>)>,
    pub taints: Vec<Taint>,
    /// With `perDeviceNodeSelection`: where this device can be used.
    pub scope: Option<NodeScope>,
    /// `bindingConditions`: PreBind waits until the claim's status shows
    /// each True for the device (DRADeviceBindingConditions).
    pub binding_conditions: Vec<String>,
    /// `bindingFailureConditions`: one True fails the binding.
    pub binding_failure_conditions: Vec<String>,
    /// `allowMultipleAllocations` (consumable capacity).
    pub allow_multiple: bool,
    /// The capacities with their request policies, names as written
    /// (consumable capacity).
    pub capacities: Vec<super::dra_capacity::DeviceCapacity>,
    /// `bindsToNode`: the allocation is pinned to the node.
    pub binds_to_node: bool,
}

/// A counter set of a slice (partitionable devices).
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSet {
    pub name: String,
    pub counters: BTreeMap<String, Nanos>,
}

/// A ResourceSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    /// `resourceSliceCount`: how many slices make the pool complete.
    pub slice_count: i64,
    pub scope: NodeScope,
    pub devices: Vec<Device>,
    pub counter_sets: Vec<CounterSet>,
}

impl Slice {
    pub fn from_api(s: &api::ResourceSlice) -> Result<Self, String> {
        let spec = &s.spec;
        let name = s.metadata.name.clone().unwrap_or_default();
        let driver = spec.driver.clone();
        let scope = if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
            NodeScope::Name(n.clone())
        } else if spec.all_nodes == Some(true) {
            NodeScope::All
        } else if let Some(sel) = &spec.node_selector {
            selector_scope(sel).map_err(|e| format!("spec.nodeSelector: {e}"))?
        } else if spec.per_device_node_selection == Some(true) {
            NodeScope::PerDevice
        } else {
            return Err("spec: one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set".into());
        };
        let mut devices = Vec::new();
        for (i, d) in spec.devices.iter().flatten().enumerate() {
            devices.push(device(d, &driver).map_err(|e| format!("spec.devices[{i}].{e}"))?);
        }
        let mut counter_sets = Vec::new();
        for (i, c) in spec.shared_counters.iter().flatten().enumerate() {
            let mut counters = BTreeMap::new();
            for (k, v) in &c.counters {
                let q = nanos(&v.value.0)
                    .map_err(|e| format!("spec.sharedCounters[{i}].counters.{k}: {e}"))?;
                counters.insert(k.clone(), q);
            }
            counter_sets.push(CounterSet {
                name: c.name.clone(),
                counters,
            });
        }
        Ok(Self {
            name,
            pool: spec.pool.name.clone(),
            generation: spec.pool.generation,
            slice_count: spec.pool.resource_slice_count,
            driver,
            scope,
            devices,
            counter_sets,
        })
    }
}

fn selector_scope(sel: &k8s_openapi::api::core::v1::NodeSelector) -> Result<NodeScope, String> {
    Ok(NodeScope::Selector {
        terms: terms(sel)?,
        raw: sel
            .node_selector_terms
            .iter()
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect(),
    })
}

fn terms(sel: &k8s_openapi::api::core::v1::NodeSelector) -> Result<Vec<NodeSelectorTerm>, String> {
    sel.node_selector_terms
        .iter()
        .map(NodeSelectorTerm::parse)
        .collect()
}

/// The fully qualified name of an attribute or capacity `name` of a
/// device of `driver`.
pub fn qualified(name: &str, driver: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{driver}/{name}")
    }
}

fn device(d: &api::Device, driver: &str) -> Result<Device, String> {
    let mut attributes = BTreeMap::new();
    for (k, a) in d.attributes.iter().flatten() {
        match Attr::from_api(a) {
            Some(v) => {
                attributes.insert(qualified(k, driver), v);
            }
            None => return Err(format!("attributes.{k}: no value set")),
        }
    }
    let mut capacity = BTreeMap::new();
    for (k, c) in d.capacity.iter().flatten() {
        let q = nanos(&c.value.0).map_err(|e| format!("capacity.{k}: {e}"))?;
        capacity.insert(qualified(k, driver), q);
    }
    let mut consumes = Vec::new();
    for (i, c) in d.consumes_counters.iter().flatten().enumerate() {
        let mut counters = BTreeMap::new();
        for (k, v) in &c.counters {
            let q = nanos(&v.value.0)
                .map_err(|e| format!("consumesCounters[{i}].counters.{k}: {e}"))?;
            counters.insert(k.clone(), q);
        }
        consumes.push((c.counter_set.clone(), counters));
    }
    let taints = d
        .taints
        .iter()
        .flatten()
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        })
        .collect();
    let scope = if let Some(n) = d.node_name.as_ref().filter(|n| !n.is_empty()) {
        Some(NodeScope::Name(n.clone()))
    } else if d.all_nodes == Some(true) {
        Some(NodeScope::All)
    } else if let Some(sel) = &d.node_selector {
        Some(selector_scope(sel).map_err(|e| format!("nodeSelector: {e}"))?)
    } else {
        None
    };
    Ok(Device {
        name: d.name.clone(),
        attributes,
        capacity,
        consumes,
        taints,
        scope,
        binding_conditions: d.binding_conditions.clone().unwrap_or_default(),
        binding_failure_conditions: d.binding_failure_conditions.clone().unwrap_or_default(),
        allow_multiple: d.allow_multiple_allocations == Some(true),
        capacities: super::dra_capacity::device_capacities(d)?,
        binds_to_node: d.binds_to_node == Some(true),
    })
}

/// A DeviceClass.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub name: String,
    /// CEL selectors, in order.
    pub selectors: Vec<String>,
    /// `spec.config`, as written (copied into allocations).
    pub config: Vec<Value>,
    /// `spec.extendedResourceName` (DRAExtendedResource).
    pub extended_resource_name: Option<String>,
    /// `metadata.creationTimestamp` as written (RFC 3339; the newer class
    /// wins a clash of extended resource names).
    pub created: String,
}

impl Class {
    pub fn from_api(c: &api::DeviceClass) -> Result<Self, String> {
        let spec = c.spec.clone().unwrap_or_default();
        let selectors = spec
            .selectors
            .iter()
            .flatten()
            .map(|s| {
                s.cel
                    .as_ref()
                    .map(|c| c.expression.clone())
                    .unwrap_or_default()
            })
            .collect();
        let config = spec
            .config
            .iter()
            .flatten()
            .map(|cfg| serde_json::to_value(cfg).unwrap_or_default())
            .collect();
        Ok(Self {
            name: c.metadata.name.clone().unwrap_or_default(),
            selectors,
            config,
            extended_resource_name: spec.extended_resource_name.filter(|n| !n.is_empty()),
            created: c
                .metadata
                .creation_timestamp
                .as_ref()
                .and_then(|t| serde_json::to_value(t).ok())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        })
    }
}

/// How many devices a request wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    ExactCount(i64),
    All,
}

/// A toleration of a request (for device taints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
    /// As written, for the allocation result.
    pub raw: Value,
}

impl Toleration {
    /// Upstream's `ToleratesTaint`.
    pub fn tolerates(&self, t: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != t.effect {
            return false;
        }
        if !self.key.is_empty() && self.key != t.key {
            return false;
        }
        match self.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => self.value == t.value,
            _ => false,
        }
    }
}

/// One way to satisfy a request: a class, selectors, how many.
#[derive(Debug, Clone, PartialEq)]
pub struct Exact {
    /// `<request>` or `<request>/<subrequest>`.
    pub name: String,
    pub class: String,
    pub selectors: Vec<String>,
    pub mode: Mode,
    pub admin_access: bool,
    pub tolerations: Vec<Toleration>,
    /// `capacity.requests` (consumable capacity), by name as written.
    pub capacity: BTreeMap<String, super::dra_capacity::Q>,
}

/// A request of a claim: one exact request, or a prioritized list.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub name: String,
    /// One entry for `exactly`, the subrequests in order for
    /// `firstAvailable`.
    pub alternatives: Vec<Exact>,
    pub first_available: bool,
}

/// A claim constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// Requests it applies to (empty: all).
    pub requests: Vec<String>,
    pub attribute: String,
    /// `distinctAttribute` (else `matchAttribute`).
    pub distinct: bool,
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocated {
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub admin_access: bool,
    /// The device's binding conditions, copied by the allocator.
    pub binding_conditions: Vec<String>,
    pub binding_failure_conditions: Vec<String>,
    /// `shareID`: one share of a device that allows multiple allocations.
    pub share_id: Option<String>,
    /// `consumedCapacity`, by name as written.
    pub consumed: BTreeMap<String, Nanos>,
}

impl Allocated {
    /// `<driver>/<pool>/<device>`.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// A claim's `status.allocation`.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub results: Vec<Allocated>,
    /// Where the claim can be used (`None`: anywhere).
    pub node_selector: Option<Vec<NodeSelectorTerm>>,
    /// As written (kept to write it back unchanged).
    pub raw: Value,
    /// `allocationTimestamp` (binding conditions time out from it).
    pub allocated_at: Option<k8s_openapi::jiff::Timestamp>,
}

/// A pod that uses a claim (`status.reservedFor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    pub name: String,
    pub uid: String,
    pub resource: String,
}

/// A condition of an allocated device (`status.devices[].conditions`)
/// whose status is True.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrueCondition {
    pub type_: String,
    pub reason: String,
    pub message: String,
}

/// A ResourceClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub deleting: bool,
    /// The uid of its controlling owner (the pod a template claim was
    /// made for).
    pub owner_uid: Option<String>,
    pub requests: Vec<Request>,
    pub constraints: Vec<Constraint>,
    /// `spec.devices.config`, as written.
    pub config: Vec<Value>,
    pub allocation: Option<Allocation>,
    pub reserved_for: Vec<Consumer>,
    pub finalizers: Vec<String>,
    /// `status.devices`: per allocated device (`<driver>/<pool>/<device>`),
    /// its conditions that are True (binding conditions).
    pub device_conditions: Vec<(String, Vec<TrueCondition>)>,
    /// The annotation `resource.kubernetes.io/extended-resource-claim:
    /// "true"`: the scheduler made it for a pod's extended resources.
    pub extended: bool,
}

impl Claim {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn from_api(c: &api::ResourceClaim) -> Result<Self, String> {
        let meta = &c.metadata;
        let spec = c.spec.clone().unwrap_or_default();
        let mut requests = Vec::new();
        for (i, r) in spec
            .devices
            .iter()
            .flat_map(|d| d.requests.iter().flatten())
            .enumerate()
        {
            requests.push(request(r).map_err(|e| format!("spec.devices.requests[{i}].{e}"))?);
        }
        let constraints = spec
            .devices
            .iter()
            .flat_map(|d| d.constraints.iter().flatten())
            .map(|k| Constraint {
                requests: k.requests.clone().unwrap_or_default(),
                attribute: k
                    .match_attribute
                    .clone()
                    .or_else(|| k.distinct_attribute.clone())
                    .unwrap_or_default(),
                distinct: k.match_attribute.is_none() && k.distinct_attribute.is_some(),
            })
            .collect();
        let config = spec
            .devices
            .iter()
            .flat_map(|d| d.config.iter().flatten())
            .map(|cfg| serde_json::to_value(cfg).unwrap_or_default())
            .collect();
        let status = c.status.as_ref();
        let allocation = match status.and_then(|s| s.allocation.as_ref()) {
            Some(a) => Some(allocation(a)?),
            None => None,
        };
        let reserved_for = status
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .map(|r| Consumer {
                name: r.name.clone(),
                uid: r.uid.clone(),
                resource: r.resource.clone(),
            })
            .collect();
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let name = meta.name.clone().unwrap_or_default();
        Ok(Self {
            // A manifest's claim may have no uid: its key stands in, as
            // for pods.
            uid: meta
                .uid
                .clone()
                .unwrap_or_else(|| format!("{namespace}/{name}")),
            namespace,
            name,
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            owner_uid: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            requests,
            constraints,
            config,
            allocation,
            reserved_for,
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            device_conditions: status
                .and_then(|s| s.devices.as_ref())
                .into_iter()
                .flatten()
                .map(|d| {
                    let id = format!("{}/{}/{}", d.driver, d.pool, d.device);
                    let true_types = d
                        .conditions
                        .iter()
                        .flatten()
                        .filter(|c| c.status == "True")
                        .map(|c| TrueCondition {
                            type_: c.type_.clone(),
                            reason: c.reason.clone(),
                            message: c.message.clone(),
                        })
                        .collect();
                    (id, true_types)
                })
                .collect(),
            extended: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM))
                .is_some_and(|v| v == "true"),
        })
    }

    /// Whether `uid` is among the claim's consumers.
    pub fn reserved_for_pod(&self, uid: &str) -> bool {
        self.reserved_for.iter().any(|c| c.uid == uid)
    }
}

fn exact(name: String, e: &api::ExactDeviceRequest) -> Result<Exact, String> {
    let mode = match e.allocation_mode.as_deref() {
        None | Some("ExactCount") => Mode::ExactCount(e.count.unwrap_or(1)),
        Some("All") => Mode::All,
        Some(other) => return Err(format!("allocationMode: unsupported {other:?}")),
    };
    Ok(Exact {
        name,
        class: e.device_class_name.clone(),
        selectors: selectors(e.selectors.as_deref()),
        mode,
        admin_access: e.admin_access == Some(true),
        tolerations: tolerations(e.tolerations.as_deref()),
        capacity: super::dra_capacity::capacity_requests(e.capacity.as_ref())?,
    })
}

fn request(r: &api::DeviceRequest) -> Result<Request, String> {
    if let Some(e) = &r.exactly {
        return Ok(Request {
            name: r.name.clone(),
            alternatives: vec![exact(r.name.clone(), e).map_err(|e| format!("exactly.{e}"))?],
            first_available: false,
        });
    }
    let mut alternatives = Vec::new();
    for (i, s) in r.first_available.iter().flatten().enumerate() {
        let e = api::ExactDeviceRequest {
            device_class_name: s.device_class_name.clone(),
            selectors: s.selectors.clone(),
            allocation_mode: s.allocation_mode.clone(),
            count: s.count,
            tolerations: s.tolerations.clone(),
            capacity: s.capacity.clone(),
            derived_attributes: s.derived_attributes.clone(),
            admin_access: None,
        };
        alternatives.push(
            exact(format!("{}/{}", r.name, s.name), &e)
                .map_err(|e| format!("firstAvailable[{i}].{e}"))?,
        );
    }
    Ok(Request {
        name: r.name.clone(),
        first_available: !alternatives.is_empty(),
        alternatives,
    })
}

fn selectors(s: Option<&[api::DeviceSelector]>) -> Vec<String> {
    s.into_iter()
        .flatten()
        .map(|s| {
            s.cel
                .as_ref()
                .map(|c| c.expression.clone())
                .unwrap_or_default()
        })
        .collect()
}

fn tolerations(t: Option<&[api::DeviceToleration]>) -> Vec<Toleration> {
    t.into_iter()
        .flatten()
        .map(|t| Toleration {
            key: t.key.clone().unwrap_or_default(),
            operator: t.operator.clone().unwrap_or_default(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone().unwrap_or_default(),
            raw: serde_json::to_value(t).unwrap_or_default(),
        })
        .collect()
}

fn allocation(a: &api::AllocationResult) -> Result<Allocation, String> {
    super::dra_capacity::check_consumed(a)?;
    let results = a
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| Allocated {
            request: r.request.clone(),
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            admin_access: r.admin_access == Some(true),
            share_id: r.share_id.clone(),
            consumed: super::dra_capacity::consumed_capacity(r).unwrap_or_default(),
            binding_conditions: r.binding_conditions.clone().unwrap_or_default(),
            binding_failure_conditions: r.binding_failure_conditions.clone().unwrap_or_default(),
        })
        .collect();
    let node_selector = match &a.node_selector {
        Some(sel) => Some(terms(sel).map_err(|e| format!("status.allocation.nodeSelector: {e}"))?),
        None => None,
    };
    Ok(Allocation {
        results,
        node_selector,
        raw: serde_json::to_value(a).unwrap_or_default(),
        allocated_at: a.allocation_timestamp.as_ref().map(|t| t.0),
    })
}
