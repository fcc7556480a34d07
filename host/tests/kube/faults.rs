//! Faults against the real API server: the leader dies mid-stream, the
//! API server restarts mid-stream, a pod or its node disappears between
//! scheduling and binding.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use crate::env::*;

const NS: &str = "load";

pub async fn create_nodes(client: &Client, prefix: &str, n: usize, cpu: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..n {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("{prefix}-{i}"), "labels": {"kubernetes.io/hostname": format!("{prefix}-{i}")}},
            "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
}

/// Creates a pod, retrying while the API server is unreachable.
pub async fn create_cpu_pod(client: &Client, name: &str, cpu: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    }))
    .unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    for _ in 0..600 {
        match api.create(&PostParams::default(), &pod).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("could not create pod {name}");
}

async fn pods(client: &Client) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

async fn bound_count(client: &Client) -> usize {
    pods(client).await.iter().filter(|p| is_bound(p)).count()
}

/// No node holds more cpu requests than it has: no reservation was
/// handed out twice.
async fn assert_capacity(client: &Client, cpu_per_node_milli: i64) {
    let mut used: HashMap<String, i64> = HashMap::new();
    for p in pods(client).await {
        let spec = p.spec.unwrap();
        let Some(node) = spec.node_name else { continue };
        let req = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map(|q| q.0.trim_end_matches('m').parse::<i64>().unwrap())
            .unwrap();
        *used.entry(node).or_default() += req;
    }
    for (node, milli) in &used {
        assert!(
            *milli <= cpu_per_node_milli,
            "{node} holds {milli}m cpu of {cpu_per_node_milli}m"
        );
    }
}

async fn scheduled_events_per_pod(client: &Client) -> HashMap<String, usize> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    let mut out = HashMap::new();
    for e in api.list(&ListParams::default()).await.unwrap().items {
        if e.reason.as_deref() == Some("Scheduled") {
            *out.entry(e.involved_object.name.unwrap_or_default())
                .or_default() += 1;
        }
    }
    out
}

