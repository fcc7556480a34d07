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

/// Lease timing (duration, renew deadline, retry period) short enough for
/// a fault test to see a step-down and a takeover within seconds.
const SHORT: (&str, &str, &str) = ("4s", "3s", "500ms");

/// What the leader-election fault tests start from: the tests one at a
/// time, the namespace clean, the lease deleted, `nodes` nodes of 4 cpu
/// named `PREFIX-i`, and a configuration naming the lease with `timing`.
struct Start {
    _serial: std::sync::MutexGuard<'static, ()>,
    client: Client,
    tmp: tempfile::TempDir,
    cfg: String,
}

async fn start(lease: &str, prefix: &str, nodes: usize, timing: (&str, &str, &str)) -> Start {
    let serial = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    delete_lease(&client, lease).await;
    for i in 0..nodes {
        node(&client, &format!("{prefix}-{i}"), "4", json!({})).await;
    }
    let cfg = config(tmp.path(), lease, Some(timing));
    Start {
        _serial: serial,
        client,
        tmp,
        cfg,
    }
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
        node(
            &client,
            &name,
            "4",
            json!({"pool": "doomed", "doomed": name}),
        )
        .await;
    }
    let sched = through(&proxy, tmp.path(), "relist", &["--leader-elect", "false"]);
    sched.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;

    // The doomed nodes full, then the watches cut.
    let mut old = Vec::new();
    for i in 0..3 {
        for j in 0..4 {
            let name = format!("old-{i}-{j}");
            pod(
                &client,
                &name,
                "1",
                Some(("doomed", &format!("doomed-{i}"))),
            )
            .await;
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
            pod(
                &client,
                &name,
                "1",
                Some(("doomed", &format!("doomed-{i}"))),
            )
            .await;
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
    assert!(
        !proxy.seen("/api/v1/nodes").is_empty(),
        "the scheduler never asked for Nodes through the proxy"
    );
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
    // The relist is an Event on the scheduler's Lease (kube-system/wasmsched
    // by default).
    wait_until("the CacheStale event", Duration::from_secs(30), || async {
        events_in(&client, "kube-system", "CacheStale")
            .await
            .iter()
            .any(|m| m.contains("watch relists (410 Gone)"))
    })
    .await;
    audit.assert_no_rebinding();
    assert_one_scheduled_event_each(&client, NS).await;
    assert_within_allocatable(&client).await;
}

/// A configuration with leader election on the Lease `default/LEASE`
/// (`lease`: leaseDuration, renewDeadline, retryPeriod), or none.
pub fn config(dir: &Path, lease: &str, timing: Option<(&str, &str, &str)>) -> String {
    let path = dir.join(format!("{lease}.yaml"));
    let election = match timing {
        Some((d, r, p)) => format!(
            "leaderElection:\n  leaseDuration: {d}\n  renewDeadline: {r}\n  retryPeriod: {p}\n  \
             resourceNamespace: default\n  resourceName: {lease}\n"
        ),
        None => format!(
            "leaderElection:\n  leaderElect: false\n  resourceNamespace: default\n  resourceName: {lease}\n"
        ),
    };
    std::fs::write(
        &path,
        format!(
            "{election}clientConnection:\n  qps: 200\n  burst: 200\nprofiles:\n- schedulerName: gpu-scheduler\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

pub async fn lease_holder(client: &Client, name: &str) -> Option<String> {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

pub async fn delete_lease(client: &Client, name: &str) {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// Creates pods `PREFIX-NN` (`cpu` each) at `per_second`, in the
/// background; returns their names at once.
pub fn stream(
    client: &Client,
    prefix: &str,
    n: usize,
    cpu: &'static str,
    per_second: f64,
) -> (Vec<String>, tokio::task::JoinHandle<()>) {
    let all = names(prefix, n);
    let (client, todo) = (client.clone(), all.clone());
    let task = tokio::spawn(async move {
        let gap = Duration::from_secs_f64(1.0 / per_second);
        for name in todo {
            pod(&client, &name, cpu, None).await;
            tokio::time::sleep(gap).await;
        }
    });
    (all, task)
}

/// The pods a replica logged as bound (its binder's debug lines), with
/// when.
pub fn bound_by(sched: &Scheduler) -> Vec<(std::time::SystemTime, String)> {
    sched
        .logs()
        .lines()
        .filter(|l| l.contains("wasmsched::runtime::binder: bound "))
        .filter_map(|l| {
            let at: k8s_openapi::jiff::Timestamp = l.split_whitespace().next()?.parse().ok()?;
            let pod = l
                .split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("pod={NS}/")))?
                .to_string();
            let at = std::time::UNIX_EPOCH + Duration::from_nanos(at.as_nanosecond() as u64);
            Some((at, pod))
        })
        .collect()
}

/// Messages of the Events about the Leases in `default` with `reason`.
pub async fn lease_events(client: &Client, reason: &str) -> Vec<String> {
    events_in(client, "default", reason).await
}

/// Messages of the Events in `namespace` with `reason`.
pub async fn events_in(client: &Client, namespace: &str, reason: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

/// The process is still running (it did not exit on the fault).
pub fn alive(sched: &mut Scheduler) -> bool {
    sched.child.try_wait().unwrap().is_none()
}

/// Every fault test ends with these: no pod bound twice, one Scheduled
/// event at most per pod, no node over its allocatable.
pub async fn invariants(client: &Client, audit: &BindingAudit) {
    audit.assert_no_rebinding();
    assert_one_scheduled_event_each(client, NS).await;
    assert_within_allocatable(client).await;
}

/// An outage of the API server longer than the renew deadline, with two
/// replicas and kube-scheduler's default timings (leaseDuration 15 s,
/// renewDeadline 10 s, retryPeriod 2 s): both lose the API server (their
/// proxies black-hole every connection) for 13 s while pods keep coming
/// (the test writes straight to the API server). Neither exits; the
/// leader steps down before another replica could take the lease; after
/// the API server answers again scheduling resumes within 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_longer_than_the_renew_deadline_with_two_replicas() {
    let lease = "outage-test";
    let Start {
        _serial,
        client,
        tmp,
        cfg,
    } = start(lease, "o", 8, ("15s", "10s", "2s")).await;
    let (pa, pb) = (
        FaultProxy::start(&env().servers, &apiserver_url()).await,
        FaultProxy::start(&env().servers, &apiserver_url()).await,
    );
    let mut a = through(&pa, tmp.path(), "a", &["--config", &cfg]);
    wait_until("a to lead", Duration::from_secs(60), || async {
        lease_holder(&client, lease).await.as_deref() == Some("a")
    })
    .await;
    let mut b = through(&pb, tmp.path(), "b", &["--config", &cfg]);
    b.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    let (before, t) = stream(&client, "before", 20, "500m", 20.0);
    t.await.unwrap();
    wait_all_bound(&audit, &before, Duration::from_secs(60)).await;

    // The outage: both replicas lose the API server.
    pa.set_blackhole(true);
    pb.set_blackhole(true);
    let cut = Instant::now();
    let (during, t) = stream(&client, "during", 20, "500m", 10.0);
    t.await.unwrap();
    // The leader steps down at its renew deadline, before anyone could
    // take the lease (the lease lasts 15 s from its last renewal).
    wait_until("a to step down", Duration::from_secs(14), || async {
        a.metric("leader_election_master_status", &[]).await == 0.0
    })
    .await;
    let stepped_down = cut.elapsed();
    assert_eq!(b.metric("leader_election_master_status", &[]).await, 0.0);
    tokio::time::sleep_until((cut + Duration::from_secs(13)).into()).await;
    assert!(alive(&mut a), "a exited:\n{}", a.logs());
    assert!(alive(&mut b), "b exited:\n{}", b.logs());
    assert!(
        audit
            .bindings()
            .iter()
            .all(|bd| !bd.name.starts_with("during")),
        "a pod was bound during the outage"
    );

    // The API server answers again.
    pa.set_blackhole(false);
    pb.set_blackhole(false);
    let back = Instant::now();
    wait_all_bound(&audit, &during, Duration::from_secs(60)).await;
    let first = audit
        .bindings()
        .into_iter()
        .filter(|bd| bd.name.starts_with("during"))
        .map(|bd| bd.at)
        .min()
        .unwrap();
    let resumed = first.duration_since(back);
    eprintln!(
        "outage: leader stepped down {:.1} s after the cut; first binding {:.2} s after the API server answered again",
        stepped_down.as_secs_f64(),
        resumed.as_secs_f64()
    );
    assert!(
        resumed <= Duration::from_secs(3),
        "scheduling resumed {resumed:?} after the API server answered again"
    );
    let (after, t) = stream(&client, "after", 10, "500m", 20.0);
    t.await.unwrap();
    wait_all_bound(&audit, &after, Duration::from_secs(60)).await;
    assert!(alive(&mut a) && alive(&mut b), "a replica exited");
    let holder = lease_holder(&client, lease).await.unwrap();
    let (leader, standby) = if holder == "a" { (&a, &b) } else { (&b, &a) };
    assert_eq!(
        leader.metric("leader_election_master_status", &[]).await,
        1.0
    );
    assert_eq!(
        standby.metric("leader_election_master_status", &[]).await,
        0.0
    );
    assert!(a.logs().contains("stepped down"), "{}", a.logs());
    invariants(&client, &audit).await;
    assert_eq!(audit.bound_count(), 50);
}

/// The API server unreachable when the scheduler starts: it waits (no
/// exit, no crash loop), serves /healthz, says why it is not ready, and
/// schedules once the API server answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_with_the_api_server_unreachable() {
    let lease = "unreachable-test";
    let Start {
        _serial,
        client,
        tmp,
        cfg,
    } = start(lease, "u", 1, SHORT).await;
    let proxy = FaultProxy::start(&env().servers, &apiserver_url()).await;
    proxy.set_refuse(true);
    let mut sched = through(&proxy, tmp.path(), "early", &["--config", &cfg]);
    let audit = BindingAudit::start(&client, NS).await;
    pod(&client, "waiting", "1", None).await;
    wait_until("/healthz", Duration::from_secs(30), || async {
        sched
            .get_as("/healthz", None)
            .await
            .is_some_and(|(s, _)| s == 200)
    })
    .await;
    // Several seconds unreachable: still running, not ready, saying why.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(alive(&mut sched), "exited:\n{}", sched.logs());
    let (status, why) = sched.get_as("/readyz", None).await.unwrap();
    assert_eq!(status, 503);
    assert!(why.contains("API server not reached"), "/readyz: {why}");
    assert!(sched.logs().contains("API server not reachable; retrying"));
    proxy.set_refuse(false);
    let back = Instant::now();
    sched.wait_ready().await;
    wait_all_bound(&audit, &["waiting".to_string()], Duration::from_secs(30)).await;
    eprintln!(
        "start-up: ready and bound {:.1} s after the API server answered",
        audit
            .of("waiting")
            .unwrap()
            .at
            .duration_since(back)
            .as_secs_f64()
    );
    assert!(alive(&mut sched));
    assert!(
        sched
            .metric("rest_client_requests_total", &[("code", "<error>")])
            .await
            > 0.0,
        "the failed connections were not counted"
    );
    invariants(&client, &audit).await;
}

/// Latency on every byte (300 ms each way) and connections reset in the
/// middle of the watches, while pods stream in: everything is bound, the
/// lost watches are counted and resume where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_and_resets_in_the_middle_of_the_watches() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..5 {
        node(&client, &format!("l-{i}"), "4", json!({})).await;
    }
    let proxy = FaultProxy::start(&env().servers, &apiserver_url()).await;
    let sched = through(&proxy, tmp.path(), "latency", &["--leader-elect", "false"]);
    sched.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    proxy.set_latency(Duration::from_millis(300));
    let (pods, t) = stream(&client, "lat", 36, "500m", 8.0);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        proxy.reset_all();
    }
    t.await.unwrap();
    wait_all_bound(&audit, &pods, Duration::from_secs(90)).await;
    proxy.heal();
    let errors = sched
        .metric("wasmsched_watch_errors_total", &[("resource", "pods")])
        .await;
    assert!(errors >= 1.0, "the lost Pod watch was not counted");
    // Every binding that went through took at least the injected
    // latency both ways: the Bind latency shows it.
    let bind = [("extension_point", "Bind"), ("status", "Success")];
    let fast = sched
        .metric(
            "scheduler_framework_extension_point_duration_seconds_bucket",
            &[bind[0], bind[1], ("le", "0.2048")],
        )
        .await;
    let all = sched
        .metric(
            "scheduler_framework_extension_point_duration_seconds_count",
            &bind,
        )
        .await;
    // (Some bindings lost their answer to a reset: the watch showed them
    // bound, and the retry found them so.)
    assert!(
        all > 0.0 && fast == 0.0,
        "{fast} of {all} bindings faster than the latency"
    );
    assert!(sched.get("/readyz").await.is_some_and(|(s, _)| s == 200));
    invariants(&client, &audit).await;
}

