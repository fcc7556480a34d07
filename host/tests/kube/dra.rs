//! DynamicResources against kube-scheduler (the version scripts/test-servers
//! builds, 1.37) on the same API server: for each scenario the same
//! cluster (nodes, a DeviceClass, ResourceSlices as a driver would publish
//! them, claims or templates) is built, one scheduler runs, the pods are
//! created one at a time (each decided before the next, so both see the
//! same queue), and what the scheduler did is read back from the API: each
//! pod's node and the devices written in its claims' `status.allocation`,
//! or its FailedScheduling message. Both schedulers must agree exactly.
//! Templates are turned into claims by the real kube-controller-manager.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::Client;
use serde_json::{json, Value};

use crate::env::*;

#[path = "dra_capacity.rs"]
mod dra_capacity;
#[path = "dra_extended.rs"]
mod dra_extended;

const NS: &str = "dra";
const SCHED: &str = "dra-scheduler";
const DRIVER: &str = "gpu.example.com";
use crate::env::DRA_LABEL as LABEL;

pub fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A GPU: (name, model, memory, PCIe root).
type Gpu = (&'static str, &'static str, &'static str, &'static str);

fn slice(node: &str, gpus: &[Gpu]) -> Value {
    let devices: Vec<Value> = gpus
        .iter()
        .map(|(name, model, mem, root)| {
            json!({"name": name, "attributes": {
                    "model": {"string": model},
                    "resource.kubernetes.io/pcieRoot": {"string": root}},
                "capacity": {"memory": {"value": mem}}})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus"), "labels": {LABEL: "yes"}},
        "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

fn request(name: &str, extra: Value) -> Value {
    let mut e = json!({"deviceClassName": "gpu"});
    if let (Some(e), Some(x)) = (e.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({"name": name, "exactly": e})
}

fn cel(expr: &str) -> Value {
    json!({"selectors": [{"cel": {"expression": expr}}]})
}

fn claim(name: &str, requests: Value, constraints: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": requests, "constraints": constraints}}})
}

/// A pod of the scenario's scheduler with `claims`: (pod claim name,
/// claim name or `template:<name>`).
fn pod(name: &str, claims: &[(&str, &str)]) -> Value {
    let rc: Vec<Value> = claims
        .iter()
        .map(|(n, c)| match c.strip_prefix("template:") {
            Some(t) => json!({"name": n, "resourceClaimTemplateName": t}),
            None => json!({"name": n, "resourceClaimName": c}),
        })
        .collect();
    let uses: Vec<Value> = claims.iter().map(|(n, _)| json!({"name": n})).collect();
    json!({"metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": SCHED, "resourceClaims": rc,
            "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": "100m"}, "claims": uses}}]}})
}