fn write_config(dir: &Path, lease: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "leaderElection:\n  leaseDuration: 4s\n  renewDeadline: 3s\n  retryPeriod: 500ms\n  \
             resourceNamespace: default\n  resourceName: {lease}\n\
             clientConnection:\n  qps: 200\n  burst: 200\n\
             profiles:\n- schedulerName: gpu-scheduler\n"
        ),
    )
    .unwrap();
    path
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_dies_mid_stream_and_the_standby_finishes_without_double_binding() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    let lease = "failover-test";
    let _ = Api::<Lease>::namespaced(client.clone(), "default")
        .delete(lease, &DeleteParams::default())
        .await;
    let config = write_config(tmp.path(), lease);
    let config = config.to_str().unwrap();
    create_nodes(&client, "f", 20, "4").await;
    // Slow bindings keep the leader busy when it dies.
    let mut a = Scheduler::start(
        tmp.path(),
        "a",
        &env().kubeconfig,
        &["--config", config, "--bind-delay", "500ms"],
    );
    wait_until("a to lead", Duration::from_secs(60), || async {
        lease_holder(&client, lease).await.as_deref() == Some("a")
    })
    .await;
    let mut b = Scheduler::start(tmp.path(), "b", &env().kubeconfig, &["--config", config]);
    wait_until(
        "b to be ready (synced, standing by)",
        Duration::from_secs(60),
        || async { b.get("/readyz").await.is_some_and(|(s, _)| s == 200) },
    )
    .await;
    assert_eq!(b.metric("leader_election_master_status", &[]).await, 0.0);
    const PODS: usize = 150;
    let names: Vec<String> = (0..PODS).map(|i| format!("p-{i:03}")).collect();
    futures::future::join_all(names.iter().map(|n| create_cpu_pod(&client, n, "500m"))).await;
    wait_until("a to bind some pods", Duration::from_secs(120), || async {
        bound_count(&client).await >= 10
    })
    .await;
    a.kill();
    let at_kill = bound_count(&client).await;
    assert!(
        at_kill < PODS,
        "a finished before it was killed; the test proves nothing"
    );
    wait_until(
        "b to finish the queue",
        Duration::from_secs(120),
        || async { bound_count(&client).await == PODS },
    )
    .await;
    assert_eq!(lease_holder(&client, lease).await.as_deref(), Some("b"));
    assert_eq!(b.metric("leader_election_master_status", &[]).await, 1.0);
    assert!(
        b.metric("wasmsched_bindings_total", &[("result", "bound")])
            .await
            >= 1.0
    );
    assert_eq!(
        b.metric("wasmsched_bindings_total", &[("result", "conflict")])
            .await,
        0.0,
        "b never tried to bind a pod a had bound"
    );
    assert_capacity(&client, 4000).await;
    let events = scheduled_events_per_pod(&client).await;
    assert!(
        events.values().all(|&n| n == 1),
        "a pod was reported scheduled twice: {events:?}"
    );
    // SIGTERM: b stops cleanly and releases the lease.
    let status = b.terminate();
    assert!(status.success(), "exit {status:?}; log:\n{}", b.logs());
    assert_eq!(lease_holder(&client, lease).await, None, "lease released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_mid_stream() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    create_nodes(&client, "r", 10, "4").await;
    let sched = Scheduler::start(
        tmp.path(),
        "restart",
        &env().kubeconfig,
        &["--leader-elect", "false"],
    );
    sched.wait_ready().await;
    for i in 0..40 {
        create_cpu_pod(&client, &format!("before-{i:02}"), "500m").await;
    }
    let restart = std::process::Command::new(repo().join("scripts/test-servers"))
        .arg("restart-apiserver")
        .arg(&env().servers)
        .status()
        .unwrap();
    assert!(restart.success());
    // New pods after the restart reach the scheduler through its new watch.
    for i in 0..40 {
        create_cpu_pod(&client, &format!("after-{i:02}"), "500m").await;
    }
    wait_until(
        "every pod bound after the restart",
        Duration::from_secs(180),
        || async { bound_count(&client).await == 80 },
    )
    .await;
    assert_capacity(&client, 4000).await;
    let events = scheduled_events_per_pod(&client).await;
    assert!(events.values().all(|&n| n <= 1), "{events:?}");
    assert_eq!(sched.get("/readyz").await.unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_or_node_deleted_between_scheduling_and_binding() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    create_nodes(&client, "d", 1, "4").await;
    let sched = Scheduler::start(
        tmp.path(),
        "delete",
        &env().kubeconfig,
        &["--leader-elect", "false", "--bind-delay", "3s"],
    );
    sched.wait_ready().await;
    // The pod is placed (assumed), then deleted before its binding.
    create_cpu_pod(&client, "doomed", "3").await;
    wait_until("doomed to be assumed", Duration::from_secs(30), || async {
        sched.metric("wasmsched_cache_assumed_pods", &[]).await == 1.0
    })
    .await;
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    api.delete(
        "doomed",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // Its reservation is released: a pod needing the same capacity fits.
    create_cpu_pod(&client, "next", "3").await;
    wait_until("next to be bound", Duration::from_secs(60), || async {
        api.get("next")
            .await
            .ok()
            .and_then(|p| p.spec?.node_name)
            .is_some()
    })
    .await;
    assert_eq!(
        sched
            .metric("wasmsched_bindings_total", &[("result", "gone")])
            .await,
        1.0
    );
    assert_eq!(
        sched
            .metric("wasmsched_bindings_total", &[("result", "bound")])
            .await,
        1.0
    );

    // The node is deleted while a pod placed on it waits for its binding:
    // the pod is scheduled again, onto the node that replaces it.
    create_nodes(&client, "e", 1, "4").await;
    create_cpu_pod(&client, "moved", "2").await;
    wait_until("moved to be assumed", Duration::from_secs(30), || async {
        sched.metric("wasmsched_cache_assumed_pods", &[]).await == 1.0
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.delete("e-0", &DeleteParams::default()).await.unwrap();
    create_nodes(&client, "g", 1, "4").await;
    wait_until("moved to be bound", Duration::from_secs(60), || async {
        api.get("moved")
            .await
            .ok()
            .and_then(|p| p.spec?.node_name)
            .is_some()
    })
    .await;
    let node = api
        .get("moved")
        .await
        .unwrap()
        .spec
        .unwrap()
        .node_name
        .unwrap();
    assert_eq!(node, "g-0");
    assert_eq!(
        sched
            .metric("wasmsched_bindings_total", &[("result", "node-gone")])
            .await,
        1.0
    );
    wait_until(
        "the watch to confirm every binding",
        Duration::from_secs(30),
        || async { sched.metric("wasmsched_cache_assumed_pods", &[]).await == 0.0 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_is_taken_steps_down_and_competes_again() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    let lease = "taken-test";
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let _ = leases.delete(lease, &DeleteParams::default()).await;
    let config = write_config(tmp.path(), lease);
    create_nodes(&client, "t", 1, "4").await;
    let mut a = Scheduler::start(
        tmp.path(),
        "a",
        &env().kubeconfig,
        &["--config", config.to_str().unwrap()],
    );
    wait_until("a to lead", Duration::from_secs(60), || async {
        lease_holder(&client, lease).await.as_deref() == Some("a")
    })
    .await;
    // Someone else writes the Lease (as after a partition in which a's
    // lease expired and another replica took it).
    let mut l = leases.get(lease).await.unwrap();
    let spec = l.spec.as_mut().unwrap();
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    spec.lease_duration_seconds = Some(3600);
    leases
        .replace(lease, &PostParams::default(), &l)
        .await
        .unwrap();
    wait_until("a to step down", Duration::from_secs(30), || async {
        a.metric("leader_election_master_status", &[]).await == 0.0
    })
    .await;
    assert!(a.logs().contains("stepped down"), "{}", a.logs());
    // It schedules nothing while another holds the lease, and stays up.
    create_cpu_pod(&client, "after-loss", "1").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(bound_count(&client).await, 0);
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "a exited:\n{}",
        a.logs()
    );
    assert_eq!(
        lease_holder(&client, lease).await.as_deref(),
        Some("intruder"),
        "a took it back while it was held"
    );
    // The intruder lets go: a, still a candidate under its identity,
    // takes the lease and binds the pod.
    let mut l = leases.get(lease).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = None;
    l.spec.as_mut().unwrap().lease_duration_seconds = Some(1);
    leases
        .replace(lease, &PostParams::default(), &l)
        .await
        .unwrap();
    wait_until("a to bind the pod", Duration::from_secs(30), || async {
        bound_count(&client).await == 1
    })
    .await;
    assert_eq!(lease_holder(&client, lease).await.as_deref(), Some("a"));
    assert_eq!(a.metric("leader_election_master_status", &[]).await, 1.0);
}
