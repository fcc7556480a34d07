//! PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
//! CSIDrivers and CSIStorageCapacities as the volume plugins read them,
//! validated once (as Pods and Nodes are). Field semantics follow the API
//! server's defaulting: a missing `volumeMode` is `Filesystem`, a missing
//! `volumeBindingMode` is `Immediate`, a missing `storageCapacity` is false.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::quantity::value;
use super::selector::{LabelSelector, NodeSelectorTerm};
use super::ModelError;

/// Set on a claim by the scheduler: provision its volume for this node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set on a claim by the PV controller once the binding is complete.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a PV (or claim) bound by a controller rather than by the user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The storage class annotation that predates `storageClassName`.
pub const ANN_STORAGE_CLASS_BETA: &str = "volume.beta.kubernetes.io/storage-class";
/// A class whose volumes are never provisioned (static local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A volume access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    /// Newer than 1.20 (its API server refuses it): one pod per claim.
    ReadWriteOncePod,
}

impl AccessMode {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "ReadWriteOnce" => Self::ReadWriteOnce,
            "ReadOnlyMany" => Self::ReadOnlyMany,
            "ReadWriteMany" => Self::ReadWriteMany,
            "ReadWriteOncePod" => Self::ReadWriteOncePod,
            o => return Err(format!("unknown access mode {o:?}")),
        })
    }
}

/// `Filesystem` (the default) or `Block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeMode {
    Filesystem,
    Block,
}

impl VolumeMode {
    fn parse(s: Option<&str>) -> Result<Self, String> {
        match s {
            None | Some("Filesystem") => Ok(Self::Filesystem),
            Some("Block") => Ok(Self::Block),
            Some(o) => Err(format!("unknown volume mode {o:?}")),
        }
    }
}

/// A PV's `claimRef`, or the claim a binding writes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    /// Empty when the PV is pre-bound by name only.
    pub uid: String,
}

/// A CSI volume: its driver and handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiSource {
    pub driver: String,
    pub volume_handle: String,
}

/// A PersistentVolume.
#[derive(Debug, Clone, PartialEq)]
pub struct PersistentVolume {
    pub name: String,
    /// `metadata.resourceVersion` as a number (0 when absent).
    pub resource_version: u64,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.capacity.storage` in bytes.
    pub capacity: i64,
    pub access_modes: Vec<AccessMode>,
    pub volume_mode: VolumeMode,
    /// Its storage class (`""`: none).
    pub class: String,
    pub claim_ref: Option<ClaimRef>,
    /// `spec.nodeAffinity.required.nodeSelectorTerms` (ORed).
    pub node_affinity: Option<Vec<NodeSelectorTerm>>,
    /// `status.phase` (`Available`, `Bound`, ...; `Pending` when absent).
    pub phase: String,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub csi: Option<CsiSource>,
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct PersistentVolumeClaim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: u64,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.resources.requests.storage` in bytes.
    pub request: i64,
    pub access_modes: Vec<AccessMode>,
    pub volume_mode: VolumeMode,
    /// Its storage class (`""`: none).
    pub class: String,
    pub selector: Option<LabelSelector>,
    /// `spec.volumeName` (`""`: not bound).
    pub volume_name: String,
    pub deleting: bool,
    pub phase: String,
}

impl PersistentVolumeClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    /// Bound, and the PV controller finished the binding (upstream's
    /// `isPVCFullyBound`).
    pub fn fully_bound(&self) -> bool {
        !self.volume_name.is_empty() && self.annotations.contains_key(ANN_BIND_COMPLETED)
    }

    /// The node the scheduler selected for provisioning, if any.
    pub fn selected_node(&self) -> Option<&str> {
        self.annotations.get(ANN_SELECTED_NODE).map(String::as_str)
    }
}

/// A claim's key: `namespace/name`.
pub fn claim_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// When a class's claims are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingMode {
    Immediate,
    WaitForFirstConsumer,
}

/// A StorageClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageClass {
    pub name: String,
    pub resource_version: u64,
    pub provisioner: String,
    pub binding_mode: BindingMode,
    /// `allowedTopologies` (ORed terms of ANDed `key in values`).
    pub allowed_topologies: Vec<Vec<(String, Vec<String>)>>,
}

impl StorageClass {
    /// Upstream's `MatchTopologySelectorTerms`: no terms match every node.
    pub fn allows(&self, labels: &BTreeMap<String, String>) -> bool {
        self.allowed_topologies.is_empty()
            || self.allowed_topologies.iter().any(|term| {
                term.iter()
                    .all(|(k, values)| labels.get(k).is_some_and(|v| values.contains(v)))
            })
    }
}

