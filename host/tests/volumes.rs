//! `simulate` with PersistentVolumes, claims, StorageClasses and CSINodes
//! in the manifests: kube-scheduler 1.20's volume plugins decide, the
//! simulated PV controller completes static bindings, and `--explain`
//! names the volume rule that failed on each node. (The comparison with
//! kube-scheduler and the real PV controller is in `tests/kube/volumes.rs`.)

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use common::*;

const LOCAL: &str = "local-storage";

fn node(name: &str, zone: &str) -> Value {
    let mut n = NodeB::new(name).0;
    n["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!(zone);
    n
}

fn local_class() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": LOCAL}, "provisioner": "kubernetes.io/no-provisioner",
           "volumeBindingMode": "WaitForFirstConsumer"})
}

/// An available local PV of `size` on `node`.
fn local_pv(name: &str, node: &str, size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
           "metadata": {"name": name},
           "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": LOCAL, "local": {"path": "/mnt/disks/1"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
           "status": {"phase": "Available"}})
}

fn claim(name: &str, class: &str, size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                    "resources": {"requests": {"storage": size}}}})
}

fn pod(name: &str, claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    PodB::new(name).spec("volumes", json!(volumes)).0
}

fn config(dir: &Path) -> String {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "profiles:\n- schedulerName: {SCHED}\n  plugins:\n    multiPoint:\n      \
             disabled: [{{name: GpuTopology}}, {{name: NetworkLocality}}]\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// `simulate --output json` on `objects` (plus `extra` arguments).
fn run(objects: &[Value], extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    write_manifest(&file, objects);
    let cfg = config(dir.path());
    let mut args = vec![
        "simulate",
        file.to_str().unwrap(),
        "--config",
        &cfg,
        "--output",
        "json",
    ];
    args.extend_from_slice(extra);
    let o = wasmsched(&args);
    assert!(o.success, "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

fn placed(r: &Value) -> BTreeMap<String, String> {
    r["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap().into(),
                p["node"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn unschedulable(r: &Value) -> BTreeMap<String, String> {
    r["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap().into(),
                p["message"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn a_stateful_set_of_claims_lands_on_its_local_volumes() {
    // web-i's claim fits only pv-i (sizes), on node n-i.
    let mut objects = vec![local_class()];
    for (i, size) in ["10Gi", "20Gi", "40Gi"].iter().enumerate() {
        objects.push(node(&format!("n{i}"), "a"));
        objects.push(local_pv(&format!("pv-{i}"), &format!("n{i}"), size));
    }
    for (i, size) in ["30Gi", "15Gi", "5Gi"].iter().enumerate() {
        objects.push(claim(&format!("data-web-{i}"), LOCAL, size));
        objects.push(pod(&format!("web-{i}"), &[&format!("data-web-{i}")]));
    }
    // A fourth replica finds no volume left anywhere.
    objects.push(claim("data-web-3", LOCAL, "1Gi"));
    objects.push(pod("web-3", &["data-web-3"]));
    let r = run(&objects, &[]);
    let p = placed(&r);
    // Smallest fitting PV first: web-2 (5Gi) takes pv-0, web-1 (15Gi)
    // pv-1, web-0 (30Gi) pv-2.
    assert_eq!(p["web-0"], "n2");
    assert_eq!(p["web-1"], "n1");
    assert_eq!(p["web-2"], "n0");
    assert_eq!(
        unschedulable(&r)["web-3"],
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn two_pods_competing_for_one_volume_get_it_once() {
    let objects = vec![
        local_class(),
        node("n0", "a"),
        node("n1", "a"),
        local_pv("only", "n1", "10Gi"),
        claim("first", LOCAL, "1Gi"),
        claim("second", LOCAL, "1Gi"),
        pod("a", &["first"]),
        pod("b", &["second"]),
    ];
    let r = run(&objects, &[]);
    let p = placed(&r);
    assert_eq!(p.len(), 1, "{r}");
    assert_eq!(p.values().next().unwrap(), "n1");
    let u = unschedulable(&r);
    assert_eq!(
        u.values().next().unwrap(),
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_claim_bound_to_a_zonal_volume_keeps_its_pods_in_the_zone() {
    let zonal = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "disk", "labels": {"topology.kubernetes.io/zone": "b"}},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "claimRef": {"namespace": "default", "name": "data"},
                 "csi": {"driver": "pd.csi.example.com", "volumeHandle": "disk-1"}},
        "status": {"phase": "Bound"}});
    let bound = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default",
                     "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "volumeName": "disk", "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Bound"}});
    let objects = vec![
        node("a1", "a"),
        node("b1", "b"),
        node("c1", "c"),
        zonal,
        bound,
        pod("user", &["data"]),
    ];
    let r = run(&objects, &["--explain", "default/user"]);
    assert_eq!(placed(&r)["user"], "b1");
    let verdict = |n: &str| {
        let node = r["explain"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["node"] == n)
            .unwrap();
        node["filters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f[0] == "VolumeZone")
            .unwrap()[1]
            .clone()
    };
    assert_eq!(
        verdict("a1"),
        json!({"verdict": "reject", "reason": "node(s) had no available volume zone"})
    );
    assert_eq!(verdict("b1"), json!({"verdict": "pass"}));
}

#[test]
fn claims_without_their_class_or_volume_wait_with_upstream_messages() {
    let objects = vec![
        node("n0", "a"),
        node("n1", "a"),
        claim("orphan", "no-such-class", "1Gi"),
        pod("needs-class", &["orphan"]),
        pod("needs-claim", &["nowhere"]),
    ];
    let r = run(&objects, &[]);
    let u = unschedulable(&r);
    assert_eq!(
        u["needs-class"],
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
    );
    assert_eq!(
        u["needs-claim"],
        "0/2 nodes are available: persistentvolumeclaim \"nowhere\" not found. not found"
    );
}

#[test]
fn csi_attach_limits_count_the_volumes_a_node_already_has() {
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "ebs"}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer"});
    let csi_node = |n: &str, count: i64| {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n},
               "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": n,
                                     "allocatable": {"count": count}}]}})
    };
    let mut objects = vec![class, node("small", "a"), csi_node("small", 1)];
    for i in 0..3 {
        objects.push(claim(&format!("vol-{i}"), "ebs", "1Gi"));
        objects.push(pod(&format!("p{i}"), &[&format!("vol-{i}")]));
    }
    let r = run(&objects, &[]);
    assert_eq!(placed(&r).len(), 1, "{r}");
    let u = unschedulable(&r);
    assert_eq!(u.len(), 2);
    for m in u.values() {
        assert_eq!(
            m,
            "0/1 nodes are available: 1 node(s) exceed max volume count. preemption: \
             0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
    }
}

#[test]
fn explain_shows_which_volume_rule_failed_on_each_node() {
    let objects = vec![
        local_class(),
        node("n0", "a"),
        node("n1", "a"),
        local_pv("pv", "n1", "10Gi"),
        claim("data", LOCAL, "1Gi"),
        pod("user", &["data"]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    write_manifest(&file, &objects);
    let cfg = config(dir.path());
    let o = wasmsched(&[
        "simulate",
        file.to_str().unwrap(),
        "--config",
        &cfg,
        "--explain",
        "default/user",
    ]);
    assert!(o.success, "{}", o.stderr);
    assert!(o.stdout.contains("placed on n1"), "{}", o.stdout);
    let n0 = o
        .stdout
        .lines()
        .find(|l| l.contains(" n0 "))
        .unwrap_or_else(|| panic!("no row for n0:\n{}", o.stdout));
    assert!(
        n0.contains("VolumeBinding: node(s) didn't find available"),
        "{}",
        o.stdout
    );
}

#[test]
fn bad_volume_objects_are_named_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    let mut bad = claim("data", LOCAL, "1Gi");
    bad["spec"]["accessModes"] = json!(["ReadWriteSometimes"]);
    write_manifest(&file, &[node("n0", "a"), bad]);
    let o = wasmsched(&["simulate", file.to_str().unwrap()]);
    assert_one_line_error(
        &o,
        &[
            "document 2 (PersistentVolumeClaim default/data)",
            "spec.accessModes: unknown access mode \"ReadWriteSometimes\"",
        ],
    );
    write_manifest(&file, &[local_class(), local_class()]);
    let o = wasmsched(&["simulate", file.to_str().unwrap()]);
    assert_one_line_error(&o, &["duplicate StorageClass local-storage (first in"]);
}