/// The link cut to 8 KB/s each way: bindings and the watches crawl, the
/// scheduler keeps scheduling from its cache (bindings wait in the
/// binder), everything is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bandwidth_limit() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..5 {
        node(&client, &format!("bw-{i}"), "4", json!({})).await;
    }
    let proxy = FaultProxy::start(&env().servers, &apiserver_url()).await;
    let sched = through(
        &proxy,
        tmp.path(),
        "bandwidth",
        &["--leader-elect", "false"],
    );
    sched.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    proxy.set_bandwidth(Some(8 * 1024));
    let (pods, t) = stream(&client, "bw", 30, "500m", 10.0);
    t.await.unwrap();
    wait_all_bound(&audit, &pods, Duration::from_secs(120)).await;
    proxy.heal();
    // A binding (its request and answer, over 1 KB) cannot take less
    // than a tenth of a second at 8 KB/s: the Bind latency shows it.
    let bind = [("extension_point", "Bind"), ("status", "Success")];
    let quick = sched
        .metric(
            "scheduler_framework_extension_point_duration_seconds_bucket",
            &[bind[0], bind[1], ("le", "0.1024")],
        )
        .await;
    let all = sched
        .metric(
            "scheduler_framework_extension_point_duration_seconds_count",
            &bind,
        )
        .await;
    assert!(
        all >= 30.0 && quick == 0.0,
        "{quick} of {all} bindings under 102 ms"
    );
    invariants(&client, &audit).await;
}