/// A CSINode: the CSI drivers on a node and their attach limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiNode {
    pub name: String,
    pub resource_version: u64,
    /// (driver, `allocatable.count`).
    pub drivers: Vec<(String, Option<i64>)>,
}

/// A CSIDriver, for what the volume plugins read of it: whether the
/// driver publishes CSIStorageCapacity objects that scheduling must
/// respect (`spec.storageCapacity`, VolumeBinding) and whether pods with
/// its volumes must wait for a node whose CSINode lists it
/// (`spec.preventPodSchedulingIfMissing`, NodeVolumeLimits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiDriver {
    pub name: String,
    pub resource_version: u64,
    pub storage_capacity: bool,
    pub prevent_pod_scheduling_if_missing: bool,
}

/// A CSIStorageCapacity: how much of a class's storage the nodes its
/// `nodeTopology` selects can still provision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiStorageCapacity {
    pub namespace: String,
    pub name: String,
    pub resource_version: u64,
    pub class: String,
    /// `capacity` in bytes (`None`: not reported, which is no capacity).
    pub capacity: Option<i64>,
    /// `maximumVolumeSize` in bytes, which upstream prefers when set.
    pub maximum_volume_size: Option<i64>,
    /// `nodeTopology` (`None`: reachable from no node).
    pub node_topology: Option<LabelSelector>,
}

impl CsiStorageCapacity {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    /// Upstream's `capacitySufficient`: the maximum volume size if set,
    /// else the capacity, holds `bytes`.
    pub fn sufficient(&self, bytes: i64) -> bool {
        self.maximum_volume_size
            .or(self.capacity)
            .is_some_and(|limit| limit >= bytes)
    }

    /// Upstream's `nodeHasAccess`: the node's labels match `nodeTopology`.
    pub fn reachable_from(&self, labels: &BTreeMap<String, String>) -> bool {
        self.node_topology
            .as_ref()
            .is_some_and(|t| t.matches(labels))
    }
}

fn err_for(object: String) -> impl Fn(&str, String) -> ModelError {
    move |field: &str, cause: String| ModelError {
        object: object.clone(),
        field: field.to_string(),
        cause,
    }
}

fn version(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn storage_bytes(list: Option<&BTreeMap<String, Quantity>>) -> Result<i64, String> {
    match list.and_then(|l| l.get("storage")) {
        Some(q) => value(&q.0).map_err(|e| e.to_string()),
        None => Ok(0),
    }
}

fn access_modes(modes: Option<&Vec<String>>) -> Result<Vec<AccessMode>, String> {
    modes
        .into_iter()
        .flatten()
        .map(|m| AccessMode::parse(m))
        .collect()
}

/// The class of an object: the beta annotation, else `storageClassName`.
fn class_of(meta: &ObjectMeta, spec_class: Option<&String>) -> String {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS_BETA))
        .or(spec_class)
        .cloned()
        .unwrap_or_default()
}

impl PersistentVolume {
    pub fn from_k8s(pv: &k8s::PersistentVolume) -> Result<Self, ModelError> {
        let meta = &pv.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let err = err_for(format!("PersistentVolume {name}"));
        if name.is_empty() {
            return Err(err("metadata.name", "missing".into()));
        }
        let spec = pv.spec.clone().unwrap_or_default();
        let capacity =
            storage_bytes(spec.capacity.as_ref()).map_err(|c| err("spec.capacity.storage", c))?;
        let access_modes =
            access_modes(spec.access_modes.as_ref()).map_err(|c| err("spec.accessModes", c))?;
        let volume_mode = VolumeMode::parse(spec.volume_mode.as_deref())
            .map_err(|c| err("spec.volumeMode", c))?;
        let node_affinity = match spec
            .node_affinity
            .as_ref()
            .and_then(|a| a.required.as_ref())
        {
            None => None,
            Some(sel) => {
                let mut terms = Vec::new();
                for (i, t) in sel.node_selector_terms.iter().enumerate() {
                    let field = format!("spec.nodeAffinity.required.nodeSelectorTerms[{i}]");
                    terms.push(NodeSelectorTerm::parse(t).map_err(|c| err(&field, c))?);
                }
                Some(terms)
            }
        };
        Ok(Self {
            resource_version: version(meta),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            capacity,
            access_modes,
            volume_mode,
            class: class_of(meta, spec.storage_class_name.as_ref()),
            claim_ref: spec.claim_ref.as_ref().map(|r| ClaimRef {
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                uid: r.uid.clone().unwrap_or_default(),
            }),
            node_affinity,
            phase: pv
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
            deleting: meta.deletion_timestamp.is_some(),
            csi: spec.csi.as_ref().map(|c| CsiSource {
                driver: c.driver.clone(),
                volume_handle: c.volume_handle.clone(),
            }),
            name,
        })
    }

