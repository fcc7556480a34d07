//! The scheduler's volume binder (upstream's
//! `pkg/controller/volume/scheduling/scheduler_binder.go`): which claims
//! of a pod are bound, which wait for their first consumer, which PVs a
//! node offers them (the smallest that fits), which claims are to be
//! provisioned there, and the assumption of that choice.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::framework::volumes::VolumeStore;
use crate::model::volume::{
    BindingMode, ClaimRef, PersistentVolume, PersistentVolumeClaim, StorageClass,
    ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, NO_PROVISIONER,
};
use crate::model::{Node, Pod};

/// Upstream's `ErrReasonBindConflict`.
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// Upstream's `ErrReasonNodeConflict`.
pub const ERR_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// Upstream's `ErrReasonNotEnoughSpace` (only with storage capacity
/// tracking, alpha and off in 1.20).
pub const ERR_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Upstream's `ErrReasonPVNotExist`.
pub const ERR_PV_NOT_EXIST: &str = "pvc(s) bound to non-existent pv(s)";
/// VolumeBinding's PreFilter reason for unbound `Immediate` claims.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The pod's claims, sorted as upstream's `GetPodVolumes` sorts them.
#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound, of a `WaitForFirstConsumer` class.
    pub to_bind: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound, otherwise: the PV controller binds them, the pod waits.
    pub immediate: Vec<Arc<PersistentVolumeClaim>>,
    /// The PVs (as assumed) of the classes of `to_bind`, by class: read
    /// once per cycle rather than once per node (upstream's class index).
    pub pvs: BTreeMap<String, Vec<Arc<PersistentVolume>>>,
}

/// What binding the pod's volumes on one node takes (upstream's
/// `PodVolumes`).
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// (PV, claim): after Reserve, the PV with the binding written in.
    pub static_bindings: Vec<(Arc<PersistentVolume>, Arc<PersistentVolumeClaim>)>,
    /// Claims to provision; after Reserve, with the selected node.
    pub provisions: Vec<Arc<PersistentVolumeClaim>>,
    /// Per claim to provision, the `capacity` of the CSIStorageCapacity
    /// that admitted it (upstream's `DynamicProvision.NodeCapacity`), when
    /// its driver publishes capacity; for VolumeBinding's Score.
    pub provision_capacities: Vec<Option<i64>>,
}

/// Why the claims cannot be looked at (upstream's error statuses).
pub type BinderError = String;

/// The pod's claims (upstream's `GetPodVolumes`), as assumed. Every claim
/// the pod names exists (PreFilter checked).
pub fn pod_claims(store: &VolumeStore, pod: &Pod) -> Result<PodClaims, BinderError> {
    let mut out = PodClaims::default();
    for name in pod.volumes.iter().filter_map(|v| v.claim()) {
        let key = format!("{}/{name}", pod.namespace);
        let pvc = store.pvc(&pod.namespace, name).ok_or_else(|| {
            format!("error getting PVC {key:?}: could not find v1.PersistentVolumeClaim {key:?}")
        })?;
        if pvc.fully_bound() {
            out.bound.push(pvc);
        } else if delay_binding(store, &pvc) && pvc.volume_name.is_empty() {
            out.to_bind.push(pvc);
        } else {
            out.immediate.push(pvc);
        }
    }
    for c in &out.to_bind {
        if !out.pvs.contains_key(&c.class) {
            out.pvs
                .insert(c.class.clone(), store.pvs_of_class(&c.class));
        }
    }
    Ok(out)
}

/// Upstream's `IsDelayBindingMode`: the claim's class exists and waits
/// for the first consumer.
fn delay_binding(store: &VolumeStore, pvc: &PersistentVolumeClaim) -> bool {
    !pvc.class.is_empty()
        && store
            .class(&pvc.class)
            .is_some_and(|c| c.binding_mode == BindingMode::WaitForFirstConsumer)
}

/// What [`find_pod_volumes`] found on a node: the volumes, or the reasons
/// it does not fit.
#[derive(Debug, Clone)]
pub struct Found {
    pub volumes: PodVolumes,
    pub reasons: Vec<&'static str>,
}

/// Upstream's `FindPodVolumes`: whether `node` can satisfy the pod's
/// claims, and how.
pub fn find_pod_volumes(
    store: &VolumeStore,
    claims: &PodClaims,
    node: &Node,
) -> Result<Found, BinderError> {
    let mut flags = Flags::default();
    let mut volumes = PodVolumes::default();
    if !claims.bound.is_empty() {
        (flags.bound_satisfied, flags.bound_pvs_found) = check_bound_claims(store, claims, node);
    }
    if !claims.to_bind.is_empty() {
        bind_unbound(store, claims, node, &mut flags, &mut volumes)?;
    }
    Ok(Found {
        volumes,
        reasons: flags.reasons(),
    })
}

/// Upstream's flags, turned into reasons in its order.
struct Flags {
    unbound_satisfied: bool,
    bound_satisfied: bool,
    sufficient_storage: bool,
    bound_pvs_found: bool,
}

