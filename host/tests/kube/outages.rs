//! The faults of a production control plane (issue 30), on the real
//! servers, with `wasmsched run` talking to the API server through the
//! test's fault proxy (`proxy.rs`). Every test checks, after its fault:
//! no pod bound twice or reported scheduled twice (the binding audit,
//! Scheduled events), no pod lost (every pending pod that fits is bound
//! within a stated time after the fault clears), no node over its
//! allocatable, and the metric (and event or log line) that names the
//! condition.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use crate::audit::*;
use crate::env::*;
use crate::proxy::FaultProxy;

pub const NS: &str = "outage";

/// A node with `cpu` cores and `labels`.
pub async fn node(client: &Client, name: &str, cpu: &str, labels: serde_json::Value) {
    let mut l = json!({"kubernetes.io/hostname": name});
    if let Some(m) = labels.as_object() {
        for (k, v) in m {
            l[k] = v.clone();
        }
    }
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": l},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
}

/// A pending pod of the `gpu-scheduler` profile asking for `cpu`, with
/// an optional nodeSelector; retried while the API server is away.
pub async fn pod(client: &Client, name: &str, cpu: &str, selector: Option<(&str, &str)>) {
    let mut spec = json!({"schedulerName": "gpu-scheduler", "containers": [{"name": "c",
        "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]});
    if let Some((k, v)) = selector {
        spec["nodeSelector"] = json!({ k: v });
    }
    let p: Pod =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}))
            .unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let start = Instant::now();
    loop {
        match api.create(&PostParams::default(), &p).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => return,
            Err(e) => {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "creating pod {name}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Deletes pods and nodes at once (no grace: no kubelet here).
pub async fn delete_now(client: &Client, pods: &[String], nodes: &[String]) {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    for p in pods {
        api.delete(p, &now).await.unwrap();
    }
    let n: Api<Node> = Api::all(client.clone());
    for name in nodes {
        n.delete(name, &now).await.unwrap();
    }
}

/// `wasmsched run` through `proxy`, reviewing /metrics tokens straight
/// with the API server (so the tests can read metrics during a fault).
pub fn through(proxy: &FaultProxy, dir: &Path, name: &str, args: &[&str]) -> Scheduler {
    let kubeconfig = proxy.kubeconfig(&env().kubeconfig, dir, name);
    let direct = env().kubeconfig.to_str().unwrap().to_string();
    let mut all = vec![
        "--authentication-kubeconfig",
        &direct,
        "--authorization-kubeconfig",
        &direct,
    ];
    all.extend_from_slice(args);
    Scheduler::start(dir, name, &kubeconfig, &all)
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:02}")).collect()
}

/// Issue 30's first report: nodes and pods deleted while the scheduler's
/// watches were down, etcd compacted and the API server restarted so the
/// watches expire (410 Gone) and relist, the Pod watch's relist done
/// seconds before the Node watch's (the proxy holds every Node request
/// back). Before the fix the scheduler bound the new pods to the deleted
/// nodes, which its half-relisted cache showed empty: the deleted pods
/// were gone from it, the deleted nodes not yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_compaction_binds_no_pod_to_a_deleted_node() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&env().servers, &apiserver_url()).await;
    for i in 0..3 {
        node(&client, &format!("keep-{i}"), "4", json!({})).await;
        let name = format!("doomed-{i}");
        node(&client, &name, "4", json!({"pool": "doomed", "doomed": name})).await;
    }
    let sched = through(&proxy, tmp.path(), "relist", &["--leader-elect", "false"]);
    sched.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;

    // The doomed nodes full, then the watches cut.
    let mut old = Vec::new();
    for i in 0..3 {
        for j in 0..4 {
            let name = format!("old-{i}-{j}");
            pod(&client, &name, "1", Some(("doomed", &format!("doomed-{i}")))).await;
            old.push(name);
        }
    }
    wait_all_bound(&audit, &old, Duration::from_secs(60)).await;
    proxy.set_refuse(true);
    proxy.reset_all();

    // Meanwhile: the doomed nodes and their pods deleted, new pods that
    // only the deleted nodes would take, and pods that fit elsewhere.
    let doomed: Vec<String> = (0..3).map(|i| format!("doomed-{i}")).collect();
    delete_now(&client, &old, &doomed).await;
    let mut stranded = Vec::new();
    for i in 0..3 {
        for j in 0..4 {
            let name = format!("new-{i}-{j}");
            pod(&client, &name, "1", Some(("doomed", &format!("doomed-{i}")))).await;
            stranded.push(name);
        }
    }
    let fits = names("fits", 6);
    for n in &fits {
        pod(&client, n, "1", None).await;
    }
    let relists_before = sched
        .metric("wasmsched_watch_relists_total", &[("resource", "nodes")])
        .await;
    compact_etcd(&etcd_url()).await;
    servers("restart-apiserver");

    // The watches come back and relist; the Node watch waits 15 s.
    const HOLD: Duration = Duration::from_secs(15);
    proxy.hold("/api/v1/nodes", HOLD);
    let released = Instant::now() + HOLD;
    proxy.set_refuse(false);
    // While the Node watch is held back the cache is stale: not ready.
    let mut unready = None;
    while Instant::now() < released {
        if let Some((503, why)) = sched.get("/readyz").await {
            unready.get_or_insert(why);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every pod that fits is bound within 60 s of the release.
    wait_all_bound(&audit, &fits, Duration::from_secs(60)).await;

    let on_deleted = audit.bound_to(&["doomed-0", "doomed-1", "doomed-2"]);
    let late: Vec<_> = on_deleted
        .iter()
        .filter(|b| !old.contains(&b.name))
        .map(|b| format!("{} -> {}", b.name, b.node))
        .collect();
    assert!(
        late.is_empty(),
        "{} pod(s) bound to deleted nodes after the relist: {late:?}",
        late.len()
    );
    // The stranded pods wait, reported unschedulable.
    for n in &stranded {
        assert!(audit.of(n).is_none(), "{n} was bound");
    }
    wait_until(
        "a stranded pod reported unschedulable",
        Duration::from_secs(30),
        || async {
            !events_for(&client, NS, "new-0-0", "FailedScheduling")
                .await
                .is_empty()
        },
    )
    .await;
    let held = proxy.requests().1;
    assert!(held > 0, "the proxy held no Node request back");
    let why = unready.expect("/readyz stayed 200 while the Node watch was held back");
    assert!(why.contains("nodes"), "/readyz: {why}");
    assert!(
        sched
            .metric("wasmsched_watch_relists_total", &[("resource", "nodes")])
            .await
            > relists_before,
        "the Node watch's relist was not counted"
    );
    assert!(
        sched.logs().contains("cache stale"),
        "no log line about the stale cache:\n{}",
        sched.logs()
    );
    audit.assert_no_rebinding();
    assert_one_scheduled_event_each(&client, NS).await;
    assert_within_allocatable(&client).await;
}
