//! In-place resize accounting and NodeDeclaredFeatures against
//! kube-scheduler (1.37) on the same API server, with `wasmsched run`
//! watching the cluster: each scheduler in turn gets the same cluster and
//! the same steps, and what it did is read back from the API (each pod's
//! node or its FailedScheduling message). Both must agree exactly.
//!
//! (a) A bound pod whose spec was resized down (1 cpu) while its status
//! still shows the kubelet's 3 cpu (allocated and actuated): its node is
//! fuller than the spec says, and a 2-cpu pod does not fit on it. Once the
//! status shows the downsize actuated (a pod status update the scheduler
//! must see), the pod fits and is bound.
//!
//! (b) A pod needing a declared feature (a container restart rule that
//! restarts all containers) fits only the node that declares it; with a
//! node selector that names another node it is unschedulable, until that
//! node declares the feature too (a node status update).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::env::*;

const NS: &str = "resize";
const SCHED: &str = "resize-scheduler";
const FEATURE: &str = "RestartAllContainersOnContainerExits";

/// What a scheduler did with a pod.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Bound(String),
    Failed(String),
}

fn node(name: &str, cpu: &str) -> Value {
    let alloc = json!({"cpu": cpu, "memory": "8Gi", "pods": "110"});
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
           "labels": {"kubernetes.io/hostname": name}},
           "status": {"allocatable": alloc, "capacity": alloc}})
}

fn pod(name: &str, cpu: &str, node: Option<&str>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": SCHED, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry.invalid/x",
                                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

/// A pod that needs [`FEATURE`].
fn needing_feature(name: &str) -> Value {
    let mut p = pod(name, "100m", None);
    let c = &mut p["spec"]["containers"][0];
    c["restartPolicy"] = json!("Never");
    c["restartPolicyRules"] = json!([{"action": "RestartAllContainers",
        "exitCodes": {"operator": "In", "values": [42]}}]);
    p
}

async fn create_node(client: &Client, n: &Value) {
    let api: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(n.clone()).unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
}

async fn declare(client: &Client, node: &str, features: &[&str]) {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": {"declaredFeatures": features}});
    api.patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The kubelet's view of pod `name`'s container: `allocated` and
/// actuated cpu.
async fn resize_status(client: &Client, name: &str, cpu: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let patch = json!({"status": {"containerStatuses": [{
        "name": "c", "image": "registry.invalid/x", "imageID": "", "ready": true,
        "restartCount": 0, "allocatedResources": {"cpu": cpu, "memory": "64Mi"},
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits for the pod's first verdict (its binding, or a FailedScheduling
/// event newer than `after`, the count of earlier ones).
async fn verdict(client: &Client, name: &str, after: usize, log: &dyn Fn() -> String) -> Verdict {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let start = Instant::now();
    loop {
        let p = pods.get(name).await.unwrap();
        if let Some(n) = p.spec.and_then(|s| s.node_name) {
            return Verdict::Bound(n);
        }
        let events = events_for(client, NS, name, "FailedScheduling").await;
        if events.len() > after {
            let mut events = events;
            events.sort_by_key(|e| e.metadata.creation_timestamp.clone());
            let last = events.last().unwrap();
            return Verdict::Failed(last.message.clone().unwrap_or_default());
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{name}: no verdict; log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn failed_count(client: &Client, name: &str) -> usize {
    events_for(client, NS, name, "FailedScheduling").await.len()
}

/// Runs the steps with one scheduler started (wasmsched's `run` when
/// `wasm`), returning each step's verdict.
async fn steps(client: &Client, wasm: bool, dir: &std::path::Path) -> Vec<(String, Verdict)> {
    reset(client, &[NS]).await;
    for n in [node("rs-a", "4"), node("nf-1", "4"), node("nf-2", "4")] {
        create_node(client, &n).await;
    }
    declare(client, "nf-1", &[FEATURE]).await;
    // The holder on rs-a: spec 1 cpu, the kubelet still at 3.
    crate::create_pod(client, pod("holder", "1", Some("rs-a"))).await;
    resize_status(client, "holder", "3").await;

    let (_kube, _ws, log_file);
    if wasm {
        let cfg = dir.join("wasmsched.json");
        let file = json!({"apiVersion": "wasmsched.io/v1alpha1", "kind": "WasmSchedulerConfiguration",
            "leaderElection": {"leaderElect": false},
            "profiles": [{"schedulerName": SCHED, "plugins": {"multiPoint": {"disabled": [
                {"name": "GpuTopology"}, {"name": "NetworkLocality"}]}}}]});
        std::fs::write(&cfg, file.to_string()).unwrap();
        let ws = Scheduler::start(
            dir,
            "ws-resize",
            &env().kubeconfig,
            &["--config", cfg.to_str().unwrap()],
        );
        ws.wait_ready().await;
        log_file = ws.log.clone();
        _ws = Some(ws);
        _kube = None;
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
        log_file = dir.join("kube-scheduler-resize.log");
        _kube = Some(Killed(kube_scheduler(&cfg, &log_file, 2)));
        _ws = None;
    }
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let mut out = Vec::new();

    // (a) 2 cpu, on rs-a only (nf-1 and nf-2 are selected away).
    let mut big = pod("big", "2", None);
    big["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "rs-a"});
    crate::create_pod(client, big).await;
    out.push(("big".into(), verdict(client, "big", 0, &log).await));
    // The downsize actuated: the holder takes 1 cpu, and big fits.
    let before = failed_count(client, "big").await;
    resize_status(client, "holder", "1").await;
    out.push((
        "big after the downsize".into(),
        verdict(client, "big", before, &log).await,
    ));

    // (b) Needs the feature: nf-1 only.
    crate::create_pod(client, needing_feature("restarts")).await;
    out.push((
        "restarts".into(),
        verdict(client, "restarts", 0, &log).await,
    ));
    // The same, held to nf-2, which does not declare it; then it does.
    let mut held = needing_feature("held");
    held["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "nf-2"});
    crate::create_pod(client, held).await;
    out.push(("held".into(), verdict(client, "held", 0, &log).await));
    let before = failed_count(client, "held").await;
    declare(client, "nf-2", &["ExampleFutureFeature", FEATURE]).await;
    out.push((
        "held after nf-2 declares it".into(),
        verdict(client, "held", before, &log).await,
    ));
    out
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_state_and_declared_features_match_kube_scheduler() {
    let _g = serial();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let kube = steps(&client, false, tmp.path()).await;
    let ours = steps(&client, true, tmp.path()).await;
    eprintln!("kube-scheduler: {kube:#?}");
    // What the steps are for, on kube-scheduler's side.
    assert!(
        matches!(&kube[0].1, Verdict::Failed(m) if m.contains("1 Insufficient cpu")),
        "{kube:?}"
    );
    assert_eq!(kube[1].1, Verdict::Bound("rs-a".into()));
    assert_eq!(kube[2].1, Verdict::Bound("nf-1".into()));
    assert!(
        matches!(&kube[3].1, Verdict::Failed(m) if m.contains("1 node(s) didn't match Pod's required features")),
        "{kube:?}"
    );
    assert_eq!(kube[4].1, Verdict::Bound("nf-2".into()));
    assert_eq!(
        kube, ours,
        "kube-scheduler (left) and wasmsched (right) differ"
    );
    reset(&client, &[NS]).await;
}
