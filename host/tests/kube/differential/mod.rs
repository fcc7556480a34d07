//! Differential test: kube-scheduler (the version `scripts/test-servers`
//! builds, 1.37) and wasmsched on the same seeded random clusters, on the
//! real API server, one pending pod at a time.
//!
//! For each pod: the cluster as it is (nodes and bound pods) is read, the
//! pod is created and kube-scheduler binds it or records its
//! FailedScheduling event; wasmsched's answer for the same pod on the same
//! cluster comes from the `wasmsched simulate --explain` CLI (not the
//! library, so that refactoring the framework cannot break this test's
//! build). Bound pods stay, so the cluster evolves; pods kube-scheduler
//! could not place are deleted, so that they do not come back later.
//!
//! Per pod, with no allowance: the same schedulability; for unschedulable
//! pods the identical FitError message (its `preemption:` part included);
//! for scheduled pods kube-scheduler's node is one of wasmsched's best
//! nodes, and where wasmsched chose that node too, the devices of every
//! claim of the pod (its own, shared ones, and the claim made for its
//! DRA-backed extended resources) are the ones kube-scheduler wrote in the
//! claims' `status.allocation`, consumed capacity included. The cluster
//! carries DRA objects ([`dra`]): devices shared by capacity, taint rules,
//! extended resources served by DeviceClasses.
//!
//! `WASMSCHED_DIFFTEST_SEEDS` (`1-3`, or a list `4,7`) and
//! `WASMSCHED_DIFFTEST_PODS` (50) size the run; `--nocapture` shows the
//! summary. A differing pod's cluster, wasmsched's configuration and
//! kube-scheduler's log are kept in `$TMPDIR/wasmsched-difftest/`
//! (`WASMSCHED_DIFFTEST_KUBE_V=10` makes kube-scheduler log every plugin's
//! scores).

mod dra;
mod features;
mod generate;
mod resize;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

use crate::env::*;
use generate::{NAMESPACES, SCHEDULER};

/// kube-scheduler's default Score plugins and weights (1.37,
/// `pkg/scheduler/apis/config/v1/default_plugins.go`; DynamicResources
/// scores a `firstAvailable` request by the subrequest allocated), which
/// wasmsched's profile is given.
const WEIGHTS: [(&str, i64); 8] = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("NodeResourcesFit", 1),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DynamicResources", 2),
];

/// What kube-scheduler did with a pod.
#[derive(Debug)]
enum KubeOutcome {
    Bound(String),
    Unschedulable(String),
}

/// Counts over the whole run.
#[derive(Default)]
struct Tally {
    pods: usize,
    scheduled: usize,
    unschedulable: usize,
    /// kube-scheduler's node among wasmsched's best nodes.
    nodes_among_best: usize,
    /// kube-scheduler's message and wasmsched's, character for character.
    messages_identical: usize,
    /// Pods with ResourceClaims, and pods asking for extended resources
    /// DRA may serve.
    with_claims: usize,
    with_extended: usize,
    /// Pods bound with claims whose allocation was compared (wasmsched
    /// chose kube-scheduler's node), and of those, pods given a device.
    allocations_compared: usize,
    allocations_with_devices: usize,
    /// Of those, pods given a share of a device (consumed capacity), and
    /// pods given the claim made for their extended resources.
    allocations_shared: usize,
    allocations_extended: usize,
    /// Pods with claims or extended resources both found unschedulable.
    dra_unschedulable: usize,
    failures: Vec<String>,
}

