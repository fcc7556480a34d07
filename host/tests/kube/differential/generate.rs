//! Seeded random clusters for the differential test: Nodes, pods already
//! bound to them, and pending pods, as Kubernetes JSON; the namespaces'
//! labels ([`NAMESPACE_LABELS`]) for affinity terms' `namespaceSelector`.
//!
//! What the pods carry: requests and limits (a limit alone now and then),
//! init containers and native sidecars (`restartPolicy: Always`),
//! pod-level resources, host ports, node selectors and node affinity,
//! pod (anti-)affinity with `namespaces`, `namespaceSelector`,
//! `matchLabelKeys` and `mismatchLabelKeys`, tolerations, and topology
//! spread with `matchLabelKeys`, `minDomains`, `nodeAffinityPolicy` and
//! `nodeTaintsPolicy`; their images ([`IMAGES`], tagged or not) are on
//! some nodes' `status.images`, for ImageLocality.
//!
//! Neutral by construction (plugins of kube-scheduler's default set that
//! wasmsched does not run must score every node alike):
//! - no owner references and no Services, ReplicaSets, ReplicationControllers
//!   or StatefulSets: PodTopologySpread's default constraints select
//!   nothing;
//! - no volumes: the volume plugins pass every node;
//! - every pod has priority 0: preemption (PostFilter) finds no victim.
//!
//! Bound pods fit their nodes (requests within allocatable, their resize
//! state counted), as a scheduler would have placed them.
//!
//! Beside the spec, from a second random stream (so that a seed's nodes
//! and pods stay what they were): some bound pods' in-place resize state
//! ([`super::resize`]), some nodes' declared features and some pending
//! pods that need one ([`super::features`]); from a third, the DRA
//! objects (DeviceClasses, ResourceSlices, DeviceTaintRules) and the
//! claims and DRA-backed extended resources of some pending pods
//! ([`super::dra`]).

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

/// Namespaces of the generated pods (the second one exercises the
/// `namespaces` of affinity terms).
pub const NAMESPACES: [&str; 2] = ["difftest", "difftest-b"];
/// The labels the test gives each of [`NAMESPACES`].
pub const NAMESPACE_LABELS: [(&str, &str); 2] = [("team", "a"), ("team", "b")];
/// The profile both schedulers serve.
pub const SCHEDULER: &str = "diff-scheduler";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
const APPS: [&str; 4] = ["web", "db", "cache", "batch"];
/// Images nodes may hold: their names as a kubelet reports them (a tag and
/// a digest), and sizes in MiB (either side of ImageLocality's 23 MiB and
/// 1000 MiB thresholds).
const IMAGES: [(&str, i64); 4] = [
    ("registry.invalid/app:v1", 300),
    ("registry.invalid/base:latest", 800),
    ("registry.invalid/ml:2", 2500),
    ("registry.invalid/tiny:latest", 20),
];
/// What containers run: no node has the first; `base` and `tiny` are
/// named without a tag (`:latest` implied).
const POD_IMAGES: [&str; 5] = [
    "registry.invalid/x",
    "registry.invalid/app:v1",
    "registry.invalid/base",
    "registry.invalid/ml:2",
    "registry.invalid/tiny",
];
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// The Services and the ReplicaSet every seed's cluster has, in the first
/// namespace: what PodTopologySpread's system default constraints spread
/// a pod by (headless Services, so that no cluster IP is allocated; the
/// ReplicaSet has no replicas and no controller runs it).
pub fn workloads() -> Vec<Value> {
    let ns = NAMESPACES[0];
    let service = |name: &str, selector: Value| {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"clusterIP": "None", "selector": selector}})
    };
    vec![
        service("web", json!({"app": "web"})),
        service("cache-v1", json!({"app": "cache", "version": "v1"})),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "db", "namespace": ns},
               "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "db"}},
                        "template": {"metadata": {"labels": {"app": "db"}},
                                     "spec": {"containers": [{"name": "c", "image": "registry.invalid/x"}]}}}}),
    ]
}