struct Scenario {
    name: &'static str,
    nodes: Vec<(&'static str, Vec<Gpu>)>,
    /// Claims and templates.
    objects: Vec<Value>,
    pods: Vec<Value>,
    /// Needs kube-controller-manager's resourceclaim controller.
    templates: bool,
    /// The namespace allows admin access.
    admin: bool,
}

const A100: &str = "device.attributes[\"gpu.example.com\"].model == \"A100\"";

fn four(model: &'static str, mem: &'static str) -> Vec<Gpu> {
    vec![
        ("gpu-0", model, mem, "pci0000:00"),
        ("gpu-1", model, mem, "pci0000:80"),
        ("gpu-2", model, mem, "pci0000:80"),
        ("gpu-3", model, mem, "pci0000:00"),
    ]
}

fn scenarios() -> Vec<Scenario> {
    let one = || json!([request("gpu", json!({}))]);
    vec![
        Scenario {
            name: "cel-on-attributes-and-capacity",
            nodes: vec![("a100", four("A100", "40Gi")), ("h100", four("H100", "80Gi"))],
            objects: vec![
                claim("big", json!([request("gpu", cel("device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0"))]), json!([])),
                claim("model", json!([request("gpu", cel(A100))]), json!([])),
            ],
            pods: vec![pod("big", &[("gpu", "big")]), pod("model", &[("gpu", "model")])],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "match-attribute-over-two-requests",
            nodes: vec![("n1", four("A100", "40Gi"))],
            objects: vec![claim(
                "pair",
                json!([request("a", json!({})), request("b", json!({}))]),
                json!([{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
            ), claim(
                "pair2",
                json!([request("gpus", json!({"count": 2}))]),
                json!([{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
            )],
            pods: vec![pod("pair", &[("gpu", "pair")]), pod("pair2", &[("gpu", "pair2")])],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "all-devices",
            nodes: vec![("n1", four("A100", "40Gi")), ("n2", four("H100", "80Gi"))],
            objects: vec![
                claim("one", json!([request("gpu", cel(A100))]), json!([])),
                claim("all-a100", json!([request("gpus", {
                    let mut c = cel(A100);
                    c["allocationMode"] = json!("All");
                    c
                })]), json!([])),
                claim("all-h100", json!([request("gpus", json!({"allocationMode": "All", "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"H100\""}}]}))]), json!([])),
            ],
            pods: vec![
                pod("one", &[("gpu", "one")]),
                pod("all-a100", &[("gpu", "all-a100")]),
                pod("all-h100", &[("gpu", "all-h100")]),
            ],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "first-available",
            nodes: vec![("n1", four("A100", "40Gi")), ("n2", vec![("gpu-0", "H100", "80Gi", "pci0000:00")])],
            objects: vec![
                claim("h100", json!([request("gpu", cel("device.attributes[\"gpu.example.com\"].model == \"H100\""))]), json!([])),
                claim("either", json!([{"name": "gpus", "firstAvailable": [
                    {"name": "h100", "deviceClassName": "gpu", "count": 1, "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"H100\""}}]},
                    {"name": "a100", "deviceClassName": "gpu", "count": 2, "selectors": [{"cel": {"expression": A100}}]}]}]), json!([])),
            ],
            pods: vec![pod("h100", &[("gpu", "h100")]), pod("either", &[("gpu", "either")])],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "shared-claim-and-the-last-device",
            // The shared claim asks for 80Gi, which only n1 has: the node
            // is unique (two equal nodes would be a tie, which both
            // schedulers break at random).
            nodes: vec![("n1", vec![("gpu-0", "A100", "80Gi", "pci0000:00")]), ("n2", vec![("gpu-0", "A100", "40Gi", "pci0000:00")])],
            objects: vec![
                claim(
                    "shared",
                    json!([request("gpu", cel("device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0"))]),
                    json!([]),
                ),
                claim("second", one(), json!([])),
                claim("third", one(), json!([])),
            ],
            pods: vec![
                pod("user-0", &[("gpu", "shared")]),
                pod("user-1", &[("gpu", "shared")]),
                pod("second", &[("gpu", "second")]),
                pod("third", &[("gpu", "third")]),
            ],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "unsatisfiable-and-missing-class",
            nodes: vec![("n1", four("A100", "40Gi"))],
            objects: vec![
                claim("five", json!([request("gpus", json!({"count": 5}))]), json!([])),
                claim("no-class", json!([{"name": "gpu", "exactly": {"deviceClassName": "missing"}}]), json!([])),
            ],
            pods: vec![pod("five", &[("gpu", "five")]), pod("no-class", &[("gpu", "no-class")])],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "partitionable-devices",
            nodes: vec![("n1", vec![])],
            objects: vec![
                claim("a", one(), json!([])),
                claim("b", one(), json!([])),
                claim("c", one(), json!([])),
            ],
            pods: vec![pod("a", &[("gpu", "a")]), pod("b", &[("gpu", "b")]), pod("c", &[("gpu", "c")])],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "admin-access",
            nodes: vec![("n1", vec![("gpu-0", "A100", "40Gi", "pci0000:00")])],
            objects: vec![
                claim("user", one(), json!([])),
                claim("admin", json!([request("gpu", json!({"adminAccess": true}))]), json!([])),
            ],
            pods: vec![pod("user", &[("gpu", "user")]), pod("admin", &[("gpu", "admin")])],
            templates: false,
            admin: true,
        },
        Scenario {
            name: "template-claims",
            nodes: vec![("n1", four("A100", "40Gi"))],
            objects: vec![json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "two", "namespace": NS},
                "spec": {"spec": {"devices": {"requests": [request("gpus", json!({"count": 2}))]}}}})],
            pods: vec![
                pod("train-0", &[("gpus", "template:two")]),
                pod("train-1", &[("gpus", "template:two")]),
                pod("train-2", &[("gpus", "template:two")]),
            ],
            templates: true,
            admin: false,
        },
    ]
}

