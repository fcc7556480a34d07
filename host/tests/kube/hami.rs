//! Fractional GPUs against the real API server, with a test double of
//! HAMi's device plugin: nodes annotated as HAMi's device plugin registers
//! them; fractional pods bound with the annotations HAMi's `Allocate`
//! reads; the double finds each pod through the node lock, pops its slots,
//! sets `bind-phase=success` and releases the lock, keeping its own ledger
//! of every device so an over-commit or an overwritten lock is caught
//! where HAMi would hit it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use wasmsched_shared::hami::{
    decode_pod_devices, encode_pod_devices, pod_usage, NodeUsage, ALLOCATED, ASSIGNED_NODE,
    ASSIGNED_TIME, BIND_PHASE, BIND_TIME, LOCK_ANNOTATION, REGISTER_ANNOTATION, TO_ALLOCATE,
};

use crate::env::*;

const NS: &str = "gpu";
const GIB: u64 = 1024;

/// `count` GPUs of `mem` MiB on node `name`, as HAMi registers them (JSON
/// form, or the colon form of HAMi 2.5-2.7 when `legacy`).
fn register(name: &str, count: usize, mem: u64, legacy: bool) -> String {
    let id = |g: usize| format!("GPU-{name}-{g}");
    if legacy {
        return (0..count)
            .map(|g| format!("{},10,{mem},100,NVIDIA-A100,0,true,{g},hami-core:", id(g)))
            .collect();
    }
    let list: Vec<Value> = (0..count)
        .map(|g| {
            json!({"id": id(g), "index": g, "count": 10, "devmem": mem, "devcore": 100,
                   "type": "NVIDIA-A100", "numa": 0, "mode": "hami-core", "health": true})
        })
        .collect();
    Value::Array(list).to_string()
}

/// Creates a GPU node, then registers its devices with a node patch, as
/// HAMi's device plugin does once it runs.
async fn hami_node(client: &Client, name: &str, gpus: usize, mem: u64, legacy: bool) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110",
                                   "nvidia.com/gpu": (gpus * 10).to_string()}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let patch = json!({"metadata": {"annotations": {
        REGISTER_ANNOTATION: register(name, gpus, mem, legacy),
        "hami.io/node-handshake": "Reported_2026-01-01 00:00:00",
    }}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A pod of `containers` (name, limits), an init container first when
/// given; pinned to `node` when given.
fn gpu_pod(
    name: &str,
    containers: &[(&str, Value)],
    init: Option<(&str, Value)>,
    node: Option<&str>,
) -> Value {
    let c = |(n, limits): &(&str, Value)| {
        json!({"name": n, "image": "infer",
               "resources": {"requests": {"cpu": "100m"}, "limits": limits}})
    };
    let mut spec = json!({
        "schedulerName": "hami-scheduler",
        "containers": containers.iter().map(c).collect::<Vec<_>>(),
    });
    if let Some(i) = init {
        spec["initContainers"] = json!([c(&i)]);
    }
    if let Some(n) = node {
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": n});
    }
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

fn fraction(mem: u64, cores: u32) -> Value {
    json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem.to_string(),
           "nvidia.com/gpucores": cores.to_string()})
}

fn write_config(dir: &Path, lock_expiry: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "leaderElection:\n  leaderElect: false\n\
             clientConnection:\n  qps: 200\n  burst: 200\n\
             bindConcurrency: 2\n\
             profiles:\n- schedulerName: hami-scheduler\n  plugins:\n    score:\n      disabled:\n\
             \x20     - {{name: NodeResourcesFit}}\n      - {{name: NodeResourcesBalancedAllocation}}\n\
             \x20 pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      ignoredResources: \
             [nvidia.com/gpumem, nvidia.com/gpumem-percentage, nvidia.com/gpucores, nvidia.com/priority]\n\
             \x20 - name: HAMiNodeLock\n    args: {{lockExpiry: {lock_expiry}}}\n"
        ),
    )
    .unwrap();
    path
}

async fn start(dir: &Path, name: &str, lock_expiry: &str) -> Scheduler {
    let config = write_config(dir, lock_expiry);
    let sched = Scheduler::start(
        dir,
        name,
        &env().kubeconfig,
        &["--config", config.to_str().unwrap()],
    );
    wait_until("/readyz", Duration::from_secs(60), || async {
        sched.get("/readyz").await.is_some_and(|(s, _)| s == 200)
    })
    .await;
    sched
}