impl Default for Flags {
    fn default() -> Self {
        Self {
            unbound_satisfied: true,
            bound_satisfied: true,
            sufficient_storage: true,
            bound_pvs_found: true,
        }
    }
}

impl Flags {
    fn reasons(&self) -> Vec<&'static str> {
        [
            (!self.bound_satisfied, ERR_NODE_CONFLICT),
            (!self.unbound_satisfied, ERR_BIND_CONFLICT),
            (!self.sufficient_storage, ERR_NOT_ENOUGH_SPACE),
            (!self.bound_pvs_found, ERR_PV_NOT_EXIST),
        ]
        .into_iter()
        .filter(|(failed, _)| *failed)
        .map(|(_, r)| r)
        .collect()
    }
}

/// Upstream's `checkBoundClaims`: (node affinity satisfied, PVs found).
fn check_bound_claims(store: &VolumeStore, claims: &PodClaims, node: &Node) -> (bool, bool) {
    for pvc in &claims.bound {
        let Some(pv) = store.pv(&pvc.volume_name) else {
            return (true, false);
        };
        if !pv.fits_node(&node.labels) {
            return (false, true);
        }
    }
    (true, true)
}

/// The unbound `WaitForFirstConsumer` claims: a selected node must be
/// this one; the others get the smallest fitting PV, or are provisioned.
fn bind_unbound(
    store: &VolumeStore,
    claims: &PodClaims,
    node: &Node,
    flags: &mut Flags,
    volumes: &mut PodVolumes,
) -> Result<(), BinderError> {
    let mut to_provision = Vec::new();
    let mut to_match = Vec::new();
    for claim in &claims.to_bind {
        match claim.selected_node() {
            Some(selected) if selected != node.name => {
                flags.unbound_satisfied = false;
                return Ok(());
            }
            Some(_) => to_provision.push(claim.clone()),
            None => to_match.push(claim.clone()),
        }
    }
    if !to_match.is_empty() {
        let (all_found, bindings, unmatched) = find_matching_volumes(&claims.pvs, to_match, node);
        flags.unbound_satisfied = all_found;
        volumes.static_bindings = bindings;
        to_provision.extend(unmatched);
    }
    if !to_provision.is_empty() {
        let (satisfied, sufficient, provisions) = check_provisions(store, &to_provision, node)?;
        flags.unbound_satisfied = satisfied;
        flags.sufficient_storage = sufficient;
        (volumes.provisions, volumes.provision_capacities) = provisions.into_iter().unzip();
    }
    Ok(())
}

type Bindings = Vec<(Arc<PersistentVolume>, Arc<PersistentVolumeClaim>)>;

/// Upstream's `findMatchingVolumes`: claims from the smallest request up,
/// each taking the smallest fitting PV no earlier claim took.
fn find_matching_volumes(
    pvs: &BTreeMap<String, Vec<Arc<PersistentVolume>>>,
    mut claims: Vec<Arc<PersistentVolumeClaim>>,
    node: &Node,
) -> (bool, Bindings, Vec<Arc<PersistentVolumeClaim>>) {
    claims.sort_by_key(|c| c.request);
    let mut chosen: HashSet<String> = HashSet::new();
    let mut bindings = Vec::new();
    let mut unmatched = Vec::new();
    for pvc in claims {
        let of_class = pvs.get(&pvc.class).map_or(&[][..], Vec::as_slice);
        match find_matching_volume(&pvc, of_class, node, &chosen) {
            Some(pv) => {
                chosen.insert(pv.name.clone());
                bindings.push((pv, pvc));
            }
            None => unmatched.push(pvc),
        }
    }
    (unmatched.is_empty(), bindings, unmatched)
}

/// Upstream's `FindMatchingVolume` on the scheduler's path: a PV
/// pre-bound to the claim (if its node affinity allows the node), else
/// the smallest available PV of the claim's class, size, mode, access
/// modes and selector that the node may use.
pub fn find_matching_volume(
    claim: &PersistentVolumeClaim,
    pvs: &[Arc<PersistentVolume>],
    node: &Node,
    excluded: &HashSet<String>,
) -> Option<Arc<PersistentVolume>> {
    let mut smallest: Option<&Arc<PersistentVolume>> = None;
    for pv in pvs {
        if excluded.contains(&pv.name)
            || (pv.claim_ref.is_some() && !pv.bound_to(claim))
            || pv.capacity < claim.request
            || pv.volume_mode != claim.volume_mode
            || pv.deleting
        {
            continue;
        }
        let affinity_ok = pv.fits_node(&node.labels);
        if pv.bound_to(claim) {
            return affinity_ok.then(|| pv.clone());
        }
        let selected = claim
            .selector
            .as_ref()
            .is_none_or(|s| s.matches(&pv.labels));
        if pv.phase != "Available"
            || !selected
            || pv.class != claim.class
            || !affinity_ok
            || !claim
                .access_modes
                .iter()
                .all(|m| pv.access_modes.contains(m))
        {
            continue;
        }
        if smallest.is_none_or(|s| s.capacity > pv.capacity) {
            smallest = Some(pv);
        }
    }
    smallest.cloned()
}

