//! The volume scenarios the two schedulers are compared on: Kubernetes
//! objects as JSON, created on the real API server.

use serde_json::{json, Value};

/// The namespace of every claim and pod.
pub const NS: &str = "volumes";
/// The profile both schedulers serve.
pub const SCHED: &str = "volume-scheduler";
/// The test provisioner's name (`provisioner.rs`).
pub const PROVISIONER: &str = "test.csi.wasmsched.io";

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// One scenario.
pub struct Scenario {
    pub name: &'static str,
    pub nodes: Vec<Value>,
    /// StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities, PVs and
    /// claims, created before the
    /// scheduler starts.
    pub objects: Vec<Value>,
    /// Claims the PV controller binds before any pod is created
    /// (`Immediate` bindings).
    pub bound_first: Vec<&'static str>,
    /// The pods, in creation order.
    pub pods: Vec<Value>,
    /// Created at once, so that they compete (outcomes compared as a
    /// multiset); otherwise one at a time, each after the previous one's
    /// outcome (compared pod by pod).
    pub together: bool,
    /// Only one node can be right for each scheduled pod: both schedulers
    /// must choose it.
    pub same_nodes: bool,
}

pub fn node(name: &str, zone: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": {HOST: name, ZONE: zone}},
           "spec": {},
           "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                      "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})
}

fn class(name: &str, provisioner: &str, mode: &str) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": name}, "provisioner": provisioner,
           "volumeBindingMode": mode})
}

fn local_class() -> Value {
    class(
        "local",
        "kubernetes.io/no-provisioner",
        "WaitForFirstConsumer",
    )
}

fn local_pv(name: &str, node: &str, size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
           "metadata": {"name": name},
           "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                    "local": {"path": format!("/mnt/disks/{name}")},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": HOST, "operator": "In", "values": [node]}]}]}}}})
}

fn claim(name: &str, class: &str, size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                    "resources": {"requests": {"storage": size}}}})
}

pub fn pod(name: &str, claims: &[&str], cpu: &str) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"schedulerName": SCHED, "volumes": volumes,
                    "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                    "resources": {"requests": {"cpu": cpu}}}]}})
}

/// Local PVs of different sizes on specific nodes; each claim fits one.
fn local_volumes() -> Scenario {
    Scenario {
        name: "local PVs on specific nodes",
        nodes: (0..3).map(|i| node(&format!("n{i}"), "a", "4")).collect(),
        objects: vec![
            local_class(),
            local_pv("pv-n0", "n0", "10Gi"),
            local_pv("pv-n1", "n1", "20Gi"),
            claim("big", "local", "15Gi"),
            claim("small", "local", "5Gi"),
            claim("extra", "local", "1Gi"),
        ],
        bound_first: vec![],
        pods: vec![
            pod("uses-big", &["big"], "100m"),
            pod("uses-small", &["small"], "100m"),
            pod("uses-extra", &["extra"], "100m"),
        ],
        together: false,
        same_nodes: true,
    }
}

/// Two pods, one PV that fits both claims.
fn competing() -> Scenario {
    Scenario {
        name: "two pods competing for one PV",
        nodes: (0..2).map(|i| node(&format!("n{i}"), "a", "4")).collect(),
        objects: vec![
            local_class(),
            local_pv("only", "n1", "10Gi"),
            claim("first", "local", "1Gi"),
            claim("second", "local", "1Gi"),
        ],
        bound_first: vec![],
        pods: vec![pod("a", &["first"], "100m"), pod("b", &["second"], "100m")],
        together: true,
        same_nodes: true,
    }
}

/// A claim the PV controller binds at once to a PV in zone b.
fn zonal() -> Scenario {
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "zonal-disk", "labels": {ZONE: "b"}},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
                 "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                 "csi": {"driver": "zonal.csi.wasmsched.io", "volumeHandle": "disk-1"}}});
    let mut c = claim("shared", "", "10Gi");
    c["spec"]["accessModes"] = json!(["ReadWriteMany"]);
    Scenario {
        name: "a zonal bound PV",
        nodes: vec![
            node("a1", "a", "4"),
            node("b1", "b", "2"),
            node("c1", "c", "4"),
        ],
        objects: vec![pv, c],
        bound_first: vec!["shared"],
        pods: vec![
            pod("in-zone", &["shared"], "100m"),
            // Too big for b1, the only node in the PV's zone.
            pod("too-big", &["shared"], "3"),
        ],
        together: false,
        same_nodes: true,
    }
}

/// A claim for a class that does not exist, and a missing claim.
fn missing() -> Scenario {
    Scenario {
        name: "a claim for a missing class",
        nodes: (0..3).map(|i| node(&format!("n{i}"), "a", "4")).collect(),
        objects: vec![claim("orphan", "no-such-class", "1Gi")],
        bound_first: vec![],
        pods: vec![
            pod("needs-class", &["orphan"], "100m"),
            pod("needs-claim", &["nowhere"], "100m"),
        ],
        together: false,
        same_nodes: true,
    }
}