/// API Priority and Fairness throttles the scheduler's ServiceAccount:
/// its bindings go to a priority level of one seat that rejects what does
/// not fit (429 with Retry-After). The scheduler honours Retry-After,
/// retries in place, keeps scheduling, reports it (metric, log, Event),
/// and binds everything.
///
/// The pods exist before the scheduler starts, so its first pass schedules
/// all of them at once and their bindings (one task each) are in flight
/// together: the level's one seat rejects all but one of every batch
/// whatever the machine's speed. Pods created one by one at a rate would
/// be throttled only when a binding outlasts the gap between two pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_throttling() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS, "wasmsched"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let deploy = repo().join("deploy");
    crate::deploy::apply(&[deploy.join("serviceaccount.yaml"), deploy.join("rbac.yaml")]);
    let flow = tmp.path().join("flow.yaml");
    std::fs::write(&flow, APF_OBJECTS).unwrap();
    crate::deploy::apply(std::slice::from_ref(&flow));
    for i in 0..5 {
        node(&client, &format!("apf-{i}"), "4", json!({})).await;
    }
    let pods = names("apf", 80);
    futures::future::join_all(pods.iter().map(|p| pod(&client, p, "250m", None))).await;
    let audit = BindingAudit::start(&client, NS).await;
    let sa = crate::deploy::service_account_kubeconfig(tmp.path());
    let cfg = config(tmp.path(), "apf-test", None);
    let direct = env().kubeconfig.to_str().unwrap().to_string();
    let sched = Scheduler::start(
        tmp.path(),
        "apf",
        &sa,
        &[
            "--config",
            &cfg,
            "--authentication-kubeconfig",
            &direct,
            "--authorization-kubeconfig",
            &direct,
        ],
    );
    sched.wait_ready().await;
    let result = tokio::time::timeout(
        Duration::from_secs(150),
        wait_all_bound(&audit, &pods, Duration::from_secs(150)),
    )
    .await;
    let _ = crate::deploy::kubectl(&["delete", "-f", flow.to_str().unwrap()]);
    result.unwrap();
    let throttled = sched
        .metric("rest_client_requests_total", &[("code", "429")])
        .await;
    let retried = sched
        .metric("rest_client_request_retries_total", &[("code", "429")])
        .await;
    assert!(
        throttled > 0.0,
        "the API server throttled nothing: the test proves nothing"
    );
    assert!(retried > 0.0, "429s were not retried");
    wait_until(
        "the APIThrottled event",
        Duration::from_secs(30),
        || async { !lease_events(&client, "APIThrottled").await.is_empty() },
    )
    .await;
    assert!(
        sched.logs().contains("the API server throttled"),
        "{}",
        sched.logs()
    );
    eprintln!("APF: {throttled} answers 429, {retried} retries");
    invariants(&client, &audit).await;
}