    /// Upstream's `CheckNodeAffinity`: the PV may be used from a node with
    /// these labels. Upstream passes no node fields, so `matchFields`
    /// see an empty node name.
    pub fn fits_node(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.node_affinity {
            None => true,
            Some(terms) => terms.iter().any(|t| t.matches("", labels)),
        }
    }

    /// Upstream's `IsVolumeBoundToClaim`: pre-bound or bound to `claim`
    /// (the uid must match when the reference has one).
    pub fn bound_to(&self, claim: &PersistentVolumeClaim) -> bool {
        self.claim_ref.as_ref().is_some_and(|r| {
            r.name == claim.name
                && r.namespace == claim.namespace
                && (r.uid.is_empty() || r.uid == claim.uid)
        })
    }
}

impl PersistentVolumeClaim {
    pub fn from_k8s(pvc: &k8s::PersistentVolumeClaim) -> Result<Self, ModelError> {
        let meta = &pvc.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let err = err_for(format!("PersistentVolumeClaim {namespace}/{name}"));
        if name.is_empty() {
            return Err(err("metadata.name", "missing".into()));
        }
        let spec = pvc.spec.clone().unwrap_or_default();
        let requests = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
        let request =
            storage_bytes(requests).map_err(|c| err("spec.resources.requests.storage", c))?;
        let selector = spec
            .selector
            .as_ref()
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|c| err("spec.selector", c))?;
        Ok(Self {
            uid: meta
                .uid
                .clone()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| claim_key(&namespace, &name)),
            resource_version: version(meta),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            request,
            access_modes: access_modes(spec.access_modes.as_ref())
                .map_err(|c| err("spec.accessModes", c))?,
            volume_mode: VolumeMode::parse(spec.volume_mode.as_deref())
                .map_err(|c| err("spec.volumeMode", c))?,
            class: class_of(meta, spec.storage_class_name.as_ref()),
            selector,
            volume_name: spec.volume_name.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            phase: pvc
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
            namespace,
            name,
        })
    }
}

impl StorageClass {
    pub fn from_k8s(sc: &storage::StorageClass) -> Result<Self, ModelError> {
        let name = sc.metadata.name.clone().unwrap_or_default();
        let err = err_for(format!("StorageClass {name}"));
        if name.is_empty() {
            return Err(err("metadata.name", "missing".into()));
        }
        let binding_mode = match sc.volume_binding_mode.as_deref() {
            None | Some("Immediate") => BindingMode::Immediate,
            Some("WaitForFirstConsumer") => BindingMode::WaitForFirstConsumer,
            Some(o) => {
                return Err(err(
                    "volumeBindingMode",
                    format!("unknown mode {o:?} (Immediate or WaitForFirstConsumer)"),
                ))
            }
        };
        let allowed_topologies = sc
            .allowed_topologies
            .iter()
            .flatten()
            .map(|t| {
                t.match_label_expressions
                    .iter()
                    .flatten()
                    .map(|e| (e.key.clone(), e.values.clone()))
                    .collect()
            })
            .collect();
        Ok(Self {
            resource_version: version(&sc.metadata),
            provisioner: sc.provisioner.clone(),
            binding_mode,
            allowed_topologies,
            name,
        })
    }
}

impl CsiNode {
    pub fn from_k8s(n: &storage::CSINode) -> Result<Self, ModelError> {
        let name = n.metadata.name.clone().unwrap_or_default();
        let err = err_for(format!("CSINode {name}"));
        if name.is_empty() {
            return Err(err("metadata.name", "missing".into()));
        }
        let mut drivers = Vec::new();
        for (i, d) in n.spec.drivers.iter().enumerate() {
            let count = d.allocatable.as_ref().and_then(|a| a.count);
            if count.is_some_and(|c| c < 0) {
                return Err(err(
                    &format!("spec.drivers[{i}].allocatable.count"),
                    "must not be negative".into(),
                ));
            }
            drivers.push((d.name.clone(), count.map(i64::from)));
        }
        Ok(Self {
            resource_version: version(&n.metadata),
            drivers,
            name,
        })
    }
}

