//! The volume plugins on small clusters, with upstream's reasons.

use std::sync::Arc;

use serde_json::{json, Value};

use super::binder::{
    ERR_BIND_CONFLICT, ERR_NODE_CONFLICT, ERR_PV_NOT_EXIST, ERR_UNBOUND_IMMEDIATE,
};
use super::binding::VolumeBinding;
use super::limits::{NodeVolumeLimits, ERR_MAX_VOLUME_COUNT};
use super::restrictions::{VolumeRestrictions, ERR_DISK_CONFLICT, ERR_RWOP_CONFLICT};
use super::zone::{VolumeZone, ERR_REASON_CONFLICT};
use crate::framework::plugins::testutil::*;
use crate::framework::volumes::VolumeObject;
use crate::framework::{
    BindAction, CycleState, PreBindPlugin, PreFilterPlugin, Rejection, ReservePlugin, Snapshot,
};
use crate::model::volume::{
    ClaimRef, CsiNode, PersistentVolume, PersistentVolumeClaim, StorageClass, ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
};
use crate::model::Pod;

impl Prep for VolumeBinding {
    fn pre_filter_plugin(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
}
impl Prep for VolumeRestrictions {
    fn pre_filter_plugin(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
}
impl Prep for VolumeZone {}
impl Prep for NodeVolumeLimits {}

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// An available PV of `class` and `size`, on `node` when given.
fn pv(name: &str, class: &str, size: &str, node: Option<&str>) -> Value {
    let mut v = json!({
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "local": {"path": "/mnt"}},
        "status": {"phase": "Available"}
    });
    if let Some(n) = node {
        v["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOST, "operator": "In", "values": [n]}]}]}});
    }
    v
}

fn claim(name: &str, class: &str, size: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "resourceVersion": "1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}}
    })
}

/// A claim the PV controller bound to `volume`.
fn bound_claim(name: &str, volume: &str) -> Value {
    let mut c = claim(name, "", "1Gi");
    c["spec"]["volumeName"] = json!(volume);
    c["metadata"]["annotations"] = json!({ANN_BIND_COMPLETED: "yes"});
    c
}

fn class(name: &str, provisioner: &str, wait: bool) -> Value {
    json!({"metadata": {"name": name}, "provisioner": provisioner,
           "volumeBindingMode": if wait {"WaitForFirstConsumer"} else {"Immediate"}})
}

fn add_pv(snap: &Snapshot, v: Value) {
    let o = PersistentVolume::from_k8s(&serde_json::from_value(v).unwrap()).unwrap();
    snap.volumes().apply(VolumeObject::Pv(o));
}

fn add_claim(snap: &Snapshot, v: Value) {
    let o = PersistentVolumeClaim::from_k8s(&serde_json::from_value(v).unwrap()).unwrap();
    snap.volumes().apply(VolumeObject::Pvc(o));
}

fn add_class(snap: &Snapshot, v: Value) {
    let o = StorageClass::from_k8s(&serde_json::from_value(v).unwrap()).unwrap();
    snap.volumes().apply(VolumeObject::Class(o));
}

fn with_claims(name: &str, claims: &[&str]) -> Pod {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    P::new(name).spec("volumes", json!(volumes)).build()
}

fn node(name: &str) -> crate::model::Node {
    N::new(name).labels(&[(HOST, name)]).build()
}

/// Two nodes and a WaitForFirstConsumer class of local volumes.
fn local_cluster() -> Snapshot {
    let snap = cluster(vec![node("n1"), node("n2")], vec![]);
    add_class(&snap, class("local", "kubernetes.io/no-provisioner", true));
    snap
}

fn bind_conflict() -> Result<(), Rejection> {
    unresolvable(ERR_BIND_CONFLICT)
}

/// PreFilter, then Reserve on `node`; returns the cycle state.
fn reserve(pod: &Pod, snap: &Snapshot, node: &str) -> CycleState {
    let p = VolumeBinding::default();
    let ctx = ctx(pod, snap);
    let mut state = CycleState::default();
    p.pre_filter(&ctx, &mut state).unwrap();
    p.reserve(&ctx, &mut state, snap.by_name(node).unwrap())
        .unwrap();
    state
}