/// The scheduler's bindings (`create pods/binding` by deploy/'s
/// ServiceAccount) in a priority level of one seat that rejects: with the
/// API server's 1200 seats shared by nominal shares, a level of 1 share
/// beside one of 2000 gets a single seat.
const APF_OBJECTS: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: wasmsched-test-throttled}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: wasmsched-test-dilution}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 2000
    lendablePercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: wasmsched-test-throttled}
spec:
  priorityLevelConfiguration: {name: wasmsched-test-throttled}
  matchingPrecedence: 100
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount: {name: wasmsched, namespace: wasmsched}
    resourceRules:
    - verbs: [create]
      apiGroups: [""]
      resources: [pods/binding]
      namespaces: ["*"]
"#;

/// etcd stopped for 15 s under a single replica with leader election: the
/// API server answers with errors (or not at all), the replica steps down
/// and takes the lease back once etcd is back; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_stopped_for_15_seconds() {
    let lease = "etcd-test";
    let Start {
        _serial,
        client,
        tmp,
        cfg,
    } = start(lease, "e", 5, SHORT).await;
    let mut sched = Scheduler::start(tmp.path(), "etcd", &env().kubeconfig, &["--config", &cfg]);
    sched.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    let (before, t) = stream(&client, "pre", 15, "500m", 20.0);
    t.await.unwrap();
    wait_all_bound(&audit, &before, Duration::from_secs(60)).await;
    servers("stop-etcd");
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(alive(&mut sched), "exited:\n{}", sched.logs());
    let down = sched.metric("leader_election_master_status", &[]).await;
    servers("start-etcd");
    let (after, t) = stream(&client, "post", 15, "500m", 20.0);
    t.await.unwrap();
    wait_all_bound(&audit, &after, Duration::from_secs(90)).await;
    assert_eq!(down, 0.0, "still leading with etcd down for 15 s");
    wait_until("the lease back", Duration::from_secs(30), || async {
        sched.metric("leader_election_master_status", &[]).await == 1.0
    })
    .await;
    assert!(sched.logs().contains("stepped down"), "{}", sched.logs());
    // Requests without an answer (the lease's, given up after a second)
    // are counted, and the step-down is an Event on the Lease.
    let failed = sched
        .metric("rest_client_requests_total", &[("code", "<error>")])
        .await
        + sched
            .metric("rest_client_requests_total", &[("code", "500")])
            .await
        + sched
            .metric("rest_client_requests_total", &[("code", "504")])
            .await;
    assert!(
        failed > 0.0,
        "no failed request counted while etcd was down"
    );
    wait_until(
        "the LeaderElection event",
        Duration::from_secs(30),
        || async {
            lease_events(&client, "LeaderElection")
                .await
                .iter()
                .any(|m| m.starts_with("etcd stopped leading"))
        },
    )
    .await;
    assert!(alive(&mut sched));
    invariants(&client, &audit).await;
}