fn csi_node(name: &str, count: i64) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
           "metadata": {"name": name},
           "spec": {"drivers": [{"name": PROVISIONER, "nodeID": name,
                                 "allocatable": {"count": count}}]}})
}

/// Provisioned CSI volumes on nodes that attach one each.
fn attach_limits() -> Scenario {
    let mut objects = vec![
        class("attach", PROVISIONER, "WaitForFirstConsumer"),
        csi_node("n0", 1),
        csi_node("n1", 1),
    ];
    let mut pods = Vec::new();
    for i in 0..3 {
        objects.push(claim(&format!("vol-{i}"), "attach", "1Gi"));
        pods.push(pod(&format!("p{i}"), &[&format!("vol-{i}")], "100m"));
    }
    Scenario {
        name: "CSI attach limits",
        nodes: (0..2).map(|i| node(&format!("n{i}"), "a", "4")).collect(),
        objects,
        bound_first: vec![],
        pods,
        together: false,
        same_nodes: false,
    }
}

/// A CSI driver that must be installed on the node (VolumeLimitScaling,
/// beta and on in 1.37: `preventPodSchedulingIfMissing`): only n0's
/// CSINode lists it, so the claims' pods go there; one held to n1 by its
/// node selector is unschedulable, with upstream's reason for n1.
fn driver_on_node() -> Scenario {
    let mut objects = vec![
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
               "metadata": {"name": PROVISIONER},
               "spec": {"preventPodSchedulingIfMissing": true}}),
        class("on-node", PROVISIONER, "WaitForFirstConsumer"),
        csi_node("n0", 5),
    ];
    let mut pods = Vec::new();
    for i in 0..3 {
        objects.push(claim(&format!("vol-{i}"), "on-node", "1Gi"));
        pods.push(pod(&format!("p{i}"), &[&format!("vol-{i}")], "100m"));
    }
    pods[2]["spec"]["nodeSelector"] = json!({HOST: "n1"});
    Scenario {
        name: "a CSI driver required on the node",
        nodes: (0..2).map(|i| node(&format!("n{i}"), "a", "4")).collect(),
        objects,
        bound_first: vec![],
        pods,
        together: false,
        same_nodes: true,
    }
}

/// A CSI driver that publishes storage capacity: 5Gi reachable from zone a,
/// 1Gi from zone b (and 100Gi for another class there). The claims are
/// provisioned only where their size fits; the 20Gi one fits nowhere.
fn storage_capacity() -> Scenario {
    let capacity = |name: &str, class: &str, zone: &str, size: &str| {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
               "metadata": {"name": name, "namespace": NS},
               "storageClassName": class, "capacity": size,
               "nodeTopology": {"matchLabels": {ZONE: zone}}})
    };
    let mut objects = vec![
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
               "metadata": {"name": PROVISIONER}, "spec": {"storageCapacity": true}}),
        class("capacity", PROVISIONER, "WaitForFirstConsumer"),
        class("other", PROVISIONER, "WaitForFirstConsumer"),
        capacity("zone-a", "capacity", "a", "5Gi"),
        capacity("zone-b", "capacity", "b", "1Gi"),
        capacity("zone-b-other", "other", "b", "100Gi"),
    ];
    let mut pods = Vec::new();
    for (name, size) in [("small", "1Gi"), ("medium", "3Gi"), ("huge", "20Gi")] {
        objects.push(claim(name, "capacity", size));
        pods.push(pod(name, &[name], "100m"));
    }
    Scenario {
        name: "CSIStorageCapacity",
        nodes: vec![node("a1", "a", "2"), node("b1", "b", "8")],
        objects,
        bound_first: vec![],
        pods,
        together: false,
        same_nodes: true,
    }
}

/// A StatefulSet's replicas (created at once, as with `Parallel` pod
/// management): one local PV per node, one more replica than PVs.
fn stateful_set() -> Scenario {
    let mut objects = vec![local_class()];
    let mut pods = Vec::new();
    for i in 0..3 {
        objects.push(local_pv(&format!("pv-{i}"), &format!("n{i}"), "10Gi"));
    }
    for i in 0..4 {
        objects.push(claim(&format!("data-web-{i}"), "local", "5Gi"));
        let mut p = pod(&format!("web-{i}"), &[&format!("data-web-{i}")], "100m");
        p["metadata"]["labels"] = json!({"app": "web"});
        pods.push(p);
    }
    Scenario {
        name: "a StatefulSet-style set of claims",
        nodes: (0..3).map(|i| node(&format!("n{i}"), "a", "4")).collect(),
        objects,
        bound_first: vec![],
        pods,
        together: true,
        same_nodes: false,
    }
}

pub fn all() -> Vec<Scenario> {
    vec![
        local_volumes(),
        competing(),
        zonal(),
        missing(),
        attach_limits(),
        driver_on_node(),
        stateful_set(),
        storage_capacity(),
    ]
}