#[test]
fn a_local_volume_fits_only_its_node() {
    let snap = local_cluster();
    add_pv(&snap, pv("pv-1", "local", "10Gi", Some("n1")));
    add_claim(&snap, claim("data", "local", "5Gi"));
    let r = filter_all(
        &VolumeBinding::default(),
        &with_claims("p", &["data"]),
        &snap,
    );
    assert_eq!(r["n1"], ok());
    assert_eq!(r["n2"], bind_conflict());
    // Too small, or another class: no PV.
    add_claim(&snap, claim("big", "local", "50Gi"));
    let r = filter_all(
        &VolumeBinding::default(),
        &with_claims("p", &["big"]),
        &snap,
    );
    assert_eq!(r["n1"], bind_conflict());
}

#[test]
fn reserve_takes_the_smallest_fitting_pv_and_no_other_pod_gets_it() {
    let snap = local_cluster();
    for (name, size) in [("pv-20", "20Gi"), ("pv-8", "8Gi"), ("pv-4", "4Gi")] {
        add_pv(&snap, pv(name, "local", size, Some("n1")));
    }
    add_claim(&snap, claim("a", "local", "5Gi"));
    add_claim(&snap, claim("b", "local", "5Gi"));
    add_claim(&snap, claim("c", "local", "5Gi"));
    let a = with_claims("pa", &["a"]);
    let state = reserve(&a, &snap, "n1");
    let taken = snap.volumes().pv("pv-8").unwrap();
    assert_eq!(taken.claim_ref.as_ref().unwrap().name, "a");
    assert!(
        snap.volumes().api_pv("pv-8").unwrap().claim_ref.is_none(),
        "only assumed"
    );
    // The next pod gets the next smallest; a third finds nothing.
    let state_b = reserve(&with_claims("pb", &["b"]), &snap, "n1");
    assert_eq!(
        snap.volumes()
            .pv("pv-20")
            .unwrap()
            .claim_ref
            .as_ref()
            .unwrap()
            .name,
        "b"
    );
    let r = filter_all(&VolumeBinding::default(), &with_claims("pc", &["c"]), &snap);
    assert_eq!(r["n1"], bind_conflict());
    // PreBind writes the binding and waits for the PV controller.
    let actions = VolumeBinding::default().pre_bind(&a, &state, "n1").unwrap();
    assert_eq!(
        actions[0],
        BindAction::BindVolume {
            pv: "pv-8".into(),
            resource_version: 1,
            claim: ClaimRef {
                namespace: "default".into(),
                name: "a".into(),
                uid: "uid-a".into()
            },
            by_controller: true,
        }
    );
    assert!(
        matches!(&actions[1], BindAction::WaitForVolumes { bindings, provisions, .. }
        if bindings == &[("pv-8".to_string(), "default/a".to_string())] && provisions.is_empty())
    );
    // Unreserve gives pv-8 back; c now gets it.
    VolumeBinding::default().unreserve(&a, &state, "n1");
    assert!(snap.volumes().pv("pv-8").unwrap().claim_ref.is_none());
    let r = filter_all(&VolumeBinding::default(), &with_claims("pc", &["c"]), &snap);
    assert_eq!(r["n1"], ok());
    drop(state_b);
}

#[test]
fn a_newer_api_version_replaces_an_assumption() {
    let snap = local_cluster();
    add_pv(&snap, pv("pv-1", "local", "10Gi", Some("n1")));
    add_claim(&snap, claim("a", "local", "5Gi"));
    reserve(&with_claims("pa", &["a"]), &snap, "n1");
    // The same version again (a relist) keeps it.
    add_pv(&snap, pv("pv-1", "local", "10Gi", Some("n1")));
    assert!(snap.volumes().pv("pv-1").unwrap().claim_ref.is_some());
    let mut newer = pv("pv-1", "local", "10Gi", Some("n1"));
    newer["metadata"]["resourceVersion"] = json!("2");
    add_pv(&snap, newer);
    assert!(snap.volumes().pv("pv-1").unwrap().claim_ref.is_none());
}