/// The API server frozen (SIGSTOP) for 20 s: connections hang rather than
/// fail. Requests time out, the leader steps down, and after SIGCONT it
/// takes the lease back and binds what arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_frozen_for_20_seconds() {
    let lease = "frozen-api-test";
    let Start {
        _serial,
        client,
        tmp,
        cfg,
    } = start(lease, "fa", 5, SHORT).await;
    let mut sched = Scheduler::start(tmp.path(), "frozen", &env().kubeconfig, &["--config", &cfg]);
    sched.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    let (before, t) = stream(&client, "pre", 15, "500m", 20.0);
    t.await.unwrap();
    wait_until("some pods bound", Duration::from_secs(30), || async {
        audit.bound_count() >= 5
    })
    .await;
    signal_server("apiserver", "STOP");
    tokio::time::sleep(Duration::from_secs(5)).await;
    // /metrics needs the API server (token review): the leader gauge is
    // read from the log instead.
    let stepped = sched.logs().contains("stepped down");
    tokio::time::sleep(Duration::from_secs(15)).await;
    signal_server("apiserver", "CONT");
    assert!(alive(&mut sched), "exited:\n{}", sched.logs());
    assert!(
        stepped,
        "still leading 5 s into the freeze:\n{}",
        sched.logs()
    );
    let (after, t) = stream(&client, "post", 15, "500m", 20.0);
    t.await.unwrap();
    let mut all = before.clone();
    all.extend(after);
    wait_all_bound(&audit, &all, Duration::from_secs(90)).await;
    assert!(alive(&mut sched));
    invariants(&client, &audit).await;
}