/// Kills the child on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `WASMSCHED_DIFFTEST_SEEDS`: `1-3` (the default), `4,7`, or both mixed.
fn seeds() -> Vec<u64> {
    let spec = std::env::var("WASMSCHED_DIFFTEST_SEEDS").unwrap_or_else(|_| "1-3".into());
    let num = |s: &str| -> u64 {
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("WASMSCHED_DIFFTEST_SEEDS={spec:?}: {s:?} is not a seed"))
    };
    let mut out = Vec::new();
    for part in spec.split(',') {
        match part.split_once('-') {
            Some((a, b)) => out.extend(num(a)..=num(b)),
            None => out.push(num(part)),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasmsched_schedules_like_kube_scheduler() {
    let _g = serial();
    let pods: usize = std::env::var("WASMSCHED_DIFFTEST_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let configs = write_configs(tmp.path());
    let mut tally = Tally::default();
    for seed in seeds() {
        run_seed(&client, tmp.path(), &configs, seed, pods, &mut tally).await;
    }
    // The classes are cluster-wide and named like the DRA tests' own.
    dra::clean(&client).await;
    print_summary(&tally);
    assert!(
        tally.failures.is_empty(),
        "{} of {} pods differ:\n{}",
        tally.failures.len(),
        tally.pods,
        tally.failures.join("\n\n")
    );
    // The generator must keep producing both outcomes, and pods whose
    // devices were compared.
    assert!(tally.scheduled > 0 && tally.unschedulable > 0);
    assert!(
        tally.allocations_with_devices > 0,
        "no pod was given a device by both schedulers"
    );
}

/// (kube-scheduler's configuration, wasmsched's configuration).
fn write_configs(dir: &Path) -> (PathBuf, PathBuf) {
    let kube = dir.join("kube-scheduler.yaml");
    std::fs::write(
        &kube,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {}}}\nleaderElection: {{leaderElect: false}}\n\
             profiles:\n- schedulerName: {SCHEDULER}\n",
            env().kubeconfig.display()
        ),
    )
    .unwrap();
    // kube-scheduler's default Score weights; the built-in wasm plugins
    // off.
    let enabled: Vec<Value> = WEIGHTS
        .iter()
        .map(|(name, weight)| json!({"name": name, "weight": weight}))
        .collect();
    let ws = dir.join("wasmsched.json");
    let cfg = json!({
        "apiVersion": "wasmsched.io/v1alpha1",
        "kind": "WasmSchedulerConfiguration",
        "parallelism": 1,
        "profiles": [{
            "schedulerName": SCHEDULER,
            "plugins": {
                "multiPoint": {"disabled": [{"name": "GpuTopology"}, {"name": "NetworkLocality"}]},
                "score": {"enabled": enabled}
            }
        }]
    });
    std::fs::write(&ws, cfg.to_string()).unwrap();
    (kube, ws)
}

async fn run_seed(
    client: &Client,
    tmp: &Path,
    (kube_cfg, ws_cfg): &(PathBuf, PathBuf),
    seed: u64,
    pods: usize,
    tally: &mut Tally,
) {
    reset(client, &NAMESPACES).await;
    dra::clean(client).await;
    label_namespaces(client).await;
    let workloads = create_workloads(client).await;
    // 6 to 16 nodes.
    let nodes = 6 + (seed as usize * 7) % 11;
    let cluster = generate::cluster(seed, nodes, pods);
    let node_api: Api<Node> = Api::all(client.clone());
    for n in &cluster.nodes {
        let node: Node = serde_json::from_value(n.clone()).unwrap();
        node_api
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        if let Some(f) = n["status"].get("declaredFeatures") {
            // As a kubelet declares them: through the status subresource.
            let patch = json!({"status": {"declaredFeatures": f}});
            let name = n["metadata"]["name"].as_str().unwrap();
            node_api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("node {name}: writing declaredFeatures: {e}"));
        }
    }
    for o in &cluster.devices {
        dra::create(client, o).await;
    }
    for p in &cluster.bound {
        create(client, p).await;
        if let Some(status) = p.get("status") {
            write_status(client, p, status).await;
        }
    }
    // Started on the complete cluster: its informers sync nodes and pods
    // before it schedules.
    let log = tmp.join(format!("kube-scheduler-seed{seed}.log"));
    let verbosity = std::env::var("WASMSCHED_DIFFTEST_KUBE_V")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let _kube = Killed(kube_scheduler(kube_cfg, &log, verbosity));
    for (pod, claims) in cluster.pending.iter().zip(&cluster.claims) {
        for c in claims {
            dra::create(client, c).await;
        }
        let (nodes, bound, namespaces) = state(client).await;
        let devices = dra::state(client).await;
        let created = create(client, pod).await;
        let ns = created["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .to_string();
        let name = created["metadata"]["name"].as_str().unwrap().to_string();
        let kube = kube_outcome(client, &created, &log).await;
        let dump = tmp.join(format!("seed{seed}-{ns}-{name}.json"));
        let items: Vec<&Value> = namespaces
            .iter()
            .chain(&workloads)
            .chain(&nodes)
            .chain(&devices)
            .chain(&bound)
            .chain([&created])
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(&dump, list.to_string()).unwrap();
        let ws = simulate(&dump, ws_cfg, &format!("{ns}/{name}"));
        let kube_devices = match &kube {
            KubeOutcome::Bound(_) => {
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                let now = plain(&api.get(&name).await.unwrap());
                dra::kube_devices(client, &ns, &now).await
            }
            KubeOutcome::Unschedulable(_) => BTreeMap::new(),
        };
        let uses_dra = count_dra(&created, tally);
        if uses_dra && matches!(kube, KubeOutcome::Unschedulable(_)) {
            tally.dra_unschedulable += 1;
        }
        let result = compare(&kube, &ws, tally)
            .and_then(|()| compare_devices(&kube, &ws, &created, &kube_devices, tally));
        match result {
            Ok(()) => std::fs::remove_file(&dump).unwrap(),
            Err(e) => tally.failures.push(format!(
                "seed {seed}, pod {ns}/{name}: {e}\npod: {}\nreproduce: {}",
                spec_of(&created),
                keep(&[&dump, ws_cfg, &log], &format!("{ns}/{name}"))
            )),
        }
        if let KubeOutcome::Unschedulable(_) = kube {
            delete(client, &ns, &name).await;
        }
    }
}

