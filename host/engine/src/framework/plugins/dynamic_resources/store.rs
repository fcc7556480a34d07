//! What DynamicResources knows of the cluster's DRA objects: DeviceClasses,
//! ResourceSlices and ResourceClaims as the API shows them, plus the
//! allocations reserved in this scheduler's cycles and not yet written
//! ("in flight", upstream's assume cache), so that no device is handed out
//! twice. One per scheduler (every profile's plugin shares it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use super::allocator::{pool_of, DeviceId, InUse, Index, Inputs, PoolGens, SliceData};
use super::capacity::{self, Consumed, SharedUse};
use super::cel;
use super::taint_rules::{self, TaintRule};
use crate::framework::objects::{ApiKind, StatusWrite};
use crate::model::dra::{self, Claim, Class, Slice};

/// The versions read, preferred first (1.34+ serves `v1`; 1.32 and 1.33
/// serve the betas).
pub const VERSIONS: &[&str] = &["v1", "v1beta2", "v1beta1"];

const HINT: &str = "is resource.k8s.io served? Kubernetes 1.34+, or the beta APIs enabled";

pub const DEVICE_CLASS: ApiKind = ApiKind {
    group: dra::GROUP,
    versions: VERSIONS,
    kind: "DeviceClass",
    plural: "deviceclasses",
    namespaced: false,
    hint: HINT,
};

pub const RESOURCE_SLICE: ApiKind = ApiKind {
    group: dra::GROUP,
    versions: VERSIONS,
    kind: "ResourceSlice",
    plural: "resourceslices",
    namespaced: false,
    hint: HINT,
};

pub const RESOURCE_CLAIM: ApiKind = ApiKind {
    group: dra::GROUP,
    versions: VERSIONS,
    kind: "ResourceClaim",
    plural: "resourceclaims",
    namespaced: true,
    hint: HINT,
};

/// Templates of claims (kube-controller-manager makes a claim of one for
/// each pod that names it; `simulate` does the same, see
/// [`super::templates`]).
pub const RESOURCE_CLAIM_TEMPLATE: ApiKind = ApiKind {
    group: dra::GROUP,
    versions: VERSIONS,
    kind: "ResourceClaimTemplate",
    plural: "resourceclaimtemplates",
    namespaced: true,
    hint: HINT,
};

/// An allocation reserved in a cycle, not yet seen in the claim's status.
#[derive(Debug, Clone)]
pub struct InFlight {
    pub claim: String,
    pub pod_uid: String,
    /// Devices held whole.
    pub devices: Vec<DeviceId>,
    /// Shares of devices that allow multiple allocations.
    pub shares: Vec<(DeviceId, Consumed)>,
}

#[derive(Default)]
struct Inner {
    classes: HashMap<String, Arc<Class>>,
    slices: BTreeMap<String, Arc<SliceData>>,
    claims: HashMap<String, Arc<Claim>>,
    /// Objects that could not be read, by kind and key, with why.
    invalid: HashMap<(&'static str, String), String>,
    /// By claim uid.
    in_flight: HashMap<String, InFlight>,
    /// Statuses to write (PostFilter's deallocations).
    writes: Vec<StatusWrite>,
    /// The slices and classes indexed, until one of them changes.
    index: Option<Arc<Index>>,
    /// How many holders (allocated claims outside admin access, and
    /// allocations in flight) each device has; `in_use` is the devices
    /// with at least one. Kept as claims and reservations change, so that
    /// a cycle's inputs cost no rebuild.
    holders: HashMap<DeviceId, u32>,
    in_use: InUse,
    /// Changed for a pool whenever `in_use` changes for one of its
    /// devices (to the next value of `generation`).
    generations: PoolGens,
    generation: u64,
    /// Devices that allow multiple allocations with their shares
    /// (consumable capacity): allocated results with a `shareID`, and
    /// reservations in flight.
    shared: SharedUse,
    /// DeviceTaintRules by name, and each slice as published (before the
    /// rules' taints), by key.
    taint_rules: BTreeMap<String, TaintRule>,
    published: BTreeMap<String, Arc<Slice>>,
}

/// The devices a claim's allocation holds whole (admin access holds
/// none; a result with a `shareID` holds a share).
fn held_by(c: &Claim) -> impl Iterator<Item = DeviceId> + '_ {
    c.allocation
        .iter()
        .flat_map(|a| &a.results)
        .filter(|r| !r.admin_access && r.share_id.is_none())
        .map(|r| r.id())
}