/// The partitionable scenario's slices (one pool of two: the counters,
/// the devices): three partitions sharing one GPU's memory counter (8Gi):
/// 4Gi, 6Gi, 4Gi.
fn partitioned_slices(node: &str) -> [Value; 2] {
    let part = |name: &str, mem: &str| {
        json!({"name": name, "attributes": {"model": {"string": "A100"}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": mem}}}]})
    };
    let pool = json!({"name": node, "generation": 1, "resourceSliceCount": 2});
    [
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-counters"), "labels": {LABEL: "yes"}},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpus"), "labels": {LABEL: "yes"}},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                "devices": [part("part-4g-a", "4Gi"), part("part-6g", "6Gi"), part("part-4g-b", "4Gi")]}}),
    ]
}

/// What a scheduler did with one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Bound {
        node: String,
        /// Per pod claim: the devices of its claim's allocation, and who
        /// the claim is reserved for.
        claims: BTreeMap<String, (Vec<String>, Vec<String>)>,
    },
    Failed(String),
}

async fn clean(client: &Client) {
    let claims: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &resource("ResourceClaim", "resourceclaims"),
    );
    delete_claims(&claims).await;
    let templates: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &resource("ResourceClaimTemplate", "resourceclaimtemplates"),
    );
    let _ = templates
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let labelled = ListParams::default().labels(&format!("{LABEL}=yes"));
    for (kind, plural) in [
        ("ResourceSlice", "resourceslices"),
        ("DeviceClass", "deviceclasses"),
        ("DeviceTaintRule", "devicetaintrules"),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, plural));
        let _ = api
            .delete_collection(&DeleteParams::default(), &labelled)
            .await;
    }
    reset(client, &[NS]).await;
    wait_until("DRA objects gone", Duration::from_secs(60), || async {
        claims
            .list(&ListParams::default())
            .await
            .map(|l| l.items.is_empty())
            .unwrap_or(false)
    })
    .await;
}

async fn create(client: &Client, o: &Value) {
    let kind = o["kind"].as_str().unwrap();
    let plural = match kind {
        "ResourceSlice" => "resourceslices",
        "DeviceClass" => "deviceclasses",
        "ResourceClaim" => "resourceclaims",
        "DeviceTaintRule" => "devicetaintrules",
        _ => "resourceclaimtemplates",
    };
    let obj: DynamicObject = serde_json::from_value(o.clone()).unwrap();
    let r = resource(kind, plural);
    let api: Api<DynamicObject> = match o["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    };
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

async fn build(client: &Client, s: &Scenario) {
    clean(client).await;
    let ns: Api<Namespace> = Api::all(client.clone());
    let labels = if s.admin {
        json!({"resource.kubernetes.io/admin-access": "true"})
    } else {
        json!({"resource.kubernetes.io/admin-access": null})
    };
    ns.patch(
        NS,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": labels}})),
    )
    .await
    .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, _) in &s.nodes {
        let n: Node = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}),
        )
        .unwrap();
        nodes.create(&PostParams::default(), &n).await.unwrap();
    }
    create(client, &json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu", "labels": {LABEL: "yes"}},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}))
    .await;
    for (name, gpus) in &s.nodes {
        if s.name == "partitionable-devices" {
            for sl in partitioned_slices(name) {
                create(client, &sl).await;
            }
        } else {
            create(client, &slice(name, gpus)).await;
        }
    }
    for o in &s.objects {
        create(client, o).await;
    }
}

/// The devices of a claim's allocation and its consumers.
async fn claim_state(client: &Client, name: &str) -> (Vec<String>, Vec<String>) {
    let claims: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &resource("ResourceClaim", "resourceclaims"),
    );
    let c = claims.get(name).await.unwrap();
    let status = &c.data["status"];
    let mut devices: Vec<String> = status["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{}={}/{}{}",
                r["request"].as_str().unwrap_or(""),
                r["pool"].as_str().unwrap_or(""),
                r["device"].as_str().unwrap_or(""),
                dra_capacity::consumed(r)
            )
        })
        .collect();
    devices.sort();
    let mut users: Vec<String> = status["reservedFor"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    users.sort();
    (devices, users)
}