fn spec_of(pod: &Value) -> String {
    let mut spec = pod["spec"].clone();
    if let Some(o) = spec.as_object_mut() {
        o.retain(|k, _| {
            [
                "containers",
                "initContainers",
                "nodeSelector",
                "affinity",
                "tolerations",
                "topologySpreadConstraints",
                "resources",
                "resourceClaims",
            ]
            .contains(&k.as_str())
        });
    }
    json!({"labels": pod["metadata"]["labels"], "spec": spec}).to_string()
}

/// The API server's copy of an object, without `managedFields`.
fn plain<T: serde::Serialize>(o: &T) -> Value {
    let mut v = serde_json::to_value(o).unwrap();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    v
}

async fn create(client: &Client, p: &Value) -> Value {
    let ns = p["metadata"]["namespace"].as_str().unwrap();
    let mut p = p.clone();
    // A status is written afterwards ([`write_status`]).
    p.as_object_mut().unwrap().remove("status");
    let pod: Pod = serde_json::from_value(p).unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    plain(&api.create(&PostParams::default(), &pod).await.unwrap())
}

/// Writes a bound pod's resize state through its status subresource, as
/// its kubelet would.
async fn write_status(client: &Client, p: &Value, status: &Value) {
    let ns = p["metadata"]["namespace"].as_str().unwrap();
    let name = p["metadata"]["name"].as_str().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let patch = json!({"status": status});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("pod {ns}/{name}: writing its resize state {status}: {e}"));
}

async fn delete(client: &Client, ns: &str, name: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = api.delete(name, &now).await;
    wait_until("the pod's deletion", Duration::from_secs(30), || async {
        api.get_opt(name).await.is_ok_and(|p| p.is_none())
    })
    .await;
}