/// The shares a claim's allocation holds, with their consumed capacity.
fn shares_of(c: &Claim) -> Vec<(DeviceId, Consumed)> {
    c.allocation
        .iter()
        .flat_map(|a| &a.results)
        .filter(|r| !r.admin_access && r.share_id.is_some())
        .map(|r| (r.id(), r.consumed.clone()))
        .collect()
}

impl Inner {
    /// Adds (`sign` 1) or gives back (-1) shares of devices.
    fn share(&mut self, shares: &[(DeviceId, Consumed)], sign: i8) {
        for (d, consumed) in shares {
            capacity::account(&mut self.shared, d, consumed, sign);
            self.generation += 1;
            self.generations
                .insert(pool_of(d).to_string(), self.generation);
        }
    }

    /// The slice as the allocator sees it: with the taints of the rules
    /// that select its devices.
    fn slice_data(&self, published: &Slice) -> Arc<SliceData> {
        let patched = taint_rules::apply(published, self.taint_rules.values());
        Arc::new(SliceData::new(patched.unwrap_or_else(|| published.clone())))
    }

    /// Every slice again, after a rule changed.
    fn repatch(&mut self) {
        let published: Vec<(String, Arc<Slice>)> = self
            .published
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        for (k, s) in published {
            let data = self.slice_data(&s);
            self.slices.insert(k, data);
        }
        self.index = None;
    }

    fn hold(&mut self, devices: impl Iterator<Item = DeviceId>) {
        for d in devices {
            let n = self.holders.entry(d.clone()).or_default();
            *n += 1;
            if *n == 1 {
                self.generation += 1;
                self.generations
                    .insert(pool_of(&d).to_string(), self.generation);
                self.in_use.insert(d);
            }
        }
    }

    fn release(&mut self, devices: impl Iterator<Item = DeviceId>) {
        for d in devices {
            if let Some(n) = self.holders.get_mut(&d) {
                *n -= 1;
                if *n == 0 {
                    self.holders.remove(&d);
                    self.in_use.remove(&d);
                    self.generation += 1;
                    self.generations
                        .insert(pool_of(&d).to_string(), self.generation);
                }
            }
        }
    }

    fn put_claim(&mut self, key: String, c: Arc<Claim>) {
        self.hold(held_by(&c).collect::<Vec<_>>().into_iter());
        self.share(&shares_of(&c), 1);
        if let Some(old) = self.claims.insert(key, c) {
            self.release(held_by(&old).collect::<Vec<_>>().into_iter());
            self.share(&shares_of(&old), -1);
        }
    }

    fn drop_claim(&mut self, key: &str) -> Option<Arc<Claim>> {
        let old = self.claims.remove(key)?;
        self.release(held_by(&old).collect::<Vec<_>>().into_iter());
        self.share(&shares_of(&old), -1);
        Some(old)
    }

    fn put_flight(&mut self, uid: String, f: InFlight) {
        self.hold(f.devices.clone().into_iter());
        self.share(&f.shares, 1);
        if let Some(old) = self.in_flight.insert(uid, f) {
            self.release(old.devices.into_iter());
            self.share(&old.shares, -1);
        }
    }

    fn drop_flight(&mut self, uid: &str) {
        if let Some(old) = self.in_flight.remove(uid) {
            self.release(old.devices.into_iter());
            self.share(&old.shares, -1);
        }
    }
}

/// A published device and whether a claim holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceUse {
    /// The slice's `nodeName` (empty for devices not local to one node).
    pub node: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub taken: bool,
    /// A device that allows multiple allocations: the shares held, and
    /// per capacity (name as written) its value and what the shares
    /// consume (consumable capacity).
    pub shares: Option<DeviceShares>,
}

/// The shares of a device that allows multiple allocations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceShares {
    pub held: u32,
    /// (capacity, value, consumed).
    pub capacity: Vec<(String, dra::Nanos, dra::Nanos)>,
}

/// What the store holds, for metrics ([`Store::usage`]).
#[derive(Debug, Default)]
pub struct Usage {
    pub devices: Vec<DeviceUse>,
    pub claims_allocated: usize,
    pub claims_pending: usize,
    /// Objects that could not be read, by kind.
    pub invalid: BTreeMap<&'static str, usize>,
}

/// The store.
#[derive(Default)]
pub struct Store {
    inner: Mutex<Inner>,
    pub cel: Arc<cel::Cache>,
}

/// Reads an object of `kind` at `version` into the `v1` shape.
fn decode<T: serde::de::DeserializeOwned>(
    kind: &str,
    version: &str,
    object: &Value,
) -> Result<T, String> {
    let v1 = dra::to_v1(kind, version, object.clone());
    serde_path_to_error::deserialize(v1).map_err(|e| {
        let path = e.path().to_string();
        format!("{path}: {}", e.into_inner())
    })
}