/// One generated cluster.
pub struct Cluster {
    /// Nodes; `status.declaredFeatures` is written after creation.
    pub nodes: Vec<Value>,
    /// Pods created with `spec.nodeName` set; a `status` (resize state)
    /// is written after creation.
    pub bound: Vec<Value>,
    /// Pods for the schedulers, in creation order.
    pub pending: Vec<Value>,
    /// Per pending pod, the ResourceClaims created just before it.
    pub claims: Vec<Vec<Value>>,
    /// DeviceClasses, ResourceSlices and DeviceTaintRules, created with
    /// the nodes.
    pub devices: Vec<Value>,
}

/// A cluster of `nodes` nodes (under 100, so that kube-scheduler's
/// numFeasibleNodesToFind is every node) and `pending` pending pods.
pub fn cluster(seed: u64, nodes: usize, pending: usize) -> Cluster {
    assert!(nodes < 100, "more than 99 nodes would sample nodes");
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
        nodes: nodes as u32,
    };
    let mut status_rng = StdRng::seed_from_u64(seed ^ 0x005e_ed0f_5ae5);
    let mut nodes: Vec<Value> = (0..nodes).map(|i| g.node(i)).collect();
    for n in &mut nodes {
        if let Some(f) = super::features::declared(&mut status_rng) {
            n["status"]["declaredFeatures"] = f;
        }
    }
    let mut dra = super::dra::Gen::new(seed);
    let devices = dra.devices(&mut nodes).objects;
    let mut bound = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        // Bound pods fit their node, as a scheduler would have placed them:
        // on a node already over its allocatable, 1.20 rejects pods that
        // request none of the resource and today's upstream does not
        // (kubernetes#116408), which the test cannot recompute.
        let alloc = &n["status"]["allocatable"];
        let capacity = [
            milli_cpu(&alloc["cpu"]),
            bytes(&alloc["memory"]),
            alloc.get("nvidia.com/gpu").map_or(0, bytes),
        ];
        let max_pods = bytes(&alloc["pods"]);
        let mut used = [0; 3];
        for j in 0..g.rng.random_range(0..=2) {
            let mut p = g.bound_pod(&format!("b{i:02}-{j}"));
            let status = super::resize::status(&mut status_rng, &p);
            let takes = super::resize::usage_with(&p, status.as_ref());
            if j + 1 > max_pods || (0..3).any(|k| used[k] + takes[k] > capacity[k]) {
                continue;
            }
            (0..3).for_each(|k| used[k] += takes[k]);
            p["spec"]["nodeName"] = n["metadata"]["name"].clone();
            if let Some(status) = status {
                p["status"] = status;
            }
            bound.push(p);
        }
    }
    let (pending, claims) = (0..pending)
        .map(|i| {
            let mut p = g.pending_pod(&format!("p{i:03}"));
            super::features::maybe_need(&mut status_rng, &mut p);
            let claims = dra.pod(&mut p);
            (p, claims)
        })
        .unzip();
    Cluster {
        nodes,
        bound,
        pending,
        claims,
        devices,
    }
}

/// What a generated pod takes from its node: milli cpu, memory bytes and
/// GPUs requested (a limit alone counts as the request, as the API server
/// copies it): the pod-level requests where set, else the containers' and
/// sidecars' sum, at least any init container's plus the sidecars (an
/// upper bound of upstream's `PodRequests`).
pub fn usage(pod: &Value) -> [i64; 3] {
    let one = |r: &Value| {
        let get = |name: &str| r["requests"].get(name).or(r["limits"].get(name));
        [
            get("cpu").map_or(0, milli_cpu),
            get("memory").map_or(0, bytes),
            get("nvidia.com/gpu").map_or(0, bytes),
        ]
    };
    let list = |key: &str| pod["spec"][key].as_array().cloned().unwrap_or_default();
    let mut total = [0; 3];
    let mut sidecars = [0; 3];
    let mut init = [0; 3];
    for c in list("containers") {
        let u = one(&c["resources"]);
        (0..3).for_each(|k| total[k] += u[k]);
    }
    for c in list("initContainers") {
        let u = one(&c["resources"]);
        if c["restartPolicy"] == "Always" {
            (0..3).for_each(|k| sidecars[k] += u[k]);
        } else {
            (0..3).for_each(|k| init[k] = init[k].max(u[k]));
        }
    }
    (0..3).for_each(|k| total[k] = (total[k] + sidecars[k]).max(init[k] + sidecars[k]));
    if let Some(r) = pod["spec"].get("resources") {
        let u = one(r);
        (0..2).for_each(|k| total[k] = total[k].max(u[k]));
    }
    total
}

