//! Preemption against the real API server, compared with kube-scheduler
//! (the version scripts/test-servers builds, 1.37): for each scenario the same cluster (nodes, bound pods with
//! PriorityClasses and start times, PodDisruptionBudgets in
//! `policy/v1` with their status set, as the disruption controller
//! would) is built, one scheduler runs, a preemptor is created, and what
//! the scheduler did is read back from the API: the preemptor's
//! `status.nominatedNodeName` and the pods it evicted, or its
//! FailedScheduling message when it preempted nothing. Every scenario is
//! one where upstream's choice is deterministic (start times break the
//! ties upstream leaves to map order).
//!
//! What kube-scheduler does on this server (no kubelet): the victims are deleted
//! gracefully and stay terminating (`deletionTimestamp` set) until a
//! kubelet would remove them; the preemptor stays pending with its
//! nomination (it does not preempt again while its victims terminate) and
//! is bound to the nominated node once they are gone (here: force-deleted
//! by the test). wasmsched does the same.
//!
//! Then the failover: the leader dies after the victims were evicted and
//! before the preemptor is bound; the standby binds it to the nominated
//! node, and no node ends over capacity.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::Client;
use serde_json::{json, Value};

use crate::env::*;

const NS: &str = "preempt";
const SCHED: &str = "preempt-scheduler";

/// The PriorityClasses the scenarios use.
const CLASSES: [(&str, i32, bool); 5] = [
    ("p-low", 10, false),
    ("p-mid", 20, false),
    ("p-high", 1000, false),
    ("p-top", 2000, false),
    ("p-never", 1000, true),
];

/// A pod already on a node: (name, node, class, cpu, app label, started
/// this many seconds after the scenario's epoch).
type Placed = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    i64,
);

struct Scenario {
    name: &'static str,
    nodes: &'static [&'static str],
    placed: Vec<Placed>,
    /// (app label, disruptions allowed).
    budgets: Vec<(&'static str, i32)>,
    preemptor: Value,
}

/// What a scheduler did with the preemptor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Nominated {
        node: String,
        victims: BTreeSet<String>,
    },
    NotPreempted {
        message: String,
    },
}

fn preemptor(class: &str, cpu: &str, extra: Value) -> Value {
    let mut spec = json!({"schedulerName": SCHED, "priorityClassName": class,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"metadata": {"name": "preemptor", "namespace": NS}, "spec": spec})
}

fn scenarios() -> Vec<Scenario> {
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]}}});
    let pdb = |allowed| Scenario {
        name: if allowed == 0 {
            "pdb-allows-0"
        } else {
            "pdb-allows-1"
        },
        nodes: &["n1", "n2"],
        placed: vec![
            ("db-0", "n1", "p-low", "2", "db", 0),
            ("db-1", "n1", "p-low", "2", "db", 10),
            ("web", "n2", "p-mid", "4", "web", 0),
        ],
        budgets: vec![("db", allowed)],
        preemptor: preemptor("p-high", "2", json!({})),
    };
    vec![
        Scenario {
            name: "priorities-and-reprieve",
            nodes: &["n1", "n2", "n3"],
            placed: vec![
                ("a", "n1", "p-low", "2", "a", 0),
                ("b", "n1", "p-mid", "1", "b", 1),
                ("c", "n1", "p-mid", "1", "c", 2),
                ("d", "n2", "p-mid", "3", "d", 3),
                ("e", "n2", "p-top", "1", "e", 4),
                ("f", "n3", "p-top", "4", "f", 5),
            ],
            budgets: vec![],
            preemptor: preemptor("p-high", "2", json!({})),
        },
        Scenario {
            name: "latest-start-wins-a-tie",
            nodes: &["n1", "n2", "n3"],
            placed: vec![
                ("a", "n1", "p-low", "3", "a", 50),
                ("b", "n2", "p-low", "3", "b", 100),
                ("c", "n3", "p-low", "3", "c", 10),
            ],
            budgets: vec![],
            preemptor: preemptor("p-high", "2", json!({})),
        },
        pdb(0),
        pdb(1),
        Scenario {
            name: "anti-affinity-only-eviction-satisfies",
            nodes: &["n1", "n2"],
            placed: vec![
                ("x-low", "n1", "p-low", "1", "x", 0),
                ("other", "n1", "p-low", "1", "o", 5),
                ("x-top", "n2", "p-top", "1", "x", 0),
            ],
            budgets: vec![],
            preemptor: preemptor("p-high", "1", anti),
        },
        Scenario {
            name: "preemption-policy-never",
            nodes: &["n1"],
            placed: vec![("a", "n1", "p-low", "4", "a", 0)],
            budgets: vec![],
            preemptor: preemptor("p-never", "2", json!({})),
        },
        Scenario {
            name: "fits-nowhere-even-after-eviction",
            nodes: &["n1", "n2"],
            placed: vec![
                ("a", "n1", "p-low", "4", "a", 0),
                ("b", "n2", "p-low", "4", "b", 0),
            ],
            budgets: vec![],
            preemptor: preemptor("p-high", "8", json!({})),
        },
        // 1.37 sorts victims by importance after the reprieve: n1's
        // highest is x (p-high), n2's db-2 (p-mid), so n2 wins; 1.20's
        // order (budget-violating first) took db-1 (p-low) as n1's.
        Scenario {
            name: "highest-victim-after-the-reprieve",
            nodes: &["n1", "n2"],
            placed: vec![
                ("db-1", "n1", "p-low", "2", "db", 0),
                ("x", "n1", "p-high", "2", "x", 0),
                ("db-2", "n2", "p-mid", "2", "db", 0),
                ("y", "n2", "p-low", "2", "y", 0),
            ],
            budgets: vec![("db", 0)],
            preemptor: preemptor("p-top", "4", json!({})),
        },
    ]
}