impl Store {
    /// A DeviceClass, ResourceSlice or ResourceClaim as the API shows it.
    pub fn apply(&self, kind: &ApiKind, version: &str, object: &Value, key: &str) {
        let mut inner = self.inner.lock();
        let parsed: Result<(), String> = match kind.kind {
            "DeviceClass" => decode(kind.kind, version, object)
                .and_then(|c| Class::from_api(&c))
                .map(|c| {
                    inner.classes.insert(key.to_string(), Arc::new(c));
                    inner.index = None;
                }),
            "ResourceSlice" => decode(kind.kind, version, object)
                .and_then(|s| Slice::from_api(&s))
                .map(|s| {
                    let data = inner.slice_data(&s);
                    inner.published.insert(key.to_string(), Arc::new(s));
                    inner.slices.insert(key.to_string(), data);
                    inner.index = None;
                }),
            "DeviceTaintRule" => TaintRule::parse(object).map(|r| {
                if inner.taint_rules.get(key) != Some(&r) {
                    inner.taint_rules.insert(key.to_string(), r);
                    inner.repatch();
                }
            }),
            "ResourceClaim" => decode(kind.kind, version, object)
                .and_then(|c| Claim::from_api(&c))
                .map(|c| {
                    // Written (or allocated elsewhere): no longer in flight.
                    if c.allocation.is_some() {
                        inner.drop_flight(&c.uid);
                        // A pod's extended resource claim was reserved
                        // under its in-memory uid.
                        if let (true, Some(owner)) = (c.extended, &c.owner_uid) {
                            inner.drop_flight(&in_memory_uid(owner));
                        }
                    }
                    inner.put_claim(key.to_string(), Arc::new(c));
                }),
            _ => Ok(()),
        };
        let slot = (kind.kind, key.to_string());
        match parsed {
            Ok(()) => {
                inner.invalid.remove(&slot);
            }
            Err(e) => {
                tracing::warn!(kind = kind.kind, object = %key, error = %e, "DRA object cannot be used");
                inner.invalid.insert(slot, e);
                self.forget_locked(&mut inner, kind, key);
            }
        }
    }

    /// An object was deleted.
    pub fn delete(&self, kind: &ApiKind, key: &str) {
        let mut inner = self.inner.lock();
        inner.invalid.remove(&(kind.kind, key.to_string()));
        self.forget_locked(&mut inner, kind, key);
    }

    fn forget_locked(&self, inner: &mut Inner, kind: &ApiKind, key: &str) {
        match kind.kind {
            "DeviceClass" if inner.classes.remove(key).is_some() => {
                inner.index = None;
            }
            "ResourceSlice" if inner.slices.remove(key).is_some() => {
                inner.published.remove(key);
                inner.index = None;
            }
            "DeviceTaintRule" if inner.taint_rules.remove(key).is_some() => {
                inner.repatch();
            }
            "ResourceClaim" => {
                if let Some(c) = inner.drop_claim(key) {
                    inner.drop_flight(&c.uid);
                }
            }
            _ => {}
        }
    }

    /// After a relist of `kind`: the keys not `seen` are gone.
    pub fn retain(&self, kind: &ApiKind, seen: &HashSet<String>) {
        let keys: Vec<String> = {
            let inner = self.inner.lock();
            match kind.kind {
                "DeviceClass" => inner.classes.keys().cloned().collect(),
                "ResourceSlice" => inner.slices.keys().cloned().collect(),
                "DeviceTaintRule" => inner.taint_rules.keys().cloned().collect(),
                "ResourceClaim" => inner.claims.keys().cloned().collect(),
                _ => Vec::new(),
            }
        };
        for k in keys.iter().filter(|k| !seen.contains(*k)) {
            self.delete(kind, k);
        }
    }

    pub fn claim(&self, key: &str) -> Option<Arc<Claim>> {
        self.inner.lock().claims.get(key).cloned()
    }

    /// Why the claim `key` cannot be used, if it was seen and rejected.
    pub fn invalid_claim(&self, key: &str) -> Option<String> {
        self.invalid(&RESOURCE_CLAIM, key)
    }

    /// Why the object `key` of `kind` cannot be used, if it was seen and
    /// rejected.
    pub fn invalid(&self, kind: &ApiKind, key: &str) -> Option<String> {
        self.inner
            .lock()
            .invalid
            .get(&(kind.kind, key.to_string()))
            .cloned()
    }