impl CsiDriver {
    pub fn from_k8s(d: &storage::CSIDriver) -> Result<Self, ModelError> {
        let name = d.metadata.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(err_for("CSIDriver".into())(
                "metadata.name",
                "missing".into(),
            ));
        }
        Ok(Self {
            resource_version: version(&d.metadata),
            storage_capacity: d.spec.storage_capacity.unwrap_or(false),
            prevent_pod_scheduling_if_missing: d
                .spec
                .prevent_pod_scheduling_if_missing
                .unwrap_or(false),
            name,
        })
    }
}

impl CsiStorageCapacity {
    pub fn from_k8s(c: &storage::CSIStorageCapacity) -> Result<Self, ModelError> {
        let meta = &c.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let err = err_for(format!("CSIStorageCapacity {namespace}/{name}"));
        if name.is_empty() {
            return Err(err("metadata.name", "missing".into()));
        }
        if c.storage_class_name.is_empty() {
            return Err(err("storageClassName", "missing".into()));
        }
        let bytes = |q: Option<&Quantity>, field: &str| {
            q.map(|q| value(&q.0).map_err(|e| err(field, e.to_string())))
                .transpose()
        };
        let node_topology = c
            .node_topology
            .as_ref()
            .map(|t| LabelSelector::parse(t).map_err(|m| err("nodeTopology", m)))
            .transpose()?;
        Ok(Self {
            resource_version: version(meta),
            class: c.storage_class_name.clone(),
            capacity: bytes(c.capacity.as_ref(), "capacity")?,
            maximum_volume_size: bytes(c.maximum_volume_size.as_ref(), "maximumVolumeSize")?,
            node_topology,
            namespace,
            name,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pv(v: serde_json::Value) -> Result<PersistentVolume, ModelError> {
        PersistentVolume::from_k8s(&serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_local_pv_reads_its_affinity_capacity_and_class() {
        let p = pv(json!({
            "metadata": {"name": "local-1", "resourceVersion": "42"},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "local": {"path": "/mnt/disks/1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}
            },
            "status": {"phase": "Available"}
        }))
        .unwrap();
        assert_eq!(p.resource_version, 42);
        assert_eq!(p.capacity, 100 << 30);
        assert_eq!(p.class, "local");
        assert_eq!(p.volume_mode, VolumeMode::Filesystem);
        let on = |n: &str| BTreeMap::from([("kubernetes.io/hostname".to_string(), n.to_string())]);
        assert!(p.fits_node(&on("n1")));
        assert!(!p.fits_node(&on("n2")));
    }

    #[test]
    fn the_beta_class_annotation_wins_and_bad_fields_are_named() {
        let p = pv(json!({
            "metadata": {"name": "x", "annotations": {ANN_STORAGE_CLASS_BETA: "old"}},
            "spec": {"storageClassName": "new"}
        }))
        .unwrap();
        assert_eq!(p.class, "old");
        let e = pv(json!({"metadata": {"name": "x"}, "spec": {"accessModes": ["Sometimes"]}}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "PersistentVolume x: spec.accessModes: unknown access mode \"Sometimes\""
        );
    }

    #[test]
    fn claims_know_when_they_are_fully_bound() {
        let c: k8s::PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ml", "uid": "u1",
                         "annotations": {ANN_BIND_COMPLETED: "yes"}},
            "spec": {"volumeName": "pv-1", "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
        let c = PersistentVolumeClaim::from_k8s(&c).unwrap();
        assert_eq!(c.key(), "ml/data");
        assert_eq!(c.request, 1 << 30);
        assert!(c.fully_bound());
        let mut p = pv(json!({"metadata": {"name": "pv-1"}, "spec": {
            "claimRef": {"namespace": "ml", "name": "data"}}}))
        .unwrap();
        assert!(p.bound_to(&c), "pre-bound by name");
        p.claim_ref.as_mut().unwrap().uid = "other".into();
        assert!(!p.bound_to(&c));
    }

    #[test]
    fn classes_default_to_immediate_and_match_allowed_topologies() {
        let sc: storage::StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "zonal"}, "provisioner": "csi.example.com",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["a", "b"]}]}]
        }))
        .unwrap();
        let sc = StorageClass::from_k8s(&sc).unwrap();
        assert_eq!(sc.binding_mode, BindingMode::Immediate);
        let zone = |z: &str| BTreeMap::from([("topology.kubernetes.io/zone".into(), z.into())]);
        assert!(sc.allows(&zone("b")));
        assert!(!sc.allows(&zone("c")));
        assert!(!sc.allows(&BTreeMap::new()));
    }
}
