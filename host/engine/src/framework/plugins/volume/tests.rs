//! The volume plugins on small clusters, with upstream's reasons.

use std::sync::Arc;

use serde_json::{json, Value};

use super::binder::{
    ERR_BIND_CONFLICT, ERR_NODE_CONFLICT, ERR_NOT_ENOUGH_SPACE, ERR_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
};
use super::binding::VolumeBinding;
use super::limits::{NodeVolumeLimits, ERR_MAX_VOLUME_COUNT};
use super::restrictions::{VolumeRestrictions, ERR_DISK_CONFLICT, ERR_RWOP_CONFLICT};
use super::zone::{VolumeZone, ERR_REASON_CONFLICT};
use super::VolumeAction;
use crate::framework::plugins::testutil::*;
use crate::framework::volumes::VolumeObject;
use crate::framework::{
    BindAction, CycleState, NodeInfo, PreBindPlugin, PreFilterPlugin, PreScorePlugin, Rejection,
    ReservePlugin, ScorePlugin, Snapshot,
};
use crate::model::volume::{
    ClaimRef, CsiDriver, CsiNode, CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim,
    StorageClass, ANN_BIND_COMPLETED, ANN_SELECTED_NODE,
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
        BindAction::plugin(VolumeAction::BindVolume {
            pv: "pv-8".into(),
            resource_version: 1,
            claim: ClaimRef {
                namespace: "default".into(),
                name: "a".into(),
                uid: "uid-a".into()
            },
            by_controller: true,
        })
    );
    assert!(
        matches!(actions[1].get::<VolumeAction>(), Some(VolumeAction::WaitForVolumes { bindings, provisions, .. })
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
        BindAction::plugin(VolumeAction::SelectNode {
            namespace: "default".into(),
            claim: "scratch".into(),
            node: "a1".into(),
            resource_version: 1
        })
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

fn add_driver(snap: &Snapshot, name: &str, storage_capacity: Option<bool>) {
    let mut d = json!({"metadata": {"name": name}, "spec": {}});
    if let Some(c) = storage_capacity {
        d["spec"]["storageCapacity"] = json!(c);
    }
    let o = CsiDriver::from_k8s(&serde_json::from_value(d).unwrap()).unwrap();
    snap.volumes().apply(VolumeObject::CsiDriver(o));
}

fn add_capacity(snap: &Snapshot, v: Value) {
    let o = CsiStorageCapacity::from_k8s(&serde_json::from_value(v).unwrap()).unwrap();
    snap.volumes().apply(VolumeObject::CsiCapacity(o));
}

/// A CSIStorageCapacity of `class` for the nodes labelled `zone`.
fn capacity(name: &str, class: &str, zone: Option<&str>, capacity: Option<&str>) -> Value {
    let mut v = json!({"metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": class});
    if let Some(z) = zone {
        v["nodeTopology"] = json!({"matchLabels": {ZONE: z}});
    }
    if let Some(c) = capacity {
        v["capacity"] = json!(c);
    }
    v
}

/// Upstream's `TestCapacity` (volumebinding/binder_test.go) in its shape:
/// a WaitForFirstConsumer CSI class, a 1Gi claim, capacity published per
/// zone; checked only when the CSIDriver says `storageCapacity: true`.
#[test]
fn provisioning_needs_storage_capacity_reachable_from_the_node() {
    let snap = cluster(
        vec![
            N::new("a1").labels(&[(HOST, "a1"), (ZONE, "a")]).build(),
            N::new("b1").labels(&[(HOST, "b1"), (ZONE, "b")]).build(),
        ],
        vec![],
    );
    add_class(&snap, class("csi", "csi.example.com", true));
    add_claim(&snap, claim("data", "csi", "1Gi"));
    let pod = with_claims("p", &["data"]);
    let filter = |snap: &Snapshot| {
        let r = filter_all(&VolumeBinding::default(), &pod, snap);
        (r["a1"].clone(), r["b1"].clone())
    };
    let no_space = || unresolvable(ERR_NOT_ENOUGH_SPACE);
    // No CSIDriver, or one that does not publish capacity: not checked.
    assert_eq!(filter(&snap), (ok(), ok()));
    add_driver(&snap, "csi.example.com", None);
    assert_eq!(
        filter(&snap),
        (ok(), ok()),
        "storageCapacity defaults to false"
    );
    add_driver(&snap, "csi.example.com", Some(false));
    assert_eq!(filter(&snap), (ok(), ok()));
    // The driver publishes capacity and has published none: no node.
    add_driver(&snap, "csi.example.com", Some(true));
    assert_eq!(filter(&snap), (no_space(), no_space()));
    // Enough in zone a (exactly the request), too little in zone b.
    add_capacity(&snap, capacity("a", "csi", Some("a"), Some("1Gi")));
    add_capacity(&snap, capacity("b", "csi", Some("b"), Some("1023Mi")));
    assert_eq!(filter(&snap), (ok(), no_space()));
    // Another class's capacity, or capacity with no topology, is not this.
    add_capacity(&snap, capacity("b-other", "other", Some("b"), Some("10Gi")));
    add_capacity(&snap, capacity("nowhere", "csi", None, Some("10Gi")));
    assert_eq!(filter(&snap), (ok(), no_space()));
    // maximumVolumeSize is preferred over capacity when set.
    let mut big = capacity("b-max", "csi", Some("b"), Some("10Gi"));
    big["maximumVolumeSize"] = json!("512Mi");
    add_capacity(&snap, big);
    assert_eq!(filter(&snap), (ok(), no_space()));
    let mut big = capacity("b-max", "csi", Some("b"), Some("512Mi"));
    big["maximumVolumeSize"] = json!("2Gi");
    add_capacity(&snap, big);
    assert_eq!(
        filter(&snap),
        (ok(), ok()),
        "maximumVolumeSize 2Gi holds 1Gi"
    );
    // Reported with no capacity at all: none.
    let snap2 = cluster(
        vec![N::new("a1").labels(&[(HOST, "a1"), (ZONE, "a")]).build()],
        vec![],
    );
    add_class(&snap2, class("csi", "csi.example.com", true));
    add_claim(&snap2, claim("data", "csi", "1Gi"));
    add_driver(&snap2, "csi.example.com", Some(true));
    add_capacity(&snap2, capacity("a", "csi", Some("a"), None));
    let r = filter_all(&VolumeBinding::default(), &pod, &snap2);
    assert_eq!(r["a1"], no_space());
    // A claim whose node is selected is still provisioned there, and checked.
    let mut selected = claim("data", "csi", "1Gi");
    selected["metadata"]["annotations"] = json!({ANN_SELECTED_NODE: "a1"});
    selected["metadata"]["resourceVersion"] = json!("2");
    add_claim(&snap2, selected);
    assert_eq!(
        filter_all(&VolumeBinding::default(), &pod, &snap2)["a1"],
        no_space(),
        "a selected node still provisions: upstream checks capacity again"
    );
}

/// PreFilter, PreScore and Score on every node, as the cycle runs them
/// (VolumeBinding has no NormalizeScore).
fn volume_scores(pod: &Pod, snap: &Snapshot) -> Vec<(String, i64)> {
    let p = VolumeBinding::default();
    let ctx = ctx(pod, snap);
    let mut state = CycleState::default();
    p.pre_filter(&ctx, &mut state).unwrap();
    let nodes: Vec<&NodeInfo> = snap.nodes().collect();
    p.pre_score(&ctx, &mut state, &nodes).unwrap();
    nodes
        .iter()
        .map(|n| (n.name().to_string(), p.score(&ctx, &state, n).unwrap()))
        .collect()
}

fn scores(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

/// Upstream's `TestVolumeBinding` "local volumes with close capacity are
/// preferred": a 50Gi claim scores 75 where the PVs are 200Gi, 50 where
/// they are 100Gi, 0 where there is none.
#[test]
fn score_prefers_the_node_whose_pvs_the_claim_uses_least() {
    let snap = cluster(vec![node("node-a"), node("node-b"), node("node-c")], vec![]);
    add_class(&snap, class("local", "kubernetes.io/no-provisioner", true));
    for (name, size, n) in [
        ("pv-a-0", "200Gi", "node-a"),
        ("pv-a-1", "200Gi", "node-a"),
        ("pv-b-0", "100Gi", "node-b"),
        ("pv-b-1", "100Gi", "node-b"),
    ] {
        add_pv(&snap, pv(name, "local", size, Some(n)));
    }
    add_claim(&snap, claim("pvc-a", "local", "50Gi"));
    let pod = with_claims("pod-a", &["pvc-a"]);
    assert_eq!(
        volume_scores(&pod, &snap),
        scores(&[("node-a", 75), ("node-b", 50), ("node-c", 0)])
    );
    // A pod without claims: skipped (every node 0).
    let plain = P::new("plain").build();
    let p = VolumeBinding::default();
    let ctx = ctx(&plain, &snap);
    let mut state = CycleState::default();
    let nodes: Vec<&NodeInfo> = snap.nodes().collect();
    assert_eq!(
        p.pre_score(&ctx, &mut state, &nodes).unwrap(),
        crate::framework::Decision::Skip
    );
}

/// Upstream's "storage capacity score" and "... with static binds": a
/// provisioned 10Gi claim against 100Gi / 50Gi / 10Gi of published
/// capacity scores 90 / 80 / 0; with a static binding as well, the static
/// PVs alone are scored (50Gi of 100Gi: 50 everywhere).
#[test]
fn score_prefers_the_node_with_the_most_storage_capacity() {
    let mk = || {
        let snap = cluster(vec![node("node-a"), node("node-b"), node("node-c")], vec![]);
        add_class(&snap, class("csi", "csi.example.com", true));
        add_driver(&snap, "csi.example.com", Some(true));
        for (n, size) in [("node-a", "100Gi"), ("node-b", "50Gi"), ("node-c", "10Gi")] {
            add_capacity(
                &snap,
                json!({"metadata": {"name": n, "namespace": "kube-system"},
                    "storageClassName": "csi", "capacity": size,
                    "nodeTopology": {"matchLabels": {HOST: n}}}),
            );
        }
        add_claim(&snap, claim("pvc-dynamic", "csi", "10Gi"));
        snap
    };
    let snap = mk();
    let pod = with_claims("pod-a", &["pvc-dynamic"]);
    assert_eq!(
        volume_scores(&pod, &snap),
        scores(&[("node-a", 90), ("node-b", 80), ("node-c", 0)])
    );
    let snap = mk();
    add_class(&snap, class("local", "kubernetes.io/no-provisioner", true));
    for n in ["node-a", "node-b", "node-c"] {
        add_pv(
            &snap,
            pv(&format!("pv-static-{n}"), "local", "100Gi", Some(n)),
        );
    }
    add_claim(&snap, claim("pvc-static", "local", "50Gi"));
    let pod = with_claims("pod-a", &["pvc-dynamic", "pvc-static"]);
    assert_eq!(
        volume_scores(&pod, &snap),
        scores(&[("node-a", 50), ("node-b", 50), ("node-c", 50)])
    );
}

#[test]
fn volume_binding_args_take_upstreams_shape() {
    let p = super::binding::new(
        Some(
            &json!({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}),
        ),
        &Default::default(),
    );
    assert!(p.is_ok());
    let e = super::binding::new(
        Some(&json!({"shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]})),
        &Default::default(),
    )
    .err()
    .unwrap();
    assert_eq!(
        e,
        "VolumeBinding args: shape[1].utilization: must be greater than the previous point's"
    );
    let e = super::binding::new(Some(&json!({"shape": []})), &Default::default())
        .err()
        .unwrap();
    assert_eq!(
        e,
        "VolumeBinding args: shape: at least one point is required"
    );
}

#[test]
fn a_csi_storage_capacity_is_validated() {
    let bad = json!({"metadata": {"name": "c", "namespace": "ns"}, "storageClassName": "csi",
        "capacity": "lots"});
    let e = CsiStorageCapacity::from_k8s(&serde_json::from_value(bad).unwrap()).unwrap_err();
    assert_eq!(
        (e.object.as_str(), e.field.as_str()),
        ("CSIStorageCapacity ns/c", "capacity")
    );
    let no_class = json!({"metadata": {"name": "c", "namespace": "ns"}});
    let e = CsiStorageCapacity::from_k8s(&serde_json::from_value(no_class).unwrap()).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.cause.as_str()),
        ("storageClassName", "missing")
    );
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

/// A CSINode on `node` listing `drivers` (with an attach limit when given).
fn add_csi_node(snap: &Snapshot, node: &str, drivers: &[(&str, Option<i64>)]) {
    let drivers: Vec<Value> = drivers
        .iter()
        .map(|(name, count)| {
            let mut d = json!({"name": name, "nodeID": node});
            if let Some(c) = count {
                d["allocatable"] = json!({"count": c});
            }
            d
        })
        .collect();
    let o = CsiNode::from_k8s(
        &serde_json::from_value(json!({"metadata": {"name": node}, "spec": {"drivers": drivers}}))
            .unwrap(),
    )
    .unwrap();
    snap.volumes().apply(VolumeObject::CsiNode(o));
}

/// Upstream's `TestVolumeLimitScalingGate` (gate on, as in 1.37): a pod
/// whose claim is bound to an EBS CSI volume, on a node whose CSINode
/// lists no driver ("no-csi-driver") or EBS with a limit of 2 ("csinode").
#[test]
fn node_volume_limits_need_an_opted_in_driver_on_the_node() {
    const EBS: &str = "ebs.csi.aws.com";
    // (case, CSIDriver (None: absent) with preventPodSchedulingIfMissing,
    //  CSINode lists EBS with a limit of 2, want)
    type Case = (&'static str, Option<bool>, bool, Result<(), Rejection>);
    let cases: [Case; 4] = [
        (
            "CSIDriver exists but PreventPodSchedulingIfMissing is not set",
            Some(false),
            false,
            ok(),
        ),
        (
            "driver not installed and PreventPodSchedulingIfMissing is true",
            Some(true),
            false,
            unschedulable(&format!("{EBS} CSI driver is not installed on the node")),
        ),
        ("driver installed within limit", Some(true), true, ok()),
        ("CSIDriver object missing", None, false, ok()),
    ];
    for (case, prevent, installed, want) in cases {
        let snap = cluster(vec![node("n1")], vec![]);
        let mut v = pv("csi-1", "", "1Gi", None);
        v["spec"]["csi"] = json!({"driver": EBS, "volumeHandle": "vol-1"});
        add_pv(&snap, v);
        add_claim(&snap, bound_claim("one", "csi-1"));
        if let Some(p) = prevent {
            let d = json!({"metadata": {"name": EBS},
                           "spec": {"preventPodSchedulingIfMissing": p}});
            let o = CsiDriver::from_k8s(&serde_json::from_value(d).unwrap()).unwrap();
            snap.volumes().apply(VolumeObject::CsiDriver(o));
        }
        let drivers: &[(&str, Option<i64>)] = if installed { &[(EBS, Some(2))] } else { &[] };
        add_csi_node(&snap, "n1", drivers);
        let r = filter_all(&NodeVolumeLimits, &with_claims("p", &["one"]), &snap);
        assert_eq!(r["n1"], want, "{case}");
    }
}

/// A node without a CSINode lacks every driver; an unbound claim counts by
/// its class's provisioner; pods without new CSI volumes are not checked.
#[test]
fn node_volume_limits_refuse_a_node_without_csi_node_for_an_opted_in_driver() {
    const DRIVER: &str = "hostpath.csi.k8s.io";
    let snap = cluster(vec![node("n1"), node("n2"), node("n3")], vec![]);
    add_class(&snap, class("csi", DRIVER, true));
    add_claim(&snap, claim("new", "csi", "1Gi"));
    let d = json!({"metadata": {"name": DRIVER},
                   "spec": {"preventPodSchedulingIfMissing": true}});
    let o = CsiDriver::from_k8s(&serde_json::from_value(d).unwrap()).unwrap();
    snap.volumes().apply(VolumeObject::CsiDriver(o));
    add_csi_node(&snap, "n1", &[(DRIVER, None)]);
    add_csi_node(&snap, "n2", &[("other.csi.k8s.io", None)]);
    let missing = unschedulable(&format!("{DRIVER} CSI driver is not installed on the node"));
    let r = filter_all(&NodeVolumeLimits, &with_claims("p", &["new"]), &snap);
    assert_eq!(r["n1"], ok());
    assert_eq!(r["n2"], missing);
    assert_eq!(r["n3"], missing);
    // A pod without volumes is not checked.
    let r = filter_all(&NodeVolumeLimits, &with_claims("p", &[]), &snap);
    assert_eq!(r["n3"], ok());
}