    pub fn class(&self, name: &str) -> Option<Arc<Class>> {
        self.inner.lock().classes.get(name).cloned()
    }

    /// The class that serves extended resource `name` (upstream's
    /// `DeviceClassResolver`): its implicit
    /// `deviceclass.resource.kubernetes.io/<class>`, or the
    /// `spec.extendedResourceName` of the newest class naming it (the
    /// lower name on a tie).
    pub fn class_for_resource(&self, name: &str) -> Option<String> {
        let inner = self.inner.lock();
        if let Some(class) = name.strip_prefix(crate::model::dra_extended::DEVICE_CLASS_PREFIX) {
            return inner.classes.contains_key(class).then(|| class.to_string());
        }
        inner
            .classes
            .values()
            .filter(|c| c.extended_resource_name.as_deref() == Some(name))
            .max_by(|a, b| a.created.cmp(&b.created).then(b.name.cmp(&a.name)))
            .map(|c| c.name.clone())
    }

    /// The claim's allocation in flight, if one is.
    pub fn in_flight(&self, claim_uid: &str) -> Option<InFlight> {
        self.inner.lock().in_flight.get(claim_uid).cloned()
    }

    /// Reserves `devices` for the claim (Reserve). False when another pod
    /// reserved it first.
    pub fn reserve(
        &self,
        claim: &Claim,
        pod_uid: &str,
        devices: Vec<DeviceId>,
        shares: Vec<(DeviceId, Consumed)>,
    ) -> bool {
        let mut inner = self.inner.lock();
        if let Some(f) = inner.in_flight.get(&claim.uid) {
            return f.pod_uid == pod_uid;
        }
        inner.put_flight(
            claim.uid.clone(),
            InFlight {
                claim: claim.key(),
                pod_uid: pod_uid.to_string(),
                devices,
                shares,
            },
        );
        true
    }

    /// Gives back what `pod_uid` reserved (Unreserve).
    pub fn unreserve(&self, pod_uid: &str) {
        let mut inner = self.inner.lock();
        let uids: Vec<String> = inner
            .in_flight
            .iter()
            .filter(|(_, f)| f.pod_uid == pod_uid)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in uids {
            inner.drop_flight(&uid);
        }
    }