/// The leader frozen (SIGSTOP) for 12 s with bindings in flight: the
/// standby takes over and finishes; when the old leader wakes its
/// `leader_election_master_status` says 0 at once, it binds nothing more,
/// and it stays up as a candidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_frozen_with_bindings_in_flight() {
    let lease = "frozen-leader-test";
    let Start {
        _serial,
        client,
        tmp,
        cfg,
    } = start(lease, "fl", 10, SHORT).await;
    let mut a = Scheduler::start(
        tmp.path(),
        "a",
        &env().kubeconfig,
        &["--config", &cfg, "--bind-delay", "500ms"],
    );
    wait_until("a to lead", Duration::from_secs(60), || async {
        lease_holder(&client, lease).await.as_deref() == Some("a")
    })
    .await;
    let b = Scheduler::start(tmp.path(), "b", &env().kubeconfig, &["--config", &cfg]);
    b.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    let (pods, t) = stream(&client, "fz", 60, "500m", 100.0);
    t.await.unwrap();
    wait_until("a to bind some", Duration::from_secs(60), || async {
        audit.bound_count() >= 10
    })
    .await;
    signal_pid(a.child.id(), "STOP");
    let frozen = Instant::now();
    wait_all_bound(&audit, &pods, Duration::from_secs(90)).await;
    tokio::time::sleep_until((frozen + Duration::from_secs(12)).into()).await;
    signal_pid(a.child.id(), "CONT");
    let woke = std::time::SystemTime::now();
    // Its first answer after waking.
    let status = a.metric("leader_election_master_status", &[]).await;
    assert_eq!(status, 0.0, "a says it leads right after waking");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let late: Vec<_> = bound_by(&a)
        .into_iter()
        .filter(|(t, _)| *t > woke)
        .collect();
    assert!(late.is_empty(), "a bound after waking: {late:?}");
    assert!(alive(&mut a), "a exited:\n{}", a.logs());
    assert_eq!(a.metric("leader_election_master_status", &[]).await, 0.0);
    assert_eq!(b.metric("leader_election_master_status", &[]).await, 1.0);
    assert_eq!(lease_holder(&client, lease).await.as_deref(), Some("b"));
    assert_eq!(
        b.metric("wasmsched_bindings_total", &[("result", "conflict")])
            .await,
        0.0
    );
    invariants(&client, &audit).await;
}