fn pdb_resource() -> ApiResource {
    ApiResource {
        group: "policy".into(),
        version: "v1".into(),
        api_version: "policy/v1".into(),
        kind: "PodDisruptionBudget".into(),
        plural: "poddisruptionbudgets".into(),
    }
}

async fn ensure_classes(client: &Client) {
    let api: Api<PriorityClass> = Api::all(client.clone());
    for (name, value, never) in CLASSES {
        let mut pc = json!({"metadata": {"name": name}, "value": value});
        if never {
            pc["preemptionPolicy"] = json!("Never");
        }
        let pc: PriorityClass = serde_json::from_value(pc).unwrap();
        let _ = api.create(&PostParams::default(), &pc).await;
    }
}

/// The scenario's cluster, from nothing.
async fn build(client: &Client, s: &Scenario) {
    reset(client, &[NS]).await;
    let pdbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &pdb_resource());
    let _ = pdbs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let nodes: Api<Node> = Api::all(client.clone());
    for n in s.nodes {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let epoch = k8s_openapi::jiff::Timestamp::now().as_second() - 3600;
    for (name, node, class, cpu, app, started) in &s.placed {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
            "spec": {"nodeName": node, "priorityClassName": class,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let start = k8s_openapi::jiff::Timestamp::from_second(epoch + started).unwrap();
        let status = json!({"status": {"phase": "Running", "startTime": start.to_string()}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
    for (app, allowed) in &s.budgets {
        let pdb: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}
        }))
        .unwrap();
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        let status = json!({"status": {"disruptionsAllowed": allowed, "currentHealthy": 2,
            "desiredHealthy": 1, "expectedPods": 2, "observedGeneration": 1}});
        pdbs.patch_status(app, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
}

/// The placed pods now deleted or terminating.
async fn evicted(client: &Client, s: &Scenario) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut out = BTreeSet::new();
    for (name, ..) in &s.placed {
        match pods.get_opt(name).await.unwrap() {
            None => {
                out.insert(name.to_string());
            }
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                out.insert(name.to_string());
            }
            Some(_) => {}
        }
    }
    out
}