/// Upstream's `checkVolumeProvisions`: every claim's class provisions,
/// allows the node's topology and, for a CSI driver that publishes storage
/// capacity, has enough of it reachable from the node. Returns
/// (satisfied, sufficient storage, the claims with the capacity that
/// admitted each).
#[allow(clippy::type_complexity)]
fn check_provisions(
    store: &VolumeStore,
    claims: &[Arc<PersistentVolumeClaim>],
    node: &Node,
) -> Result<(bool, bool, Vec<(Arc<PersistentVolumeClaim>, Option<i64>)>), BinderError> {
    let mut out = Vec::new();
    for claim in claims {
        if claim.class.is_empty() {
            return Err(format!("no class for claim {:?}", claim.key()));
        }
        let class = store
            .class(&claim.class)
            .ok_or_else(|| format!("failed to find storage class {:?}", claim.class))?;
        if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
            return Ok((false, true, Vec::new()));
        }
        if !class.allows(&node.labels) {
            return Ok((false, true, Vec::new()));
        }
        let Some(capacity) = has_enough_capacity(store, claim, &class, node) else {
            return Ok((true, false, Vec::new()));
        };
        out.push((claim.clone(), capacity));
    }
    Ok((true, true, out))
}

/// Upstream's `hasEnoughCapacity`: only for a provisioner that is a
/// CSIDriver with `storageCapacity: true`, some CSIStorageCapacity of the
/// class, reachable from the node, holds the claim's request. A claim
/// without a storage request has nothing to check. Capacity is not
/// reduced by the volumes being provisioned (upstream's neither: the
/// driver publishes new objects). `None`: not enough; `Some(capacity)`:
/// enough, with the admitting object's `capacity` when one was needed.
fn has_enough_capacity(
    store: &VolumeStore,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &Node,
) -> Option<Option<i64>> {
    if claim.request == 0 {
        return Some(None);
    }
    match store.csi_driver(&class.provisioner) {
        Some(driver) if driver.storage_capacity => store
            .capacity_for(&class.name, claim.request, &node.labels)
            .map(|c| Some(c.unwrap_or(0))),
        _ => Some(None),
    }
}

/// Upstream's `AssumePodVolumes`: writes the choice into the store so
/// later cycles see the PVs taken and the claims' node selected. Returns
/// `None` when every claim is already fully bound (nothing to do), else
/// the assumed volumes (which Unreserve restores). On failure nothing
/// stays assumed.
pub fn assume(
    store: &VolumeStore,
    pod: &Pod,
    node: &str,
    volumes: &PodVolumes,
) -> Result<Option<PodVolumes>, BinderError> {
    let all_bound = pod.volumes.iter().filter_map(|v| v.claim()).all(|name| {
        store
            .pvc(&pod.namespace, name)
            .is_some_and(|c| c.fully_bound())
    });
    if all_bound {
        return Ok(None);
    }
    let mut assumed = PodVolumes::default();
    let fail = |assumed: &PodVolumes, e: crate::framework::volumes::AssumeError| {
        revert(store, assumed);
        e.to_string()
    };
    for (pv, pvc) in &volumes.static_bindings {
        let (bound, dirty) = bind_volume_to_claim(pv, pvc);
        let bound = Arc::new(bound);
        if dirty {
            if let Err(e) = store.assume_pv((*bound).clone()) {
                return Err(fail(&assumed, e));
            }
        }
        assumed.static_bindings.push((bound, pvc.clone()));
    }
    for claim in &volumes.provisions {
        let mut c = (**claim).clone();
        c.annotations
            .insert(ANN_SELECTED_NODE.into(), node.to_string());
        if let Err(e) = store.assume_pvc(c.clone()) {
            return Err(fail(&assumed, e));
        }
        assumed.provisions.push(Arc::new(c));
    }
    Ok(Some(assumed))
}

/// Upstream's `RevertAssumedPodVolumes`.
pub fn revert(store: &VolumeStore, volumes: &PodVolumes) {
    for (pv, _) in &volumes.static_bindings {
        store.restore_pv(&pv.name);
    }
    for claim in &volumes.provisions {
        store.restore_pvc(&claim.key());
    }
}

/// Upstream's `GetBindVolumeToClaim`: the PV with `claimRef` set to the
/// claim (and bound-by-controller when it was not pre-bound to it); the
/// flag says whether anything changed.
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> (PersistentVolume, bool) {
    let mut out = pv.clone();
    let mut dirty = false;
    let differs = pv.claim_ref.as_ref().is_none_or(|r| {
        r.name != claim.name || r.namespace != claim.namespace || r.uid != claim.uid
    });
    if differs {
        out.claim_ref = Some(ClaimRef {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        });
        dirty = true;
    }
    if !pv.bound_to(claim) && !out.annotations.contains_key(ANN_BOUND_BY_CONTROLLER) {
        out.annotations
            .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    (out, dirty)
}