/// A network partition between the leader and the API server (its proxy
/// black-holes every connection) while pods stream in; the standby, which
/// still reaches the API server, takes over. The old leader's last
/// binding comes before the new leader's first (in the API server's
/// order); after the partition heals the old leader is a standby, up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_between_the_leader_and_the_api_server() {
    let lease = "partition-test";
    let Start {
        _serial,
        client,
        tmp,
        cfg,
    } = start(lease, "pt", 10, SHORT).await;
    let (pa, pb) = (
        FaultProxy::start(&env().servers, &apiserver_url()).await,
        FaultProxy::start(&env().servers, &apiserver_url()).await,
    );
    let mut a = through(
        &pa,
        tmp.path(),
        "a",
        &["--config", &cfg, "--bind-delay", "200ms"],
    );
    wait_until("a to lead", Duration::from_secs(60), || async {
        lease_holder(&client, lease).await.as_deref() == Some("a")
    })
    .await;
    let mut b = through(&pb, tmp.path(), "b", &["--config", &cfg]);
    b.wait_ready().await;
    let audit = BindingAudit::start(&client, NS).await;
    let (pods, t) = stream(&client, "pt", 60, "500m", 6.0);
    wait_until("a to bind some", Duration::from_secs(60), || async {
        audit.bound_count() >= 10
    })
    .await;
    pa.set_blackhole(true);
    wait_until("b to lead", Duration::from_secs(30), || async {
        lease_holder(&client, lease).await.as_deref() == Some("b")
    })
    .await;
    t.await.unwrap();
    wait_all_bound(&audit, &pods, Duration::from_secs(90)).await;
    pa.set_blackhole(false);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The API server's order: every binding b did not make (a's, even
    // those whose answer the partition swallowed) precedes b's first.
    let by_b: std::collections::HashSet<String> =
        bound_by(&b).into_iter().map(|(_, p)| p).collect();
    let by_a: std::collections::HashSet<String> =
        bound_by(&a).into_iter().map(|(_, p)| p).collect();
    assert!(
        !by_a.is_empty() && !by_b.is_empty(),
        "a: {by_a:?}, b: {by_b:?}"
    );
    let order = audit.bindings();
    let first_b = order.iter().position(|bd| by_b.contains(&bd.name)).unwrap();
    let last_other = order
        .iter()
        .rposition(|bd| !by_b.contains(&bd.name))
        .unwrap();
    assert!(
        last_other < first_b,
        "a binding not by b ({}) after b's first ({})",
        order[last_other].name,
        order[first_b].name
    );
    assert!(
        by_a.is_disjoint(&by_b),
        "a pod bound by both: {:?}",
        by_a.intersection(&by_b)
    );
    eprintln!(
        "partition: a bound {} pods, b {}, {} by a unconfirmed to it",
        by_a.len(),
        by_b.len(),
        order.len() - by_a.len() - by_b.len()
    );
    assert!(alive(&mut a) && alive(&mut b), "a replica exited");
    assert_eq!(a.metric("leader_election_master_status", &[]).await, 0.0);
    assert_eq!(b.metric("leader_election_master_status", &[]).await, 1.0);
    assert!(a.logs().contains("stepped down"), "{}", a.logs());
    invariants(&client, &audit).await;
}