    /// Applies an allocation where no API server writes it (`simulate`):
    /// the claim is allocated and reserved for the pod, as PreBind's
    /// write would make it.
    pub fn record_allocation(&self, key: &str, allocation: Option<&Value>, pod: dra::Consumer) {
        let mut inner = self.inner.lock();
        let Some(c) = inner.claims.get(key) else {
            return;
        };
        let mut c = (**c).clone();
        if let Some(a) = allocation {
            if let Ok(result) = serde_json::from_value::<
                k8s_openapi::api::resource::v1::AllocationResult,
            >(a.clone())
            {
                let as_claim = k8s_openapi::api::resource::v1::ResourceClaim {
                    status: Some(k8s_openapi::api::resource::v1::ResourceClaimStatus {
                        allocation: Some(result),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                if let Ok(parsed) = Claim::from_api(&as_claim) {
                    c.allocation = parsed.allocation;
                }
            }
            if !c.finalizers.iter().any(|f| f == dra::DELETE_PROTECTION) {
                c.finalizers.push(dra::DELETE_PROTECTION.into());
            }
        }
        if !c.reserved_for_pod(&pod.uid) {
            c.reserved_for.push(pod);
        }
        inner.drop_flight(&c.uid);
        inner.put_claim(key.to_string(), Arc::new(c));
    }

    /// Deletes a claim an earlier cycle made for a pod's extended
    /// resources (PostFilter): at once here, and as a write for the API
    /// (a [`StatusWrite`] without status: the delete-protection finalizer
    /// removed, then the claim deleted).
    pub fn delete_claim(&self, claim: &Claim) {
        let mut inner = self.inner.lock();
        if let Some(c) = inner.drop_claim(&claim.key()) {
            inner.drop_flight(&c.uid);
        }
        inner.writes.push(StatusWrite {
            kind: RESOURCE_CLAIM,
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            status: Value::Null,
        });
    }

    /// Records a pod's extended resource claim where no API server creates
    /// it (`simulate`): named from its `generateName` and the pod's uid,
    /// allocated and reserved for the pod.
    pub fn record_extended_claim(
        &self,
        metadata: &Value,
        spec: &Value,
        allocation: &Value,
        pod_name: &str,
        pod_uid: &str,
    ) {
        let mut metadata = metadata.clone();
        let namespace = metadata["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let prefix = metadata["generateName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let suffix: String = pod_uid
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(5)
            .collect::<String>()
            .to_ascii_lowercase();
        let name = format!("{prefix}{suffix}");
        metadata["name"] = Value::String(name.clone());
        metadata["uid"] = Value::String(format!("{pod_uid}-claim"));
        let object = serde_json::json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "allocation": allocation,
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
            },
        });
        self.apply(
            &RESOURCE_CLAIM,
            "v1",
            &object,
            &format!("{namespace}/{name}"),
        );
    }

    /// Deallocates a claim reserved for nobody (PostFilter): at once here,
    /// and as a status write for the API.
    pub fn deallocate(&self, claim: &Claim) {
        let mut inner = self.inner.lock();
        let mut c = claim.clone();
        c.allocation = None;
        c.reserved_for.clear();
        inner.put_claim(claim.key(), Arc::new(c));
        inner.writes.push(StatusWrite {
            kind: RESOURCE_CLAIM,
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            status: serde_json::json!({"allocation": null, "reservedFor": null, "devices": null}),
        });
    }

    pub fn take_writes(&self) -> Vec<StatusWrite> {
        std::mem::take(&mut self.inner.lock().writes)
    }

    /// The allocator's inputs: every slice and class, and the devices in
    /// use (allocated outside admin access, or in flight).
    pub fn inputs(&self) -> Inputs {
        let mut inner = self.inner.lock();
        let index = match &inner.index {
            Some(index) => index.clone(),
            None => {
                let index = Arc::new(Index::new(
                    inner.slices.values().cloned().collect(),
                    inner.classes.clone(),
                ));
                inner.index = Some(index.clone());
                index
            }
        };
        Inputs::with_index(
            index,
            inner.in_use.clone(),
            inner.generations.clone(),
            self.cel.clone(),
        )
        .with_shared(inner.shared.clone())
    }

    /// Every published device and whether it is taken (allocated outside
    /// admin access, or in flight), sorted; and the claims allocated and
    /// not, and the objects rejected by kind (metrics).
    pub fn usage(&self) -> Usage {
        let inputs = self.inputs();
        let (in_use, shared) = (&inputs.in_use, &inputs.shares);
        let inner = self.inner.lock();
        let mut devices = Vec::new();
        for data in inner.slices.values() {
            let s = &data.slice;
            let node = match &s.scope {
                dra::NodeScope::Name(n) => n.clone(),
                _ => String::new(),
            };
            for ((id, _), d) in data.ranked.iter().zip(&s.devices) {
                let device = id.rsplit('/').next().unwrap_or_default().to_string();
                let held = shared.get(id);
                let shares = d.allow_multiple.then(|| DeviceShares {
                    held: held.map_or(0, |h| h.holders),
                    capacity: d
                        .capacities
                        .iter()
                        .map(|c| {
                            let used = held.and_then(|h| h.consumed.get(&c.name)).copied();
                            (c.name.clone(), c.value.n, used.unwrap_or(0))
                        })
                        .collect(),
                });
                devices.push(DeviceUse {
                    node: node.clone(),
                    driver: s.driver.clone(),
                    pool: s.pool.clone(),
                    device,
                    taken: in_use.contains(id) || held.is_some(),
                    shares,
                });
            }
        }
        devices.sort_by(|a, b| {
            (&a.node, &a.driver, &a.pool, &a.device).cmp(&(&b.node, &b.driver, &b.pool, &b.device))
        });
        let allocated = inner
            .claims
            .values()
            .filter(|c| c.allocation.is_some())
            .count();
        let mut invalid: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (kind, _) in inner.invalid.keys() {
            *invalid.entry(kind).or_default() += 1;
        }
        Usage {
            devices,
            claims_allocated: allocated,
            claims_pending: inner.claims.len() - allocated,
            invalid,
        }
    }

    /// Every claim with its allocation, by key (reports).
    pub fn claims(&self) -> Vec<Arc<Claim>> {
        let mut v: Vec<Arc<Claim>> = self.inner.lock().claims.values().cloned().collect();
        v.sort_by_key(|c| c.key());
        v
    }

    /// Forgets everything (a new simulation).
    pub fn reset(&self) {
        *self.inner.lock() = Inner::default();
    }
}

/// The in-memory uid of a pod's extended resource claim (`pod_uid` its
/// owner's): its reservation in flight is known by it until the created
/// claim shows its allocation.
pub fn in_memory_uid(pod_uid: &str) -> String {
    format!("{pod_uid}/extended-resources")
}