struct Gen {
    rng: StdRng,
    nodes: u32,
}

impl Gen {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        *from.choose(&mut self.rng).expect("non-empty")
    }

    fn node_name(&mut self) -> String {
        format!("n{:02}", self.rng.random_range(0..self.nodes))
    }

    fn node(&mut self, i: usize) -> Value {
        let name = format!("n{i:02}");
        let mut labels = Map::new();
        labels.insert(HOSTNAME.into(), json!(name));
        if self.chance(0.9) {
            labels.insert(ZONE.into(), json!(self.pick(&ZONES)));
        }
        if self.chance(0.7) {
            labels.insert("disktype".into(), json!(self.pick(&["ssd", "hdd"])));
        }
        if self.chance(0.8) {
            labels.insert(
                "tier".into(),
                json!(self.rng.random_range(1..=5).to_string()),
            );
        }
        let mut allocatable = json!({
            "cpu": self.pick(&["2", "4", "8", "3500m"]),
            "memory": self.pick(&["4Gi", "6Gi", "8Gi", "16Gi"]),
            "pods": if self.chance(0.85) { "110".to_string() } else { self.rng.random_range(2..=5).to_string() },
        });
        if self.chance(0.3) {
            allocatable["nvidia.com/gpu"] = json!(self.pick(&["1", "2", "4", "8"]));
        }
        let mut spec = json!({});
        if self.chance(0.25) {
            spec["taints"] = self.taints();
        }
        if self.chance(0.1) {
            spec["unschedulable"] = json!(true);
        }
        let mut images = Vec::new();
        for (i, (image, mib)) in IMAGES.iter().enumerate() {
            if self.chance(0.4) {
                let repo = image.split(':').next().unwrap_or(image);
                images.push(json!({
                    "names": [format!("{repo}@sha256:{i:064x}"), image],
                    "sizeBytes": mib * 1024 * 1024,
                }));
            }
        }
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"allocatable": allocatable.clone(), "capacity": allocatable, "images": images}
        })
    }

    fn taints(&mut self) -> Value {
        let taint = |k: &str, v: &str, e: &str| json!({"key": k, "value": v, "effect": e});
        match self.rng.random_range(0..5) {
            0 => json!([taint("dedicated", "gpu", "NoSchedule")]),
            1 => json!([taint("dedicated", "infra", "NoSchedule")]),
            2 => json!([taint("spot", "true", "PreferNoSchedule")]),
            3 => json!([taint("maintenance", "", "NoExecute")]),
            _ => json!([
                taint("spot", "true", "PreferNoSchedule"),
                taint("dedicated", "gpu", "NoSchedule")
            ]),
        }
    }

    /// A request (or limit) value: absent, an explicit zero, or an amount.
    fn amount(&mut self, amounts: &[&'static str]) -> Option<&'static str> {
        match self.rng.random_range(0..20) {
            0..=6 => None,
            7..=8 => Some("0"),
            _ => Some(self.pick(amounts)),
        }
    }

    fn container(&mut self, name: &str, gpu: bool) -> Value {
        let mut requests = Map::new();
        let mut limits = Map::new();
        let cpu = self.amount(&["100m", "250m", "500m", "1", "1500m", "2", "3"]);
        let memory = self.amount(&["64Mi", "256Mi", "512Mi", "1Gi", "2Gi", "3Gi", "5Gi"]);
        for (resource, v) in [("cpu", cpu), ("memory", memory)] {
            if let Some(v) = v {
                // Now and then a limit alone, which the API server copies
                // into the request.
                let into = if self.chance(0.1) {
                    &mut limits
                } else {
                    &mut requests
                };
                into.insert(resource.into(), json!(v));
            }
        }
        if gpu {
            let n = self.pick(&["1", "2", "4"]);
            requests.insert("nvidia.com/gpu".into(), json!(n));
            limits.insert("nvidia.com/gpu".into(), json!(n));
        }
        let image = self.pick(&POD_IMAGES);
        json!({"name": name, "image": image,
               "resources": {"requests": requests, "limits": limits}})
    }

    fn containers(&mut self) -> (Value, Option<Value>) {
        let gpu = self.chance(0.1);
        let mut list = vec![self.container("c0", gpu)];
        if self.chance(0.25) {
            list.push(self.container("c1", false));
        }
        if self.chance(0.15) {
            let port = self.pick(&[8080, 9090]);
            let protocol = self.pick(&["TCP", "UDP"]);
            list[0]["ports"] =
                json!([{"containerPort": 80, "hostPort": port, "protocol": protocol}]);
        }
        let mut init = Vec::new();
        if self.chance(0.1) {
            init.push(self.container("init", false));
        }
        if self.chance(0.15) {
            // A native sidecar, before or after the init container.
            let mut sidecar = self.container("sidecar", false);
            sidecar["restartPolicy"] = json!("Always");
            let at = self.rng.random_range(0..=init.len());
            init.insert(at, sidecar);
        }
        (
            Value::Array(list),
            (!init.is_empty()).then_some(Value::Array(init)),
        )
    }

    /// Pod-level requests (`spec.resources`) at or above what the
    /// containers request, as validation requires, and no limits.
    fn pod_level(&mut self, pod: &Value) -> Option<Value> {
        if !self.chance(0.1) {
            return None;
        }
        let u = usage(pod);
        let cpu = u[0] + self.pick(&[0, 250, 1000]);
        let mem = (u[1] + 1024 * 1024 - 1) / (1024 * 1024) + self.pick(&[0, 512, 2048]);
        Some(json!({"requests": {"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")}}))
    }

    fn pod_base(&mut self, name: &str) -> Value {
        let ns = if self.chance(0.8) {
            NAMESPACES[0]
        } else {
            NAMESPACES[1]
        };
        let app = self.pick(&APPS);
        let version = self.pick(&["v1", "v2"]);
        let (containers, init) = self.containers();
        let mut p = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "version": version}},
            "spec": {"schedulerName": SCHEDULER, "containers": containers,
                     "terminationGracePeriodSeconds": 0}
        });
        if let Some(init) = init {
            p["spec"]["initContainers"] = init;
        }
        if let Some(r) = self.pod_level(&p) {
            p["spec"]["resources"] = r;
        }
        // Most `db` pods of the first namespace belong to its ReplicaSet
        // (PodTopologySpread's system default constraints spread by it).
        if app == "db" && ns == NAMESPACES[0] && self.chance(0.7) {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                "kind": "ReplicaSet", "name": "db", "uid": "5e1ec7ed-0000-4000-8000-00000000db00",
                "controller": true}]);
        }
        p
    }

    /// A pod already placed: requests, ports, and now and then the
    /// (anti-)affinity terms that constrain or attract incoming pods.
    fn bound_pod(&mut self, name: &str) -> Value {
        let mut p = self.pod_base(name);
        let app = p["metadata"]["labels"]["app"].as_str().unwrap().to_string();
        let mut affinity = Map::new();
        if self.chance(0.15) {
            let t = self.pod_term(&app);
            affinity.insert(
                "podAntiAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": [t]}),
            );
        }
        if self.chance(0.1) {
            let t = self.pod_term(&app);
            affinity.insert(
                "podAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": [t]}),
            );
        }
        if self.chance(0.2) {
            let kind = self.pick(&["podAffinity", "podAntiAffinity"]);
            let t = self.weighted_pod_term(&app);
            affinity
                .entry(kind)
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .unwrap()
                .insert(
                    "preferredDuringSchedulingIgnoredDuringExecution".into(),
                    json!([t]),
                );
        }
        if !affinity.is_empty() {
            p["spec"]["affinity"] = Value::Object(affinity);
        }
        p
    }

    fn pending_pod(&mut self, name: &str) -> Value {
        let mut p = self.pod_base(name);
        let app = p["metadata"]["labels"]["app"].as_str().unwrap().to_string();
        let mut selects_nodes = false;
        if self.chance(0.15) {
            selects_nodes = true;
            p["spec"]["nodeSelector"] = match self.rng.random_range(0..2) {
                0 => json!({"disktype": "ssd"}),
                _ => json!({ZONE: self.pick(&ZONES)}),
            };
        }
        let mut affinity = Map::new();
        let mut node_affinity = Map::new();
        if self.chance(0.15) {
            selects_nodes = true;
            let terms: Vec<Value> = (0..self.rng.random_range(1..=2))
                .map(|_| self.node_term())
                .collect();
            node_affinity.insert(
                "requiredDuringSchedulingIgnoredDuringExecution".into(),
                json!({"nodeSelectorTerms": terms}),
            );
        }
        if self.chance(0.25) {
            let terms: Vec<Value> = (0..self.rng.random_range(1..=2))
                .map(|_| json!({"weight": self.rng.random_range(1..=100), "preference": self.node_term()}))
                .collect();
            node_affinity.insert(
                "preferredDuringSchedulingIgnoredDuringExecution".into(),
                Value::Array(terms),
            );
        }
        if !node_affinity.is_empty() {
            affinity.insert("nodeAffinity".into(), Value::Object(node_affinity));
        }
        for kind in ["podAffinity", "podAntiAffinity"] {
            let mut terms = Map::new();
            if self.chance(if kind == "podAffinity" { 0.1 } else { 0.15 }) {
                let t = self.pod_term(&app);
                terms.insert(
                    "requiredDuringSchedulingIgnoredDuringExecution".into(),
                    json!([t]),
                );
            }
            if self.chance(0.15) {
                let list: Vec<Value> = (0..self.rng.random_range(1..=2))
                    .map(|_| self.weighted_pod_term(&app))
                    .collect();
                terms.insert(
                    "preferredDuringSchedulingIgnoredDuringExecution".into(),
                    Value::Array(list),
                );
            }
            if !terms.is_empty() {
                affinity.insert(kind.into(), Value::Object(terms));
            }
        }
        if !affinity.is_empty() {
            p["spec"]["affinity"] = Value::Object(affinity);
        }
        if self.chance(0.3) {
            p["spec"]["tolerations"] = self.tolerations();
        }
        if self.chance(if selects_nodes { 0.15 } else { 0.25 }) {
            p["spec"]["topologySpreadConstraints"] = self.spread(&app);
        }
        p
    }

    fn node_term(&mut self) -> Value {
        if self.chance(0.1) {
            // The API allows one value for a field selector.
            let op = self.pick(&["In", "NotIn"]);
            return json!({"matchFields": [{"key": "metadata.name", "operator": op, "values": [self.node_name()]}]});
        }
        let exprs: Vec<Value> = (0..self.rng.random_range(1..=2))
            .map(|_| match self.rng.random_range(0..6) {
                0 => json!({"key": ZONE, "operator": "In", "values": [self.pick(&ZONES), self.pick(&ZONES)]}),
                1 => json!({"key": "disktype", "operator": "NotIn", "values": ["hdd"]}),
                2 => json!({"key": "tier", "operator": "Gt", "values": [self.rng.random_range(1..=4).to_string()]}),
                3 => json!({"key": "tier", "operator": "Lt", "values": [self.rng.random_range(2..=5).to_string()]}),
                4 => json!({"key": "disktype", "operator": "Exists"}),
                _ => json!({"key": ZONE, "operator": "DoesNotExist"}),
            })
            .collect();
        json!({"matchExpressions": exprs})
    }

    /// A pod (anti-)affinity term: mostly on the pod's own app.
    fn pod_term(&mut self, app: &str) -> Value {
        let target = if self.chance(0.6) {
            app.to_string()
        } else {
            self.pick(&APPS).to_string()
        };
        let selector = if self.chance(0.5) {
            json!({"matchLabels": {"app": target}})
        } else {
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": [target, self.pick(&APPS)]}]})
        };
        let mut t = json!({
            "labelSelector": selector,
            "topologyKey": self.pick(&[ZONE, HOSTNAME]),
        });
        match self.rng.random_range(0..20) {
            0..=2 => t["namespaces"] = json!(NAMESPACES),
            3 => t["namespaceSelector"] = json!({}),
            4 => {
                let (k, v) = self.pick(&NAMESPACE_LABELS);
                t["namespaceSelector"] = json!({"matchLabels": {k: v}});
            }
            5 => {
                t["namespaces"] = json!([NAMESPACES[0]]);
                t["namespaceSelector"] = json!({"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACES[1]]}
                ]});
            }
            _ => {}
        }
        match self.rng.random_range(0..10) {
            0 => t["matchLabelKeys"] = json!(["version"]),
            1 => t["mismatchLabelKeys"] = json!(["version"]),
            _ => {}
        }
        t
    }

    fn weighted_pod_term(&mut self, app: &str) -> Value {
        json!({"weight": self.rng.random_range(1..=100), "podAffinityTerm": self.pod_term(app)})
    }

    fn tolerations(&mut self) -> Value {
        let all = [
            json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}),
            json!({"key": "dedicated", "operator": "Exists"}),
            json!({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}),
            json!({"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"operator": "Exists"}),
        ];
        let n = self.rng.random_range(1..=2);
        let chosen: Vec<Value> = (0..n)
            .map(|_| all[self.rng.random_range(0..all.len())].clone())
            .collect();
        Value::Array(chosen)
    }

    /// One or two constraints, on different keys.
    fn spread(&mut self, app: &str) -> Value {
        let mut keys = vec![self.pick(&[ZONE, HOSTNAME])];
        if self.chance(0.3) {
            keys.push(if keys[0] == ZONE { HOSTNAME } else { ZONE });
        }
        let list: Vec<Value> = keys
            .into_iter()
            .map(|key| {
                let target = if self.chance(0.8) {
                    app.to_string()
                } else {
                    self.pick(&APPS).to_string()
                };
                let when = self.pick(&["DoNotSchedule", "ScheduleAnyway"]);
                let mut c = json!({
                    "maxSkew": self.rng.random_range(1..=3),
                    "topologyKey": key,
                    "whenUnsatisfiable": when,
                    "labelSelector": {"matchLabels": {"app": target}},
                });
                if self.chance(0.2) {
                    c["matchLabelKeys"] = json!(["version"]);
                }
                if when == "DoNotSchedule" && self.chance(0.15) {
                    c["minDomains"] = json!(self.rng.random_range(2..=4));
                }
                if self.chance(0.15) {
                    c["nodeAffinityPolicy"] = json!(self.pick(&["Honor", "Ignore"]));
                }
                if self.chance(0.2) {
                    c["nodeTaintsPolicy"] = json!(self.pick(&["Honor", "Ignore"]));
                }
                c
            })
            .collect();
        Value::Array(list)
    }
}

/// A quantity in base units (cpu in cores, memory in bytes), for the
/// quantities this generator writes.
fn quantity(v: &Value) -> f64 {
    let s = v.as_str().unwrap_or("0");
    let suffixes: [(&str, f64); 9] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, factor) in suffixes {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.parse::<f64>().expect("a quantity") * factor;
        }
    }
    s.parse::<f64>().expect("a quantity")
}

pub fn milli_cpu(v: &Value) -> i64 {
    (quantity(v) * 1000.0).ceil() as i64
}

pub fn bytes(v: &Value) -> i64 {
    quantity(v).ceil() as i64
}