#[test]
fn bound_claims_follow_their_pv() {
    let snap = local_cluster();
    add_pv(&snap, pv("pv-1", "", "10Gi", Some("n1")));
    add_claim(&snap, bound_claim("data", "pv-1"));
    add_claim(&snap, bound_claim("lost", "pv-gone"));
    let r = filter_all(
        &VolumeBinding::default(),
        &with_claims("p", &["data"]),
        &snap,
    );
    assert_eq!(r["n1"], ok());
    assert_eq!(r["n2"], unresolvable(ERR_NODE_CONFLICT));
    let r = filter_all(
        &VolumeBinding::default(),
        &with_claims("p", &["lost"]),
        &snap,
    );
    assert_eq!(r["n1"], unresolvable(ERR_PV_NOT_EXIST));
    // All bound: Reserve assumes nothing, PreBind writes nothing.
    let p = with_claims("p", &["data"]);
    let state = reserve(&p, &snap, "n1");
    assert!(VolumeBinding::default()
        .pre_bind(&p, &state, "n1")
        .unwrap()
        .is_empty());
}

#[test]
fn prefilter_rejects_missing_deleted_and_unbound_immediate_claims() {
    let snap = local_cluster();
    add_class(&snap, class("fast", "csi.example.com", false));
    add_claim(&snap, claim("now", "fast", "1Gi"));
    add_claim(&snap, claim("nowhere", "no-such-class", "1Gi"));
    let mut deleting = claim("old", "local", "1Gi");
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    add_claim(&snap, deleting);
    let first = |claims: &[&str]| {
        let r = filter_all(&VolumeBinding::default(), &with_claims("p", claims), &snap);
        r["n1"].clone()
    };
    assert_eq!(
        first(&["missing"]),
        unresolvable("persistentvolumeclaim \"missing\" not found")
    );
    assert_eq!(
        first(&["old"]),
        unresolvable("persistentvolumeclaim \"old\" is being deleted")
    );
    assert_eq!(first(&["now"]), unresolvable(ERR_UNBOUND_IMMEDIATE));
    assert_eq!(first(&["nowhere"]), unresolvable(ERR_UNBOUND_IMMEDIATE));
    // A pod without claims: Skip.
    let plain = P::new("plain").build();
    let mut state = CycleState::default();
    let d = VolumeBinding::default()
        .pre_filter(&ctx(&plain, &snap), &mut state)
        .unwrap();
    assert_eq!(d, crate::framework::Decision::Skip);
}

#[test]
fn provisioning_selects_the_node_within_allowed_topologies() {
    let snap = cluster(
        vec![
            N::new("a1").labels(&[(HOST, "a1"), (ZONE, "a")]).build(),
            N::new("b1").labels(&[(HOST, "b1"), (ZONE, "b")]).build(),
        ],
        vec![],
    );
    let mut c = class("zonal", "csi.example.com", true);
    c["allowedTopologies"] = json!([{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}]);
    add_class(&snap, c);
    add_claim(&snap, claim("scratch", "zonal", "1Gi"));
    let pod = with_claims("p", &["scratch"]);
    let r = filter_all(&VolumeBinding::default(), &pod, &snap);
    assert_eq!(r["a1"], ok());
    assert_eq!(r["b1"], bind_conflict());
    let state = reserve(&pod, &snap, "a1");
    let assumed = snap.volumes().pvc("default", "scratch").unwrap();
    assert_eq!(assumed.selected_node(), Some("a1"));
    let actions = VolumeBinding::default()
        .pre_bind(&pod, &state, "a1")
        .unwrap();
    assert_eq!(
        actions[0],
        BindAction::SelectNode {
            namespace: "default".into(),
            claim: "scratch".into(),
            node: "a1".into(),
            resource_version: 1
        }
    );
    // Once selected, the claim keeps other pods on that node.
    let mut selected = claim("scratch", "zonal", "1Gi");
    selected["metadata"]["annotations"] = json!({ANN_SELECTED_NODE: "a1"});
    selected["metadata"]["resourceVersion"] = json!("2");
    add_claim(&snap, selected);
    let r = filter_all(
        &VolumeBinding::default(),
        &with_claims("q", &["scratch"]),
        &snap,
    );
    assert_eq!((r["a1"].clone(), r["b1"].clone()), (ok(), bind_conflict()));
}