/// Waits for the scheduler's verdict on the preemptor. `ws`: wasmsched,
/// whose evictions follow the nomination (its victims histogram says
/// when they are done).
async fn verdict(client: &Client, s: &Scenario, ws: Option<&Scheduler>, log: &Path) -> Verdict {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    let mut failed_at: Option<Instant> = None;
    loop {
        let p = pods.get("preemptor").await.unwrap();
        if let Some(node) = p.status.and_then(|s| s.nominated_node_name) {
            if let Some(ws) = ws {
                wait_until("the evictions", Duration::from_secs(30), || async {
                    ws.metric("scheduler_preemption_victims_count", &[]).await >= 1.0
                })
                .await;
            }
            let victims = evicted(client, s).await;
            return Verdict::Nominated { node, victims };
        }
        let failed = events_for(client, NS, "preemptor", "FailedScheduling").await;
        if let Some(e) = failed.first() {
            // A nomination is written right after the event: give it a
            // moment before concluding there is none.
            let at = *failed_at.get_or_insert_with(Instant::now);
            if at.elapsed() > Duration::from_secs(3) {
                let message = e.message.clone().unwrap_or_default();
                return Verdict::NotPreempted { message };
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{}: no verdict on the preemptor; log:\n{}",
            s.name,
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a preemption left on each victim: its `DisruptionTarget`
/// condition (status, reason, message, observedGeneration) and its
/// `Preempted` event's message with the preemptor's uid written `UID`.
type Marks = BTreeMap<String, (String, String)>;

async fn marks(client: &Client, s: &Scenario, v: &Verdict) -> Marks {
    let Verdict::Nominated { victims, .. } = v else {
        return Marks::new();
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let uid = pods.get("preemptor").await.unwrap().metadata.uid.unwrap();
    let mut out = Marks::new();
    for name in victims {
        wait_until("the Preempted event", Duration::from_secs(30), || async {
            !events_for(client, NS, name, "Preempted").await.is_empty()
        })
        .await;
        let events = events_for(client, NS, name, "Preempted").await;
        assert_eq!(events.len(), 1, "{}: {name}'s Preempted events", s.name);
        let event = events[0]
            .message
            .clone()
            .unwrap_or_default()
            .replace(&uid, "UID");
        let condition = pods
            .get(name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "DisruptionTarget")
            .map(|c| {
                format!(
                    "{} {} {:?} gen={:?}",
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                    c.observed_generation
                )
            })
            .unwrap_or_else(|| "no DisruptionTarget condition".into());
        out.insert(name.clone(), (condition, event));
    }
    out
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn configs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let kube = dir.join("kube-scheduler.yaml");
    std::fs::write(
        &kube,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {}}}\nleaderElection: {{leaderElect: false}}\n\
             profiles:\n- schedulerName: {SCHED}\n",
            env().kubeconfig.display()
        ),
    )
    .unwrap();
    let ws = dir.join("wasmsched.json");
    let cfg = json!({
        "apiVersion": "wasmsched.io/v1alpha1", "kind": "WasmSchedulerConfiguration",
        "leaderElection": {"leaderElect": false},
        "profiles": [{"schedulerName": SCHED, "plugins": {"multiPoint": {"disabled": [
            {"name": "GpuTopology"}, {"name": "NetworkLocality"}]}}}]
    });
    std::fs::write(&ws, cfg.to_string()).unwrap();
    (kube, ws)
}

/// After a preemption: the victims are still terminating, the preemptor
/// pending; once they are gone it is bound to the nominated node.
async fn finish(client: &Client, s: &Scenario, v: &Verdict) -> Option<String> {
    let Verdict::Nominated { victims, .. } = v else {
        return None;
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for name in victims {
        let p = pods.get_opt(name).await.unwrap();
        assert!(
            p.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
            "{}: victim {name} should be terminating (graceful deletion, no kubelet)",
            s.name
        );
        let bound = pods.get("preemptor").await.unwrap().spec.unwrap().node_name;
        assert_eq!(bound, None, "{}: bound while its victims terminate", s.name);
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        pods.delete(name, &now).await.unwrap();
    }
    wait_until(
        "the preemptor's binding",
        Duration::from_secs(60),
        || async {
            pods.get("preemptor")
                .await
                .ok()
                .and_then(|p| p.spec?.node_name)
                .is_some()
        },
    )
    .await;
    pods.get("preemptor").await.unwrap().spec.unwrap().node_name
}

async fn with_kube_scheduler(
    client: &Client,
    s: &Scenario,
    cfg: &Path,
    dir: &Path,
) -> (Verdict, Marks, Option<String>) {
    build(client, s).await;
    let log = dir.join(format!("kube-scheduler-{}.log", s.name));
    let _k = Killed(kube_scheduler(cfg, &log, 2));
    crate::create_pod(client, s.preemptor.clone()).await;
    let v = verdict(client, s, None, &log).await;
    let m = marks(client, s, &v).await;
    let bound = finish(client, s, &v).await;
    (v, m, bound)
}

async fn with_wasmsched(
    client: &Client,
    s: &Scenario,
    cfg: &Path,
    dir: &Path,
) -> (Verdict, Marks, Option<String>) {
    build(client, s).await;
    let ws = Scheduler::start(
        dir,
        &format!("ws-{}", s.name),
        &env().kubeconfig,
        &["--config", cfg.to_str().unwrap()],
    );
    crate::create_pod(client, s.preemptor.clone()).await;
    let v = verdict(client, s, Some(&ws), &ws.log).await;
    let m = marks(client, s, &v).await;
    if let Verdict::Nominated { .. } = &v {
        assert!(ws.metric("scheduler_preemption_attempts_total", &[]).await >= 1.0);
        // Asynchronous, as kube-scheduler 1.37's default.
        let done = &[("result", "success")];
        wait_until("the preemption's end", Duration::from_secs(30), || async {
            ws.metric("scheduler_preemption_goroutines_execution_total", done)
                .await
                >= 1.0
        })
        .await;
    }
    let bound = finish(client, s, &v).await;
    (v, m, bound)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_matches_kube_scheduler() {
    let _g = serial();
    let client = client().await;
    ensure_classes(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let (kube_cfg, ws_cfg) = configs(tmp.path());
    let mut got: BTreeMap<&str, Verdict> = BTreeMap::new();
    for s in scenarios() {
        let kube = with_kube_scheduler(&client, &s, &kube_cfg, tmp.path()).await;
        let ws = with_wasmsched(&client, &s, &ws_cfg, tmp.path()).await;
        assert_eq!(
            ws, kube,
            "{}: wasmsched (left) and kube-scheduler differ",
            s.name
        );
        got.insert(s.name, ws.0);
    }
    // The scenarios exercise what they are named for.
    let nominated = |name: &str| match &got[name] {
        Verdict::Nominated { node, victims } => {
            Some((node.clone(), victims.iter().cloned().collect::<Vec<_>>()))
        }
        Verdict::NotPreempted { .. } => None,
    };
    let s = |v: &str| v.to_string();
    assert_eq!(
        nominated("priorities-and-reprieve"),
        Some((s("n1"), vec![s("a")]))
    );
    assert_eq!(
        nominated("latest-start-wins-a-tie"),
        Some((s("n2"), vec![s("b")]))
    );
    assert_eq!(nominated("pdb-allows-0"), Some((s("n2"), vec![s("web")])));
    assert_eq!(nominated("pdb-allows-1"), Some((s("n1"), vec![s("db-0")])));
    assert_eq!(
        nominated("anti-affinity-only-eviction-satisfies"),
        Some((s("n1"), vec![s("x-low")]))
    );
    assert_eq!(
        nominated("highest-victim-after-the-reprieve"),
        Some((s("n2"), vec![s("db-2"), s("y")]))
    );
    assert_eq!(nominated("preemption-policy-never"), None);
    assert_eq!(nominated("fits-nowhere-even-after-eviction"), None);
}

// ----------------------------------------------------------- failover

fn failover_config(dir: &Path, lease: &str) -> std::path::PathBuf {
    let path = dir.join("failover.yaml");
    std::fs::write(
        &path,
        format!(
            "leaderElection:\n  leaseDuration: 4s\n  renewDeadline: 3s\n  retryPeriod: 500ms\n  \
             resourceNamespace: default\n  resourceName: {lease}\n\
             profiles:\n- schedulerName: {SCHED}\n  plugins:\n    multiPoint:\n      disabled: [{{name: GpuTopology}}, {{name: NetworkLocality}}]\n"
        ),
    )
    .unwrap();
    path
}

/// Cpu requests per node of the bound pods, terminating ones included
/// (they hold their node until they are gone).
async fn cpu_per_node(client: &Client) -> BTreeMap<String, i64> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut used = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.unwrap() {
        let spec = p.spec.unwrap();
        let Some(node) = spec.node_name else { continue };
        let cpu = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0
            .parse::<i64>()
            .unwrap();
        *used.entry(node).or_default() += cpu;
    }
    used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_between_eviction_and_binding_leaves_the_preemptor_to_the_standby() {
    let _g = serial();
    let client = client().await;
    ensure_classes(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let lease = "preempt-failover";
    let _ = Api::<Lease>::namespaced(client.clone(), "default")
        .delete(lease, &DeleteParams::default())
        .await;
    let s = Scenario {
        name: "failover",
        nodes: &["n1", "n2"],
        placed: vec![
            ("victim", "n1", "p-low", "3", "v", 0),
            ("keep", "n2", "p-top", "4", "k", 0),
        ],
        budgets: vec![],
        preemptor: preemptor("p-high", "3", json!({})),
    };
    build(&client, &s).await;
    let cfg = failover_config(tmp.path(), lease);
    let cfg = cfg.to_str().unwrap();
    let mut a = Scheduler::start(tmp.path(), "a", &env().kubeconfig, &["--config", cfg]);
    wait_until("a leads", Duration::from_secs(30), || async {
        lease_holder(&client, lease).await.as_deref() == Some("a")
    })
    .await;
    let b = Scheduler::start(tmp.path(), "b", &env().kubeconfig, &["--config", cfg]);
    crate::create_pod(&client, s.preemptor.clone()).await;
    let v = verdict(&client, &s, Some(&a), &a.log).await;
    assert_eq!(
        v,
        Verdict::Nominated {
            node: "n1".into(),
            victims: ["victim".to_string()].into()
        }
    );
    // The leader dies with the victim evicted (terminating) and the
    // preemptor not bound. A pod of lower priority that would take the
    // room arrives meanwhile; then the victim is gone (as a kubelet would
    // remove it).
    a.kill();
    let sneak = json!({"metadata": {"name": "sneak", "namespace": NS}, "spec": {
        "schedulerName": SCHED, "priorityClassName": "p-mid",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}});
    crate::create_pod(&client, sneak).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("victim", &now).await.unwrap();
    wait_until(
        "the standby binds the preemptor",
        Duration::from_secs(60),
        || async {
            pods.get("preemptor")
                .await
                .ok()
                .and_then(|p| p.spec?.node_name)
                .is_some()
        },
    )
    .await;
    assert_eq!(lease_holder(&client, lease).await.as_deref(), Some("b"));
    let bound = pods.get("preemptor").await.unwrap().spec.unwrap().node_name;
    assert_eq!(bound.as_deref(), Some("n1"), "the nominated node");
    // The sneak pod found no room: it stays pending, or it preempted
    // nothing (nothing below its priority is left).
    let sneak = pods.get("sneak").await.unwrap();
    assert_eq!(sneak.spec.unwrap().node_name, None);
    for (node, cpu) in cpu_per_node(&client).await {
        assert!(cpu <= 4, "{node} holds {cpu} cpu of 4");
    }
    for name in ["preemptor", "keep"] {
        let n = events_for(&client, NS, name, "Scheduled").await.len();
        assert!(n <= 1, "{name} bound {n} times");
    }
    drop(b);
}

async fn lease_holder(client: &Client, name: &str) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

// ------------------------------------------- asynchronous preemption

/// `SchedulerAsyncPreemption` (on by default in 1.37) and off: the fault
/// proxy holds the victim's DELETE for a while. Asynchronously, the loop
/// goes on (another pod is bound meanwhile) and the preemptor is not
/// attempted again, however many events come, until its evictions are
/// done, so it cannot preempt twice. Synchronously, the loop waits for the
/// evictions: nothing else is scheduled meanwhile. Either way the
/// preemptor ends on the nominated node once its victim is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_preemption_holds_the_preemptor_not_the_loop() {
    let _g = serial();
    let client = client().await;
    ensure_classes(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let (_, cfg) = configs(tmp.path());
    const HOLD: Duration = Duration::from_secs(8);
    for asynchronous in [true, false] {
        let s = Scenario {
            name: "async",
            nodes: &["n1"],
            placed: vec![("a", "n1", "p-low", "3", "a", 0)],
            budgets: vec![],
            preemptor: preemptor("p-high", "2", json!({})),
        };
        build(&client, &s).await;
        let proxy =
            crate::proxy::FaultProxy::start(&env().servers, &crate::audit::apiserver_url()).await;
        let gate = format!("SchedulerAsyncPreemption={asynchronous}");
        let name = format!("ws-async-{asynchronous}");
        let ws = crate::outages::through(
            &proxy,
            tmp.path(),
            &name,
            &["--config", cfg.to_str().unwrap(), "--feature-gates", &gate],
        );
        ws.wait_ready().await;
        proxy.hold(&format!("DELETE /api/v1/namespaces/{NS}/pods/a"), HOLD);
        let held_at = Instant::now();
        crate::create_pod(&client, s.preemptor.clone()).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        wait_until("the nomination", Duration::from_secs(30), || async {
            pods.get("preemptor")
                .await
                .ok()
                .and_then(|p| p.status?.nominated_node_name)
                .is_some()
        })
        .await;
        // Events while the eviction hangs: a node (too small for the
        // preemptor) and a pod that fits it.
        let nodes: Api<Node> = Api::all(client.clone());
        let small: Node = serde_json::from_value(json!({
            "metadata": {"name": "small", "labels": {"kubernetes.io/hostname": "small"}},
            "status": {"allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"}}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &small).await.unwrap();
        let mut other = preemptor("p-low", "500m", json!({}));
        other["metadata"]["name"] = json!("other");
        crate::create_pod(&client, other).await;
        let other_bound = || async {
            pods.get("other")
                .await
                .ok()
                .and_then(|p| p.spec?.node_name)
                .is_some()
        };
        if asynchronous {
            wait_until(
                "the other pod's binding",
                Duration::from_secs(5),
                other_bound,
            )
            .await;
        }
        // Past several backoffs of the preemptor, still within the hold.
        while held_at.elapsed() < HOLD - Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let unschedulable = &[("result", "unschedulable")];
        assert_eq!(
            ws.metric("scheduler_schedule_attempts_total", unschedulable)
                .await,
            1.0,
            "async={asynchronous}: the preemptor was attempted again while its eviction ran (requests, held: {:?}; victim: {:?}); log:\n{}",
            proxy.requests(),
            pods.get_opt("a").await.unwrap().map(|p| p.metadata.deletion_timestamp),
            ws.logs()
        );
        assert_eq!(
            ws.metric("scheduler_preemption_attempts_total", &[]).await,
            1.0
        );
        assert_eq!(
            other_bound().await,
            asynchronous,
            "async={asynchronous}: whether the loop went on while the eviction hung"
        );
        // The hold ends: the victim terminates; once it is gone the
        // preemptor binds where it was nominated.
        wait_until("the eviction", Duration::from_secs(30), || async {
            pods.get_opt("a")
                .await
                .unwrap()
                .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        })
        .await;
        let done = &[("result", "success")];
        let finished = ws
            .metric("scheduler_preemption_goroutines_execution_total", done)
            .await;
        if asynchronous {
            wait_until("the preemption's end", Duration::from_secs(10), || async {
                ws.metric("scheduler_preemption_goroutines_execution_total", done)
                    .await
                    == 1.0
            })
            .await;
        } else {
            assert_eq!(
                finished, 0.0,
                "no asynchronous preemption with the gate off"
            );
        }
        wait_until(
            "the other pod's binding",
            Duration::from_secs(30),
            other_bound,
        )
        .await;
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let _ = pods.delete("a", &now).await;
        wait_until(
            "the preemptor's binding",
            Duration::from_secs(60),
            || async {
                pods.get("preemptor")
                    .await
                    .ok()
                    .and_then(|p| p.spec?.node_name)
                    .as_deref()
                    == Some("n1")
            },
        )
        .await;
        let _ = nodes.delete("small", &DeleteParams::default()).await;
    }
}
