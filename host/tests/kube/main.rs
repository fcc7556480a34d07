//! `wasmsched run` against a real kube-apiserver and etcd (the Kubernetes
//! release in scripts/servers/versions, built from the Go module proxy by
//! `scripts/test-servers`).

// Each test owns its runtime; `env::serial()` is a std mutex held for a
// whole test so tests on different runtimes take turns on the shared API
// server, which an async mutex (tied to one runtime) could not do.
#![allow(clippy::await_holding_lock)]
// An end-to-end scenario reads top to bottom; the 120-line limit is for
// host/src.
#![allow(clippy::too_many_lines)]

mod audit;
mod bench;
mod bench_dra;
mod deploy;
mod differential;
mod dra;
mod dropin;
mod env;
mod faults;
mod gangs;
mod gates;
mod hami;
mod namespaces;
mod node;
mod node_metrics;
mod oci;
mod ops;
mod outages;
mod preemption;
mod proxy;
mod resize_features;
mod serving;
mod soak;
mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::Value;

use env::*;

#[path = "../common/oci.rs"]
mod registry;

/// Creates the example's nodes and bound pods; returns its pending pods
/// in the order the simulator's queue takes them (by manifest creation
/// time, then file order). Created one by one while the scheduler runs,
/// they reach its queue in that order; listed all at once, they would
/// arrive in etcd's key order instead (creation timestamps have
/// one-second resolution, so they would tie).
pub async fn load_example(client: &Client, dir: &Path) -> Vec<Value> {
    let nodes: Api<Node> = Api::all(client.clone());
    for n in manifest_objects(&dir.join("nodes.yaml")) {
        let node: Node = serde_json::from_value(n).unwrap();
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
    }
    // StorageClasses, PVs and claims, ready before any pod (the PV
    // controller must be running).
    let storage = dir.join("storage.yaml");
    if storage.exists() {
        let mut namespaces = Vec::new();
        for o in manifest_objects(&storage) {
            if let Some(ns) = o["metadata"]["namespace"].as_str() {
                namespaces.push(ns.to_string());
            }
            volumes::cluster::create(client, &o).await;
        }
        for ns in namespaces {
            volumes::cluster::wait_for_pv_controller(client, &ns, &[]).await;
        }
    }
    let mut pods = manifest_objects(&dir.join("pods.yaml"));
    pods.sort_by_key(|p| {
        (
            p["spec"]["nodeName"].is_null(),
            p["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    });
    let (bound, pending): (Vec<Value>, Vec<Value>) = pods
        .into_iter()
        .partition(|p| !p["spec"]["nodeName"].is_null());
    for p in &bound {
        create_pod(client, p.clone()).await;
    }
    pending
}

pub async fn create_pod(client: &Client, mut p: Value) {
    p["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("creationTimestamp");
    p.as_object_mut().unwrap().remove("status");
    let ns = p["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let pod: Pod = serde_json::from_value(p).unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
}

/// `ns/name` -> node of every pod.
pub async fn placements(client: &Client) -> BTreeMap<String, Option<String>> {
    let pods: Api<Pod> = Api::all(client.clone());
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.metadata.namespace.unwrap_or_default(),
                    p.metadata.name.unwrap_or_default()
                ),
                p.spec.and_then(|s| s.node_name),
            )
        })
        .collect()
}

/// `simulate --output json` on an example.
fn simulate(dir: &Path, seed: u64) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("simulate")
        .arg(dir)
        .args(["--output", "json", "--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn pod_condition(client: &Client, ns: &str, name: &str) -> Option<(String, String, String)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = api.get(name).await.ok()?;
    let c = pod
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")?;
    Some((
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

/// Runs one example end to end and compares with `simulate`.
async fn example_matches_simulate(example: &str, namespaces: &[&str]) {
    let client = client().await;
    reset(&client, namespaces).await;
    let dir = repo().join("examples").join(example);
    let expected = simulate(&dir, 0);
    let pods = load_example(&client, &dir).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = Scheduler::start(
        tmp.path(),
        "e2e",
        &env().kubeconfig,
        &["--leader-elect", "false", "--seed", "0"],
    );
    wait_until("/readyz", Duration::from_secs(60), || async {
        sched.get("/readyz").await.is_some_and(|(s, _)| s == 200)
    })
    .await;
    for p in &pods {
        create_pod(&client, p.clone()).await;
    }
    let scheduled: Vec<(String, String)> = expected["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap(),
                    p["pod"].as_str().unwrap()
                ),
                p["node"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let unschedulable: Vec<(String, String, String)> = expected["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["namespace"].as_str().unwrap().to_string(),
                p["pod"].as_str().unwrap().to_string(),
                p["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(!scheduled.is_empty());
    wait_until(
        "every pod simulate places to be bound",
        Duration::from_secs(120),
        || async {
            let now = placements(&client).await;
            scheduled
                .iter()
                .all(|(k, _)| now.get(k).cloned().flatten().is_some())
        },
    )
    .await;
    let now = placements(&client).await;
    let wrong: Vec<String> = scheduled
        .iter()
        .filter(|(k, n)| now[k].as_deref() != Some(n.as_str()))
        .map(|(k, n)| format!("{k}: simulate {n}, run {:?}", now[k]))
        .collect();
    assert!(
        wrong.is_empty(),
        "placements differ from simulate: {wrong:#?}\nlog:\n{}",
        sched.logs()
    );
    for (key, node) in &scheduled {
        let (ns, name) = key.split_once('/').unwrap();
        // Events are written after the binding, asynchronously.
        wait_until("the Scheduled event", Duration::from_secs(30), || async {
            !events_for(&client, ns, name, "Scheduled").await.is_empty()
        })
        .await;
        let ev = events_for(&client, ns, name, "Scheduled").await;
        assert_eq!(ev.len(), 1, "{key}: one Scheduled event");
        assert_eq!(
            ev[0].message.as_deref(),
            Some(format!("Successfully assigned {key} to {node}").as_str())
        );
    }
    for (ns, name, message) in &unschedulable {
        wait_until(
            "the FailedScheduling event and condition",
            Duration::from_secs(60),
            || async {
                !events_for(&client, ns, name, "FailedScheduling")
                    .await
                    .is_empty()
                    && pod_condition(&client, ns, name).await.is_some()
            },
        )
        .await;
        let ev = events_for(&client, ns, name, "FailedScheduling").await;
        assert_eq!(
            ev[0].message.as_deref(),
            Some(message.as_str()),
            "{ns}/{name}"
        );
        assert_eq!(ev[0].type_.as_deref(), Some("Warning"));
        let (status, reason, cond_msg) = pod_condition(&client, ns, name).await.unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "Unschedulable")
        );
        assert_eq!(&cond_msg, message);
        assert_eq!(now[&format!("{ns}/{name}")], None);
    }
    // Pods of other schedulers are untouched: no node, no events.
    for p in &pods {
        if p["spec"]["schedulerName"] != "gpu-scheduler" {
            let ns = p["metadata"]["namespace"].as_str().unwrap();
            let name = p["metadata"]["name"].as_str().unwrap();
            assert_eq!(
                now[&format!("{ns}/{name}")],
                None,
                "{ns}/{name} is another scheduler's"
            );
            assert!(events_for(&client, ns, name, "Scheduled").await.is_empty());
            assert!(events_for(&client, ns, name, "FailedScheduling")
                .await
                .is_empty());
        }
    }
    // Metrics and probes.
    let attempts = sched
        .metric(
            "scheduler_schedule_attempts_total",
            &[("profile", "gpu-scheduler"), ("result", "scheduled")],
        )
        .await;
    assert_eq!(attempts as usize, scheduled.len());
    assert_eq!(sched.get("/healthz").await.unwrap().0, 200);
    assert_eq!(sched.get("/readyz").await.unwrap().0, 200);
    if !unschedulable.is_empty() {
        check_no_event_flood(&client, &sched, &unschedulable).await;
    }
}

/// Cluster events make unschedulable pods retry; their failures fold into
/// one Event per pod (with a count), and the condition is not rewritten.
async fn check_no_event_flood(
    client: &Client,
    sched: &Scheduler,
    unschedulable: &[(String, String, String)],
) {
    let before = sched
        .metric(
            "scheduler_schedule_attempts_total",
            &[("result", "unschedulable")],
        )
        .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let first = nodes.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    for i in 0..5 {
        // A label change on a node is a cluster event that sends waiting
        // pods back to the queue, and leaves their failure message as is.
        let patch = serde_json::json!({"metadata": {"labels": {"touch": i.to_string()}}});
        nodes
            .patch(
                &first,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    wait_until(
        "retries after the cluster events",
        Duration::from_secs(60),
        || async {
            sched
                .metric(
                    "scheduler_schedule_attempts_total",
                    &[("result", "unschedulable")],
                )
                .await
                >= before + unschedulable.len() as f64
        },
    )
    .await;
    for (ns, name, _) in unschedulable {
        let ev = events_for(client, ns, name, "FailedScheduling").await;
        assert_eq!(
            ev.len(),
            1,
            "{ns}/{name}: one FailedScheduling Event, got {ev:?}"
        );
        let messages: HashMap<String, usize> = ev.iter().fold(HashMap::new(), |mut m, e| {
            *m.entry(e.message.clone().unwrap_or_default()).or_default() += 1;
            m
        });
        assert!(
            messages.values().all(|&n| n == 1),
            "{ns}/{name}: one Event per distinct message, got {messages:?}"
        );
    }
    let folded = sched
        .metric(
            "wasmsched_events_total",
            &[("reason", "FailedScheduling"), ("action", "suppressed")],
        )
        .await;
    assert!(folded >= 1.0, "repeats were folded, not written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_cluster_is_scheduled_as_simulate_predicts() {
    let _g = serial();
    example_matches_simulate("gpu-cluster", &["ml", "web", "etl"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microservices_are_scheduled_as_simulate_predicts() {
    let _g = serial();
    example_matches_simulate("microservices", &["shop"]).await;
}

/// The training workers land where their dataset's local PVs are, with
/// the real PV controller completing the bindings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_training_is_scheduled_as_simulate_predicts() {
    let _g = serial();
    let client = client().await;
    volumes::cluster::reset_volumes(&client, "ml").await;
    let _pv_controller = volumes::ControllerManager::start();
    example_matches_simulate("gpu-training", &["ml"]).await;
    volumes::cluster::reset_volumes(&client, "ml").await;
}