#[test]
fn volume_zone_keeps_bound_pvs_in_their_zones() {
    let snap = cluster(
        vec![
            N::new("a1").labels(&[(ZONE, "a")]).build(),
            N::new("c1").labels(&[(ZONE, "c")]).build(),
            N::new("plain").build(),
        ],
        vec![],
    );
    let mut zonal = pv("disk", "", "10Gi", None);
    zonal["metadata"]["labels"] = json!({ZONE: "a__b"});
    add_pv(&snap, zonal);
    add_claim(&snap, bound_claim("data", "disk"));
    let r = filter_all(&VolumeZone, &with_claims("p", &["data"]), &snap);
    assert_eq!(r["a1"], ok());
    assert_eq!(r["c1"], unresolvable(ERR_REASON_CONFLICT));
    assert_eq!(r["plain"], ok(), "no zone labels: no constraint");
}

#[test]
fn volume_restrictions_refuse_shared_disks_and_used_read_write_once_pod_claims() {
    let pd = |name: &str, ro: bool| {
        P::new(name)
            .spec(
                "volumes",
                json!([{"name": "d", "gcePersistentDisk": {"pdName": "disk-1", "readOnly": ro}}]),
            )
            .build()
    };
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![("n1", pd("ro-user", true))],
    );
    let r = filter_all(&VolumeRestrictions, &pd("writer", false), &snap);
    assert_eq!(r["n1"], unschedulable(ERR_DISK_CONFLICT));
    assert_eq!(r["n2"], ok());
    let r = filter_all(&VolumeRestrictions, &pd("reader", true), &snap);
    assert_eq!(r["n1"], ok(), "read-only with read-only");
    // A ReadWriteOncePod claim in use anywhere rejects every node.
    let mut rwop = claim("solo", "", "1Gi");
    rwop["spec"]["accessModes"] = json!(["ReadWriteOncePod"]);
    add_claim(&snap, rwop);
    let r = filter_all(&VolumeRestrictions, &with_claims("first", &["solo"]), &snap);
    assert_eq!(r["n1"], ok());
    let i = snap.index_of("n2").unwrap();
    let mut snap = snap;
    snap.add_pod(i, Arc::new(with_claims("user", &["solo"])));
    let r = filter_all(
        &VolumeRestrictions,
        &with_claims("second", &["solo"]),
        &snap,
    );
    assert_eq!(r["n1"], unschedulable(ERR_RWOP_CONFLICT));
}

#[test]
fn node_volume_limits_count_the_csi_volumes_already_attached() {
    let mut attached = pv("csi-1", "", "1Gi", None);
    attached["spec"]["csi"] = json!({"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"});
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![("n1", with_claims("existing", &["one"]))],
    );
    add_pv(&snap, attached);
    add_claim(&snap, bound_claim("one", "csi-1"));
    add_class(&snap, class("ebs", "ebs.csi.aws.com", true));
    add_claim(&snap, claim("two", "ebs", "1Gi"));
    add_claim(&snap, claim("three", "ebs", "1Gi"));
    for n in ["n1", "n2"] {
        let o = CsiNode::from_k8s(
            &serde_json::from_value(json!({
                "metadata": {"name": n},
                "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": n,
                                      "allocatable": {"count": 2}}]}
            }))
            .unwrap(),
        )
        .unwrap();
        snap.volumes().apply(VolumeObject::CsiNode(o));
    }
    let r = filter_all(
        &NodeVolumeLimits,
        &with_claims("p", &["two", "three"]),
        &snap,
    );
    assert_eq!(r["n1"], unschedulable(ERR_MAX_VOLUME_COUNT));
    assert_eq!(r["n2"], ok());
    // The volume already attached does not count twice.
    let r = filter_all(&NodeVolumeLimits, &with_claims("p", &["one", "two"]), &snap);
    assert_eq!(r["n1"], ok());
}