/// Creates [`generate::workloads`] (kept from an earlier seed when they
/// exist: they are the same) and returns the server's copies.
async fn create_workloads(client: &Client) -> Vec<Value> {
    let mut out = Vec::new();
    for obj in generate::workloads() {
        let api_version = obj["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap());
        let ar = ApiResource::from_gvk(&gvk);
        let ns = obj["metadata"]["namespace"].as_str().unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        let name = obj["metadata"]["name"].as_str().unwrap();
        let stored = match api.create(&PostParams::default(), &o).await {
            Ok(created) => created,
            Err(kube::Error::Api(e)) if e.code == 409 => api.get(name).await.unwrap(),
            Err(e) => panic!("creating {}: {e}", obj["metadata"]),
        };
        let mut v = plain(&stored);
        v["apiVersion"] = obj["apiVersion"].clone();
        v["kind"] = obj["kind"].clone();
        out.push(v);
    }
    out
}

/// Gives each test namespace its label ([`generate::NAMESPACE_LABELS`]),
/// for the generated `namespaceSelector`s.
async fn label_namespaces(client: &Client) {
    let api: Api<Namespace> = Api::all(client.clone());
    for (ns, (k, v)) in NAMESPACES.iter().zip(generate::NAMESPACE_LABELS) {
        let patch = json!({"metadata": {"labels": {k: v}}});
        api.patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
}

/// Every node, every pod bound to one, and every namespace.
async fn state(client: &Client) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let lp = ListParams::default();
    let nodes = nodes
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(plain)
        .collect();
    let bound = pods
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .map(plain)
        .collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespaces = namespaces
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(plain)
        .collect();
    (nodes, bound, namespaces)
}

/// Waits for kube-scheduler's first verdict on the pod: its
/// FailedScheduling event, or its binding.
async fn kube_outcome(client: &Client, pod: &Value, log: &Path) -> KubeOutcome {
    let ns = pod["metadata"]["namespace"].as_str().unwrap();
    let name = pod["metadata"]["name"].as_str().unwrap();
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let failed =
        ListParams::default().fields(&format!("involvedObject.uid={uid},reason=FailedScheduling"));
    let start = Instant::now();
    loop {
        if let Ok(l) = events.list(&failed).await {
            if let Some(e) = l.items.into_iter().next() {
                return KubeOutcome::Unschedulable(e.message.unwrap_or_default());
            }
        }
        if let Ok(p) = pods.get(name).await {
            if let Some(node) = p.spec.and_then(|s| s.node_name) {
                return KubeOutcome::Bound(node);
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "kube-scheduler gave no verdict on {ns}/{name}; its log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `wasmsched simulate --explain` on a dump of the cluster and the pod.
fn simulate(dump: &Path, cfg: &Path, key: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("simulate")
        .arg(dump)
        .args(["--explain", key, "--output", "json", "--config"])
        .arg(cfg)
        .env_remove("WASMSCHED_LOG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wasmsched simulate failed on {key}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Copies a differing pod's dump, wasmsched's configuration and
/// kube-scheduler's log out of the test's temporary directory; returns the
/// command that shows wasmsched's side.
fn keep(files: &[&Path; 3], key: &str) -> String {
    let dir = std::env::temp_dir().join("wasmsched-difftest");
    std::fs::create_dir_all(&dir).unwrap();
    let kept: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            let to = dir.join(f.file_name().unwrap());
            std::fs::copy(f, &to).unwrap();
            to
        })
        .collect();
    format!(
        "wasmsched simulate {} --explain {key} --config {} (kube-scheduler's log: {})",
        kept[0].display(),
        kept[1].display(),
        kept[2].display()
    )
}

fn compare(kube: &KubeOutcome, ws: &Value, tally: &mut Tally) -> Result<(), String> {
    tally.pods += 1;
    let ws_node = ws["explain"]["node"].as_str();
    let ws_message = ws["unschedulable"][0]["message"].as_str();
    match (kube, ws_node, ws_message) {
        (KubeOutcome::Bound(node), Some(_), _) => {
            tally.scheduled += 1;
            compare_nodes(node, &ws["explain"], tally)
        }
        (KubeOutcome::Unschedulable(msg), None, Some(ws_msg)) => {
            tally.unschedulable += 1;
            if msg != ws_msg {
                return Err(format!(
                    "FitError messages differ\n  kube-scheduler: {msg}\n  wasmsched:      {ws_msg}"
                ));
            }
            tally.messages_identical += 1;
            Ok(())
        }
        (KubeOutcome::Bound(node), None, _) => Err(format!(
            "kube-scheduler bound it to {node}; wasmsched: {}\nwasmsched's filters on {node}: {}",
            ws_message.unwrap_or("no answer"),
            filters_on(&ws["explain"], node)
        )),
        (KubeOutcome::Unschedulable(msg), _, _) => Err(format!(
            "kube-scheduler: {msg}; wasmsched placed it on {}",
            ws_node.unwrap_or("?")
        )),
    }
}

/// Counts the pods that use DRA; returns whether this one does.
fn count_dra(pod: &Value, tally: &mut Tally) -> bool {
    let claims = pod["spec"]["resourceClaims"]
        .as_array()
        .is_some_and(|l| !l.is_empty());
    let extended = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["resources"]["requests"]
                .as_object()
                .is_some_and(|r| r.keys().any(|k| k.contains('/') && k != "nvidia.com/gpu"))
        });
    tally.with_claims += usize::from(claims);
    tally.with_extended += usize::from(extended);
    claims || extended
}

/// For a pod both bound to the same node: the devices of each of its
/// claims, wasmsched's (its `resource_claims` report) against
/// kube-scheduler's (the claims' status on the server).
fn compare_devices(
    kube: &KubeOutcome,
    ws: &Value,
    pod: &Value,
    kube_devices: &BTreeMap<String, Vec<String>>,
    tally: &mut Tally,
) -> Result<(), String> {
    let KubeOutcome::Bound(node) = kube else {
        return Ok(());
    };
    if ws["explain"]["node"].as_str() != Some(node.as_str()) {
        // A tie broken another way: the devices of another node.
        return Ok(());
    }
    let ours = dra::simulated_devices(ws, pod);
    if kube_devices.is_empty() && ours.is_empty() {
        return Ok(());
    }
    if ours != *kube_devices {
        return Err(format!(
            "on {node}, the claims' devices differ\n  kube-scheduler: {kube_devices:?}\n  wasmsched:      {ours:?}"
        ));
    }
    tally.allocations_compared += 1;
    if ours.values().any(|d| !d.is_empty()) {
        tally.allocations_with_devices += 1;
    }
    if ours.values().flatten().any(|d| d.contains('[')) {
        tally.allocations_shared += 1;
    }
    if ours.get("extended").is_some_and(|d| !d.is_empty()) {
        tally.allocations_extended += 1;
    }
    Ok(())
}

fn filters_on(explain: &Value, node: &str) -> String {
    explain["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["node"] == node)
        .map(|n| n["filters"].to_string())
        .unwrap_or_else(|| "no such node".into())
}

/// The feasible nodes of an `--explain` answer: name, each plugin's
/// normalized score, the weighted total.
fn feasible_scores(explain: &Value) -> Vec<(String, BTreeMap<String, i64>, i64)> {
    explain["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| !n["total"].is_null())
        .map(|n| {
            let scores = n["scores"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let plugin = s["plugin"].as_str().unwrap().to_string();
                    let v = s["normalized"]
                        .as_i64()
                        .unwrap_or_else(|| panic!("no score from {plugin}: {s}"));
                    (plugin, v)
                })
                .collect();
            (
                n["node"].as_str().unwrap().to_string(),
                scores,
                n["total"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// kube-scheduler's node must be one of wasmsched's best (ties are broken
/// at random on both sides).
fn compare_nodes(kube: &str, explain: &Value, tally: &mut Tally) -> Result<(), String> {
    let feasible = feasible_scores(explain);
    if !feasible.iter().any(|(n, _, _)| n == kube) {
        return Err(format!(
            "kube-scheduler bound it to {kube}, which wasmsched filters out: {}",
            filters_on(explain, kube)
        ));
    }
    let weighted: Vec<i64> = feasible
        .iter()
        .map(|(_, s, _)| {
            WEIGHTS
                .iter()
                // A plugin that said Skip (ImageLocality when no node
                // holds the pod's images) has no score: it counts 0.
                .map(|(p, w)| w * s.get(*p).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let reported: Vec<i64> = feasible.iter().map(|(_, _, t)| *t).collect();
    assert_eq!(weighted, reported, "wasmsched's totals use other weights");
    let max = reported.iter().copied().max().unwrap_or(0);
    let best: BTreeSet<&str> = feasible
        .iter()
        .filter(|(_, _, t)| *t == max)
        .map(|(n, _, _)| n.as_str())
        .collect();
    if !best.contains(kube) {
        let table: Vec<String> = feasible
            .iter()
            .map(|(n, s, t)| {
                let s: Vec<String> = s.iter().map(|(p, v)| format!("{p}={v}")).collect();
                format!("  {n}: total {t}: {}", s.join(" "))
            })
            .collect();
        return Err(format!(
            "kube-scheduler bound it to {kube}, not one of wasmsched's best {best:?}\n{}",
            table.join("\n")
        ));
    }
    tally.nodes_among_best += 1;
    Ok(())
}

fn print_summary(t: &Tally) {
    println!(
        "differential test: {} pods compared ({} scheduled, {} unschedulable by kube-scheduler {})",
        t.pods,
        t.scheduled,
        t.unschedulable,
        std::env::var("WASMSCHED_TEST_KUBE_VERSION").unwrap_or_default()
    );
    println!(
        "  node choices among wasmsched's best: {}; FitError messages identical: {}; differences: {}",
        t.nodes_among_best,
        t.messages_identical,
        t.failures.len()
    );
    println!(
        "  DRA: {} pods with claims, {} asking for extended resources, {} of them unschedulable; \
         allocations identical on the same node: {} ({} with devices, {} with a device's share, {} extended resource claims)",
        t.with_claims,
        t.with_extended,
        t.dra_unschedulable,
        t.allocations_compared,
        t.allocations_with_devices,
        t.allocations_shared,
        t.allocations_extended
    );
}