/// Waits until the pod is bound (and its claims written) or has a
/// FailedScheduling event.
async fn decide(client: &Client, p: &Value, log: &dyn Fn() -> String) -> Verdict {
    let name = p["metadata"]["name"].as_str().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    loop {
        let pod = pods.get(name).await.unwrap();
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            let mut claims = BTreeMap::new();
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.clone())
                .unwrap_or_default();
            for pc in pod
                .spec
                .as_ref()
                .and_then(|s| s.resource_claims.clone())
                .unwrap_or_default()
            {
                let claim = match (&pc.resource_claim_name, &pc.resource_claim_template_name) {
                    (Some(n), _) => n.clone(),
                    _ => statuses
                        .iter()
                        .find(|s| s.name == pc.name)
                        .and_then(|s| s.resource_claim_name.clone())
                        .unwrap(),
                };
                let mut state = claim_state(client, &claim).await;
                // Template claims have generated names: compare the pods.
                state.1.retain(|u| !u.is_empty());
                claims.insert(pc.name.clone(), state);
            }
            return Verdict::Bound { node, claims };
        }
        if let Some(e) = events_for(client, NS, name, "FailedScheduling")
            .await
            .first()
        {
            return Verdict::Failed(e.message.clone().unwrap_or_default());
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{name}: no decision; log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn controller_manager(start: bool) {
    let mut cmd = Command::new(repo().join("scripts/test-servers"));
    if start {
        cmd.args([
            "start-controller-manager",
            env().servers.to_str().unwrap(),
            "resourceclaim-controller",
        ]);
    } else {
        cmd.args(["stop-controller-manager", env().servers.to_str().unwrap()]);
    }
    assert!(
        cmd.status().unwrap().success(),
        "test-servers controller manager"
    );
}

async fn run(client: &Client, s: &Scenario, wasm: bool, dir: &Path) -> Vec<(String, Verdict)> {
    build(client, s).await;
    let (_kube, ws, log_file);
    if wasm {
        let cfg = dir.join("wasmsched.json");
        let file = json!({"apiVersion": "wasmsched.io/v1alpha1", "kind": "WasmSchedulerConfiguration",
            "leaderElection": {"leaderElect": false},
            "profiles": [{"schedulerName": SCHED, "plugins": {"multiPoint": {"disabled": [
                {"name": "GpuTopology"}, {"name": "NetworkLocality"}]}}}]});
        std::fs::write(&cfg, file.to_string()).unwrap();
        ws = Some(Scheduler::start(
            dir,
            &format!("ws-{}", s.name),
            &env().kubeconfig,
            &["--config", cfg.to_str().unwrap()],
        ));
        _kube = None;
        log_file = ws.as_ref().unwrap().log.clone();
    } else {
        let cfg = dir.join("kube-scheduler.yaml");
        std::fs::write(
            &cfg,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {}}}\nleaderElection: {{leaderElect: false}}\n\
             profiles:\n- schedulerName: {SCHED}\n",
                env().kubeconfig.display()
            ),
        )
        .unwrap();
        log_file = dir.join(format!("kube-scheduler-{}.log", s.name));
        _kube = Some(Killed(kube_scheduler(&cfg, &log_file, 2)));
        ws = None;
    }
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let mut out = Vec::new();
    for p in &s.pods {
        crate::create_pod(client, p.clone()).await;
        let v = decide(client, p, &log).await;
        out.push((p["metadata"]["name"].as_str().unwrap().to_string(), v));
    }
    drop(ws);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_resources_match_kube_scheduler() {
    let _g = serial();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    for s in scenarios() {
        if s.templates {
            controller_manager(true);
        }
        let kube = run(&client, &s, false, tmp.path()).await;
        let ours = run(&client, &s, true, tmp.path()).await;
        if s.templates {
            controller_manager(false);
        }
        eprintln!("{}: kube-scheduler {kube:?}", s.name);
        if kube != ours {
            differences.push(format!(
                "{}:\n  kube-scheduler: {kube:?}\n  wasmsched:      {ours:?}",
                s.name
            ));
        }
    }
    clean(&client).await;
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
}