// ---- the device plugin's test double ------------------------------------

/// What the double saw and did.
#[derive(Default)]
struct Ledger {
    /// Per device (UUID): memory, cores and vGPUs held by the pods it
    /// allocated.
    used: HashMap<String, (u64, u64, u32)>,
    /// Pods it completed (`ns/name` -> node).
    done: BTreeMap<String, String>,
    /// When it first saw a pod hold a node's lock, and when it released it.
    locked: HashMap<String, Instant>,
    released: HashMap<String, Instant>,
    /// Protocol breaches: an over-commit, a lock taken from a pod still
    /// allocating, a slot whose device count is not the container's.
    violations: Vec<String>,
}

struct DevicePlugin {
    ledger: Arc<Mutex<Ledger>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DevicePlugin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl DevicePlugin {
    /// Serves `nodes`, looking at each every 50 ms.
    fn start(client: Client, nodes: Vec<String>) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let l = ledger.clone();
        let task = tokio::spawn(async move {
            let mut holders: HashMap<String, String> = HashMap::new();
            loop {
                for n in &nodes {
                    serve_node(&client, n, &l, &mut holders).await;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { ledger, task }
    }

    fn violations(&self) -> Vec<String> {
        self.ledger.lock().unwrap().violations.clone()
    }

    fn done(&self) -> BTreeMap<String, String> {
        self.ledger.lock().unwrap().done.clone()
    }

    /// Pods whose lock it released (it completes a pod, then releases).
    fn released(&self) -> usize {
        self.ledger.lock().unwrap().released.len()
    }
}

fn annotation(o: &ObjectMeta, key: &str) -> Option<String> {
    o.annotations.as_ref().and_then(|a| a.get(key)).cloned()
}

fn breach(ledger: &Arc<Mutex<Ledger>>, what: String) {
    ledger.lock().unwrap().violations.push(what);
}

/// One look at a node: a lock held by a bound pod still allocating gets
/// that pod's devices allocated, then the lock released.
async fn serve_node(
    client: &Client,
    node: &str,
    ledger: &Arc<Mutex<Ledger>>,
    holders: &mut HashMap<String, String>,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let Ok(n) = nodes.get(node).await else { return };
    let Some(lock) = annotation(&n.metadata, LOCK_ANNOTATION) else {
        return;
    };
    let parts: Vec<&str> = lock.split(',').collect();
    let [_, ns, name] = parts[..] else {
        return breach(ledger, format!("lock {lock:?} on {node}"));
    };
    let key = format!("{ns}/{name}");
    if let Some(prev) = holders.insert(node.to_string(), key.clone()) {
        let finished = ledger.lock().unwrap().done.contains_key(&prev);
        if prev != key
            && !finished
            && pod_phase(client, &prev).await.as_deref() == Some("allocating")
        {
            breach(
                ledger,
                format!("lock of {prev} (allocating) taken by {key} on {node}"),
            );
        }
    }
    ledger
        .lock()
        .unwrap()
        .locked
        .entry(key.clone())
        .or_insert_with(Instant::now);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Ok(pod) = pods.get(name).await else {
        return;
    };
    let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
    let allocating = annotation(&pod.metadata, BIND_PHASE).as_deref() == Some("allocating");
    if !bound || !allocating || ledger.lock().unwrap().done.contains_key(&key) {
        return;
    }
    allocate(client, &n, &pod, ledger).await;
    release(client, node, &lock).await;
    ledger.lock().unwrap().released.insert(key, Instant::now());
}

async fn pod_phase(client: &Client, key: &str) -> Option<String> {
    let (ns, name) = key.split_once('/')?;
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    annotation(&api.get(name).await.ok()?.metadata, BIND_PHASE)
}

/// The containers' `nvidia.com/gpu` limits, init containers first, and
/// the number of init containers.
fn gpu_counts(pod: &Pod) -> (Vec<u32>, usize) {
    let spec = pod.spec.as_ref().unwrap();
    let count = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("nvidia.com/gpu"))
            .map_or(0, |q| q.0.parse().unwrap_or(0))
    };
    let init = spec.init_containers.clone().unwrap_or_default();
    let counts = init.iter().chain(&spec.containers).map(count).collect();
    (counts, init.len())
}

/// `Allocate`, container by container: pops the first non-empty slot of
/// `to-allocate`, checks it against the container, writes the slots back
/// with it emptied; books the pod's devices in the ledger (which must
/// never exceed a device); then `bind-phase=success`.
async fn allocate(client: &Client, node: &Node, pod: &Pod, ledger: &Arc<Mutex<Ledger>>) {
    let ns = pod.metadata.namespace.clone().unwrap();
    let name = pod.metadata.name.clone().unwrap();
    let key = format!("{ns}/{name}");
    let node_name = node.metadata.name.clone().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    if annotation(&pod.metadata, ASSIGNED_NODE).as_deref() != Some(node_name.as_str()) {
        breach(
            ledger,
            format!("{key}: hami.io/vgpu-node is not the pod's node"),
        );
    }
    let (counts, num_init) = gpu_counts(pod);
    let to_allocate = annotation(&pod.metadata, TO_ALLOCATE).unwrap_or_default();
    let mut slots = decode_pod_devices(&to_allocate, TO_ALLOCATE).unwrap_or_default();
    while let Some(i) = slots.iter().position(|s| !s.is_empty()) {
        if counts.get(i).copied() != Some(slots[i].len() as u32) {
            let what = format!(
                "{key}: slot {i} has {} devices, the container asks for {:?}",
                slots[i].len(),
                counts.get(i)
            );
            breach(ledger, what);
        }
        slots[i].clear();
        let written = encode_pod_devices(&slots[..slots.len() - 1]);
        let patch = json!({"metadata": {"annotations": {TO_ALLOCATE: written}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let allocated = annotation(&pod.metadata, ALLOCATED).unwrap_or_default();
    let uses = pod_usage(&allocated, num_init).unwrap();
    let register = annotation(&node.metadata, REGISTER_ANNOTATION).unwrap();
    let devices = NodeUsage::from_annotations(&register, None).unwrap();
    {
        let mut l = ledger.lock().unwrap();
        for (uuid, u) in &uses {
            let Some(d) = devices.devices.iter().find(|d| &d.device.id == uuid) else {
                l.violations
                    .push(format!("{key}: device {uuid} is not on {node_name}"));
                continue;
            };
            let e = l.used.entry(uuid.clone()).or_default();
            *e = (e.0 + u.mem, e.1 + u.cores, e.2 + u.count);
            let over =
                e.0 > d.device.devmem || e.1 > u64::from(d.device.devcore) || e.2 > d.device.count;
            if over {
                let msg = format!("{key}: over-commits {uuid}: {:?}", *e);
                l.violations.push(msg);
            }
        }
        l.done.insert(key.clone(), node_name.clone());
    }
    let patch = json!({"metadata": {"annotations": {BIND_PHASE: "success"}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Releases the lock if it still holds `value` (guarded, as HAMi does).
async fn release(client: &Client, node: &str, value: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let Ok(n) = nodes.get(node).await else { return };
    if annotation(&n.metadata, LOCK_ANNOTATION).as_deref() != Some(value) {
        return;
    }
    let patch = json!({"metadata": {"annotations": {LOCK_ANNOTATION: null},
                                    "resourceVersion": n.metadata.resource_version}});
    let _ = nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}

// ---- helpers -------------------------------------------------------------

async fn pod(client: &Client, name: &str) -> Pod {
    Api::<Pod>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap()
}

async fn node_lock(client: &Client, node: &str) -> Option<String> {
    let n = Api::<Node>::all(client.clone()).get(node).await.unwrap();
    annotation(&n.metadata, LOCK_ANNOTATION)
}

async fn set_lock(client: &Client, node: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {LOCK_ANNOTATION: value}}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Now plus `offset` seconds, as HAMi writes lock times.
fn rfc3339(offset: i64) -> String {
    let t =
        k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(offset);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

// ---- tests ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fractional_stream_is_bound_as_hami_allocates_it() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let names = ["gpu-a", "gpu-b", "gpu-c"];
    for (i, n) in names.iter().enumerate() {
        hami_node(&client, n, 4, 16 * GIB, i == 2).await;
    }
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(tmp.path(), "hami", "5m").await;
    let plugin = DevicePlugin::start(
        client.clone(),
        names.iter().map(|s| s.to_string()).collect(),
    );
    let mut expected: BTreeMap<String, (u64, u32)> = BTreeMap::new();
    for i in 0..24u64 {
        let (mem, cores) = (2048 + 1024 * (i % 3), 10 + 5 * (i % 4) as u32);
        let name = format!("infer-{i:02}");
        expected.insert(name.clone(), (mem, cores));
        crate::create_pod(
            &client,
            gpu_pod(&name, &[("main", fraction(mem, cores))], None, None),
        )
        .await;
    }
    // An init container warming a GPU up, then the app next to a sidecar.
    let warm = gpu_pod(
        "warm",
        &[("main", fraction(4096, 20)), ("proxy", json!({}))],
        Some(("warmup", fraction(2048, 10))),
        None,
    );
    crate::create_pod(&client, warm).await;
    // Two vGPUs, on two GPUs.
    let two =
        json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "20"});
    crate::create_pod(&client, gpu_pod("pair", &[("main", two)], None, None)).await;
    wait_until(
        "the double to complete all 26 pods",
        Duration::from_secs(180),
        || async { plugin.done().len() == 26 },
    )
    .await;
    assert_eq!(
        plugin.violations(),
        Vec::<String>::new(),
        "log:\n{}",
        sched.logs()
    );
    for (name, (mem, cores)) in &expected {
        let p = pod(&client, name).await;
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        let a = |k: &str| annotation(&p.metadata, k).unwrap_or_default();
        assert_eq!(a(ASSIGNED_NODE), node);
        assert_eq!(p.metadata.labels.as_ref().unwrap()[ASSIGNED_NODE], node);
        assert_eq!(a(BIND_PHASE), "success");
        assert!(
            a(BIND_TIME).parse::<u64>().is_ok(),
            "{name}: {}",
            a(BIND_TIME)
        );
        assert!(
            a(ASSIGNED_TIME).parse::<u64>().is_ok(),
            "{name}: {}",
            a(ASSIGNED_TIME)
        );
        let slots = decode_pod_devices(&a(ALLOCATED), ALLOCATED).unwrap();
        assert_eq!(
            slots.len(),
            2,
            "{name}: one container, then the trailing slot"
        );
        assert_eq!(
            (slots[0].len(), slots[0][0].mem, slots[0][0].cores),
            (1, *mem, *cores)
        );
        assert!(slots[0][0].uuid.starts_with(&format!("GPU-{node}-")));
        // The double popped every slot.
        assert_eq!(a(TO_ALLOCATE), ";");
    }
    let warm = pod(&client, "warm").await;
    let slots =
        decode_pod_devices(&annotation(&warm.metadata, ALLOCATED).unwrap(), ALLOCATED).unwrap();
    let shape: Vec<Vec<(u64, u32)>> = slots
        .iter()
        .map(|s| s.iter().map(|d| (d.mem, d.cores)).collect())
        .collect();
    assert_eq!(
        shape,
        vec![vec![(2048, 10)], vec![(4096, 20)], vec![], vec![]]
    );
    let pair = pod(&client, "pair").await;
    let slots =
        decode_pod_devices(&annotation(&pair.metadata, ALLOCATED).unwrap(), ALLOCATED).unwrap();
    assert_eq!(slots[0].len(), 2);
    assert_ne!(slots[0][0].uuid, slots[0][1].uuid);
    for n in names {
        assert_eq!(node_lock(&client, n).await, None, "{n} left locked");
    }
    // Per-device metrics: the memory held adds up to what the pods asked
    // (the warm pod holds the larger of its init and main containers).
    let total: u64 = expected.values().map(|(m, _)| m).sum::<u64>() + 4096 + 2 * 3000;
    let served = sched
        .metric("wasmsched_gpu_device_memory_allocated_mib", &[])
        .await;
    assert_eq!(served as u64, total);
    let registered = sched.metric("wasmsched_gpu_device_memory_mib", &[]).await;
    assert_eq!(registered as u64, 12 * 16 * GIB);
    assert!(sched.metric("wasmsched_gpus_untouched", &[]).await < 12.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_for_a_locked_node_wait_without_holding_up_other_nodes() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    hami_node(&client, "gpu-a", 4, 16 * GIB, false).await;
    hami_node(&client, "gpu-b", 4, 16 * GIB, false).await;
    // gpu-a is locked by another scheduler's pod, which exists.
    let holder = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "holder", "namespace": NS},
        "spec": {"schedulerName": "elsewhere", "containers": [{"name": "c", "image": "x"}]}});
    crate::create_pod(&client, holder).await;
    let foreign = format!("{},{NS},holder", rfc3339(0));
    set_lock(&client, "gpu-a", Some(&foreign)).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(tmp.path(), "hami-lock", "5m").await;
    let plugin = DevicePlugin::start(client.clone(), vec!["gpu-a".into(), "gpu-b".into()]);
    // More pods wait for gpu-a than the binder has slots (2)...
    for i in 0..4 {
        let p = gpu_pod(
            &format!("a-{i}"),
            &[("main", fraction(2048, 10))],
            None,
            Some("gpu-a"),
        );
        crate::create_pod(&client, p).await;
    }
    // ...and a pod for gpu-b still binds and completes.
    let b = gpu_pod("b-0", &[("main", fraction(2048, 10))], None, Some("gpu-b"));
    crate::create_pod(&client, b).await;
    wait_until("b-0 to complete", Duration::from_secs(60), || async {
        plugin.done().contains_key(&format!("{NS}/b-0"))
    })
    .await;
    for i in 0..4 {
        let p = pod(&client, &format!("a-{i}")).await;
        assert_eq!(
            p.spec.unwrap().node_name,
            None,
            "a-{i} bound while gpu-a is locked"
        );
    }
    assert_eq!(
        node_lock(&client, "gpu-a").await.as_deref(),
        Some(foreign.as_str())
    );
    // The holder releases it: the four pods bind one at a time, each after
    // the device plugin released the previous one's lock.
    set_lock(&client, "gpu-a", None).await;
    wait_until("a-* to complete", Duration::from_secs(120), || async {
        plugin.done().len() == 5 && plugin.released() == 5
    })
    .await;
    assert_eq!(
        plugin.violations(),
        Vec::<String>::new(),
        "log:\n{}",
        sched.logs()
    );
    let l = plugin.ledger.lock().unwrap();
    let mut spans: Vec<(Instant, Instant)> = (0..4)
        .map(|i| {
            let k = format!("{NS}/a-{i}");
            (l.locked[&k], l.released[&k])
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "two pods held gpu-a's lock at once: {spans:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_dangling_locks_are_taken_over() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    hami_node(&client, "gpu-a", 2, 16 * GIB, false).await;
    hami_node(&client, "gpu-b", 2, 16 * GIB, true).await;
    // gpu-a: a lock older than the expiry (10 s here); gpu-b: a fresh lock
    // whose pod does not exist.
    set_lock(
        &client,
        "gpu-a",
        Some(&format!("{},{NS},someone", rfc3339(-60))),
    )
    .await;
    set_lock(&client, "gpu-b", Some(&format!("{},{NS},gone", rfc3339(0)))).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(tmp.path(), "hami-expiry", "10s").await;
    let plugin = DevicePlugin::start(client.clone(), vec!["gpu-a".into(), "gpu-b".into()]);
    let x = gpu_pod("x", &[("main", fraction(2048, 10))], None, Some("gpu-a"));
    let y = gpu_pod("y", &[("main", fraction(2048, 10))], None, Some("gpu-b"));
    crate::create_pod(&client, x).await;
    crate::create_pod(&client, y).await;
    wait_until("both pods to complete", Duration::from_secs(60), || async {
        plugin.done().len() == 2
    })
    .await;
    assert_eq!(
        plugin.violations(),
        Vec::<String>::new(),
        "log:\n{}",
        sched.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_rebuilds_usage_and_never_overcommits() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    // Two GPUs of 8 GiB.
    hami_node(&client, "gpu-a", 2, 8 * GIB, false).await;
    let plugin = DevicePlugin::start(client.clone(), vec!["gpu-a".into()]);
    let tmp = tempfile::tempdir().unwrap();
    let mut first = start(tmp.path(), "before", "5m").await;
    for i in 0..3 {
        let p = gpu_pod(
            &format!("p-{i}"),
            &[("main", fraction(4096, 20))],
            None,
            None,
        );
        crate::create_pod(&client, p).await;
    }
    wait_until(
        "three pods to complete",
        Duration::from_secs(60),
        || async { plugin.done().len() == 3 },
    )
    .await;
    assert!(first.terminate().success());
    // A new scheduler knows only what the pods' annotations say: 4 GiB is
    // left, on one GPU.
    let second = start(tmp.path(), "after", "5m").await;
    for i in 3..6 {
        let p = gpu_pod(
            &format!("p-{i}"),
            &[("main", fraction(4096, 20))],
            None,
            None,
        );
        crate::create_pod(&client, p).await;
    }
    wait_until(
        "a fourth pod to complete",
        Duration::from_secs(60),
        || async { plugin.done().len() == 4 },
    )
    .await;
    wait_until(
        "the other two to be reported unschedulable",
        Duration::from_secs(60),
        || async {
            let mut n = 0;
            for i in 3..6 {
                let p = pod(&client, &format!("p-{i}")).await;
                let conditions = p.status.and_then(|s| s.conditions).unwrap_or_default();
                n += usize::from(conditions.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.message
                            .as_deref()
                            .unwrap_or("")
                            .contains("Insufficient GPU memory")
                }));
            }
            n == 2
        },
    )
    .await;
    assert_eq!(plugin.done().len(), 4);
    assert_eq!(
        plugin.violations(),
        Vec::<String>::new(),
        "log:\n{}",
        second.logs()
    );
    let used = plugin.ledger.lock().unwrap().used.clone();
    assert_eq!(used.values().map(|u| u.0).sum::<u64>(), 16 * GIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_runs_with_the_gpu_sharing_components_rbac() {
    use crate::deploy::{apply, kubectl, runnable_config_with, service_account_kubeconfig};
    let _g = serial();
    let client = client().await;
    reset(&client, &["wasmsched", NS]).await;
    let _ = kubectl(&["delete", "clusterrolebinding", "wasmsched-gpu-sharing"]);
    let _ = kubectl(&["delete", "lease", "wasmsched", "-n", "wasmsched"]);
    let tmp = tempfile::tempdir().unwrap();
    let deploy = repo().join("deploy");
    let component = deploy.join("components/gpu-sharing");
    apply(&[
        deploy.join("serviceaccount.yaml"),
        deploy.join("rbac.yaml"),
        component.join("rbac.yaml"),
    ]);
    let config = runnable_config_with(&["gpu-sharing"], tmp.path());
    let sa = service_account_kubeconfig(tmp.path());
    hami_node(&client, "gpu-a", 2, 16 * GIB, false).await;
    let plugin = DevicePlugin::start(client.clone(), vec!["gpu-a".into()]);
    let sched = Scheduler::start(
        tmp.path(),
        "rbac-hami",
        &sa,
        &["--config", config.to_str().unwrap()],
    );
    for i in 0..3 {
        let p = gpu_pod(
            &format!("r-{i}"),
            &[("main", fraction(2048, 10))],
            None,
            None,
        );
        crate::create_pod(&client, p).await;
    }
    wait_until(
        "three pods to complete",
        Duration::from_secs(90),
        || async { plugin.done().len() == 3 },
    )
    .await;
    assert_eq!(plugin.violations(), Vec::<String>::new());
    let logs = sched.logs();
    assert!(!logs.contains("forbidden"), "a call was refused:\n{logs}");
    // Without the component's binding the node lock is refused: the pod
    // is not bound.
    let (ok, out) = kubectl(&["delete", "clusterrolebinding", "wasmsched-gpu-sharing"]);
    assert!(ok, "{out}");
    let p = gpu_pod("refused", &[("main", fraction(2048, 10))], None, None);
    crate::create_pod(&client, p).await;
    wait_until(
        "the lock to be refused",
        Duration::from_secs(90),
        || async { sched.logs().contains("forbidden") },
    )
    .await;
    assert_eq!(pod(&client, "refused").await.spec.unwrap().node_name, None);
}