/// Device ranking (contract 0.3): GpuTopology ranks the pairs a 2-GPU
/// claim can get on a node whose GPUs alternate between two PCIe roots.
/// kube-scheduler's first fit takes gpu-0 and gpu-1 (two roots); with
/// GpuTopology the pair on one root (gpu-0, gpu-3) is written. After a
/// restart the allocation is rebuilt from the claim's status: a second pod
/// sharing the claim is bound beside the first with the same devices, and
/// its other 2-GPU claim gets the remaining pair (never gpu-0 or gpu-3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_topology_ranks_devices_and_the_allocation_holds_across_a_restart() {
    let _g = serial();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let two = || json!([request("gpus", json!({"count": 2}))]);
    let scenario = || Scenario {
        name: "device-ranking",
        nodes: vec![("dra-a", four("A100", "80Gi"))],
        objects: vec![
            claim("pair", two(), json!([])),
            claim("pair-2", two(), json!([])),
        ],
        pods: vec![pod("first", &[("gpus", "pair")])],
        templates: false,
        admin: false,
    };
    let first_fit = run(&client, &scenario(), false, tmp.path()).await;
    let devices = |v: &Verdict, claim: &str| match v {
        Verdict::Bound { claims, .. } => claims[claim].0.clone(),
        Verdict::Failed(m) => panic!("not bound: {m}"),
    };
    assert_eq!(
        devices(&first_fit[0].1, "gpus"),
        ["gpus=dra-a/gpu-0", "gpus=dra-a/gpu-1"],
        "kube-scheduler's first fit"
    );

    // wasmsched's default profile (GpuTopology ranks devices).
    let s = scenario();
    build(&client, &s).await;
    let cfg = tmp.path().join("ranking.json");
    let file = json!({"apiVersion": "wasmsched.io/v1alpha1", "kind": "WasmSchedulerConfiguration",
        "leaderElection": {"leaderElect": false},
        "profiles": [{"schedulerName": SCHED}]});
    std::fs::write(&cfg, file.to_string()).unwrap();
    let start = |name: &str| {
        Scheduler::start(
            tmp.path(),
            name,
            &env().kubeconfig,
            &["--config", cfg.to_str().unwrap()],
        )
    };
    let ws = start("ws-ranking");
    let log = ws.log.clone();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    ws.wait_ready().await;
    let claims_before = claim_counts(&ws).await;
    assert!(
        claims_before.1 >= 2.0,
        "pair and pair-2 pending: {claims_before:?}"
    );
    crate::create_pod(&client, s.pods[0].clone()).await;
    let v = decide(&client, &s.pods[0], &read).await;
    assert_eq!(
        devices(&v, "gpus"),
        ["gpus=dra-a/gpu-0", "gpus=dra-a/gpu-3"],
        "GpuTopology's pair on one PCIe root"
    );
    // Per-device allocation as the dashboard reads it (the claim's
    // status, once the watch has it).
    let expect = [
        ("gpu-0", 1.0),
        ("gpu-1", 0.0),
        ("gpu-2", 0.0),
        ("gpu-3", 1.0),
    ];
    wait_until("the per-device metrics", Duration::from_secs(20), || {
        devices_held(&ws, &expect)
    })
    .await;
    // The claim counts are the cluster's: pair moved from pending to
    // allocated.
    let (allocated, pending) = claim_counts(&ws).await;
    assert_eq!(
        (allocated - claims_before.0, claims_before.1 - pending),
        (1.0, 1.0),
        "pair allocated"
    );
    drop(ws);

    let ws = start("ws-ranking-restarted");
    let log = ws.log.clone();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    // Rebuilt from the claims' status before any pod is scheduled.
    wait_until(
        "the devices held after the restart",
        Duration::from_secs(20),
        || devices_held(&ws, &expect),
    )
    .await;
    let second = pod("second", &[("shared", "pair"), ("more", "pair-2")]);
    crate::create_pod(&client, second.clone()).await;
    match decide(&client, &second, &read).await {
        Verdict::Bound { node, claims } => {
            assert_eq!(node, "dra-a");
            assert_eq!(
                claims["shared"],
                (
                    vec![
                        "gpus=dra-a/gpu-0".to_string(),
                        "gpus=dra-a/gpu-3".to_string()
                    ],
                    vec!["first".to_string(), "second".to_string()]
                ),
                "the allocation is kept and the claim shared"
            );
            assert_eq!(
                claims["more"].0,
                ["gpus=dra-a/gpu-1", "gpus=dra-a/gpu-2"],
                "the rest of the node, rebuilt from the claims' status"
            );
        }
        Verdict::Failed(m) => panic!("second pod not bound: {m}\n{}", read()),
    }
    drop(ws);
    clean(&client).await;
}

/// Whether `wasmsched_dra_device_allocated` of node dra-a's devices reads
/// as `expect` (device, value).
async fn devices_held(ws: &Scheduler, expect: &[(&str, f64)]) -> bool {
    for (device, value) in expect {
        let labels = [
            ("node", "dra-a"),
            ("driver", DRIVER),
            ("pool", "dra-a"),
            ("device", *device),
        ];
        if ws.metric("wasmsched_dra_device_allocated", &labels).await != *value {
            return false;
        }
    }
    true
}

/// `wasmsched_dra_claims`: (allocated, pending).
async fn claim_counts(ws: &Scheduler) -> (f64, f64) {
    let allocated = ws.metric("wasmsched_dra_claims", &[("state", "allocated")]);
    let pending = ws.metric("wasmsched_dra_claims", &[("state", "pending")]);
    (allocated.await, pending.await)
}
