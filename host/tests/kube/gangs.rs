//! Gang scheduling against the real API server, with the PodGroup CRD of
//! `deploy/components/gangs` installed: whole groups or nothing, timeouts
//! that release every reservation, members that arrive over time, an
//! NVLink-domain group, a pod deleted while it waits, the leader killed
//! while members wait, and the component's RBAC.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::deploy::{
    apply, dry_run, install_service_monitor_crd, runnable_config_with, service_account_kubeconfig,
};
use crate::env::*;

const NS: &str = "gangs";

fn pod_group_api(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "scheduling.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    Api::namespaced_with(client.clone(), NS, &ar)
}

/// A clean namespace, the CRD installed, no PodGroups left.
async fn setup(client: &Client) {
    reset(client, &[NS]).await;
    let crd = repo().join("deploy/components/gangs/crd.yaml");
    crate::deploy::apply_crd(&crd, "podgroups.scheduling.x-k8s.io");
    let _ = pod_group_api(client)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
}

/// A configuration with Coscheduling in `gpu-scheduler`.
fn config(dir: &Path, args: &str, leader: Option<&str>) -> PathBuf {
    let election = match leader {
        Some(lease) => format!(
            "leaderElection:\n  leaseDuration: 4s\n  renewDeadline: 3s\n  retryPeriod: 500ms\n  \
             resourceNamespace: default\n  resourceName: {lease}\n"
        ),
        None => String::new(),
    };
    let path = dir.join("gangs.yaml");
    std::fs::write(
        &path,
        format!(
            "{election}clientConnection:\n  qps: 200\n  burst: 200\n\
             profiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    multiPoint:\n      enabled:\n      \
             - {{name: Coscheduling}}\n  pluginConfig:\n  - name: Coscheduling\n    args: {args}\n"
        ),
    )
    .unwrap();
    path
}

fn start(dir: &Path, name: &str, config: &Path, extra: &[&str]) -> Scheduler {
    let mut args = vec!["--config", config.to_str().unwrap()];
    args.extend_from_slice(extra);
    Scheduler::start(dir, name, &env().kubeconfig, &args)
}

async fn ready(s: &Scheduler) {
    wait_until(
        "the scheduler to be ready",
        Duration::from_secs(60),
        || async { s.get("/readyz").await.is_some_and(|(c, _)| c == 200) },
    )
    .await;
}

async fn gpu_node(client: &Client, name: &str, gpus: u32, labels: Value) {
    let mut l = json!({"kubernetes.io/hostname": name});
    if let (Some(m), Some(extra)) = (l.as_object_mut(), labels.as_object()) {
        m.extend(extra.clone());
    }
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": l},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110",
            "nvidia.com/gpu": gpus.to_string()}}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

async fn create_group(client: &Client, name: &str, min: u32, extra: Value) {
    let mut obj = json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min}
    });
    if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            match (o.get_mut(k), v) {
                (Some(Value::Object(a)), Value::Object(b)) => a.extend(b.clone()),
                _ => {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
    }
    let pg: DynamicObject = serde_json::from_value(obj).unwrap();
    pod_group_api(client)
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
}

/// A pod asking for `gpus`, in `group` when given, bound to `node` when
/// given.
async fn create_pod(
    client: &Client,
    name: &str,
    group: Option<&str>,
    gpus: u32,
    node: Option<&str>,
) {
    let labels = group.map_or(json!({}), |g| json!({"scheduling.x-k8s.io/pod-group": g}));
    let mut spec = json!({"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
        "resources": {"requests": {"cpu": "100m"}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": spec
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

/// Pod name -> node, for pods whose name starts with `prefix`.
async fn nodes_of(client: &Client, prefix: &str) -> BTreeMap<String, Option<String>> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| {
            let name = p.metadata.name?;
            name.starts_with(prefix)
                .then(|| (name, p.spec.and_then(|s| s.node_name)))
        })
        .collect()
}

async fn bound(client: &Client, prefix: &str) -> usize {
    nodes_of(client, prefix)
        .await
        .values()
        .filter(|n| n.is_some())
        .count()
}

async fn status(client: &Client, group: &str) -> Value {
    let pg = pod_group_api(client).get(group).await.unwrap();
    pg.data.get("status").cloned().unwrap_or(Value::Null)
}

/// The message of each `reason` event about pods named `prefix*`.
async fn messages(client: &Client, prefix: &str, reason: &str) -> Vec<String> {
    let mut out = Vec::new();
    for name in nodes_of(client, prefix).await.keys() {
        for e in events_for(client, NS, name, reason).await {
            out.push(e.message.unwrap_or_default());
        }
    }
    out
}

/// Members of `prefix` with a `Waiting` event.
async fn waiting(client: &Client, prefix: &str) -> usize {
    let mut n = 0;
    for name in nodes_of(client, prefix).await.keys() {
        n += usize::from(!events_for(client, NS, name, "Waiting").await.is_empty());
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gpu_gangs_that_cannot_both_fit_one_whole_the_other_none() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..3 {
        gpu_node(&client, &format!("g{i}"), 4, json!({})).await;
    }
    create_group(&client, "a", 8, json!({})).await;
    // Creation timestamps have one-second resolution: `b` is younger.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_group(&client, "b", 8, json!({})).await;
    for i in 0..8 {
        create_pod(&client, &format!("b-{i}"), Some("b"), 1, None).await;
        create_pod(&client, &format!("a-{i}"), Some("a"), 1, None).await;
    }
    let cfg = config(tmp.path(), "{podGroupBackoffSeconds: 2}", None);
    let sched = start(tmp.path(), "gangs-ab", &cfg, &["--leader-elect", "false"]);
    ready(&sched).await;
    wait_until("gang a bound", Duration::from_secs(90), || async {
        bound(&client, "a-").await == 8
    })
    .await;
    wait_until("gang b told why", Duration::from_secs(60), || async {
        messages(&client, "b-", "FailedScheduling").await.len() >= 8
    })
    .await;
    // b retries after each backoff; across several, none of it binds.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(bound(&client, "b-").await, 0, "log:\n{}", sched.logs());
    for m in messages(&client, "b-", "FailedScheduling").await {
        assert!(m.to_lowercase().contains("pod group gangs/b"), "{m}");
    }
    let a_waits = messages(&client, "a-", "Waiting").await;
    assert_eq!(
        a_waits.len(),
        7,
        "each member but the last waited: {a_waits:?}"
    );
    assert!(
        a_waits
            .iter()
            .any(|m| m.contains("7 of 8 members reserved")),
        "{a_waits:?}"
    );
    wait_until("the statuses", Duration::from_secs(30), || async {
        status(&client, "a").await["phase"] == "Scheduled"
    })
    .await;
    assert_eq!(status(&client, "a").await["scheduled"], 8);
    let b = status(&client, "b").await;
    assert_eq!(b["scheduled"].as_u64().unwrap_or(0), 0);
    assert_ne!(b["phase"], "Scheduled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_releases_every_reservation_for_other_pods() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..3 {
        gpu_node(&client, &format!("t{i}"), 3, json!({})).await;
    }
    let cfg = config(tmp.path(), "{podGroupBackoffSeconds: 30}", None);
    let sched = start(
        tmp.path(),
        "gangs-timeout",
        &cfg,
        &["--leader-elect", "false"],
    );
    ready(&sched).await;
    // 9 GPUs for a group of 10: nine reserve and, within 10% of
    // minMember, wait for the tenth until the group's timeout.
    create_group(
        &client,
        "g",
        10,
        json!({"spec": {"scheduleTimeoutSeconds": 8}}),
    )
    .await;
    for i in 0..10 {
        create_pod(&client, &format!("g-{i}"), Some("g"), 1, None).await;
    }
    wait_until("nine members waiting", Duration::from_secs(60), || async {
        waiting(&client, "g-").await == 9
    })
    .await;
    assert_eq!(bound(&client, "g-").await, 0);
    // Other pods need the GPUs the group holds.
    for i in 0..9 {
        create_pod(&client, &format!("other-{i}"), None, 1, None).await;
    }
    wait_until("the others bound", Duration::from_secs(90), || async {
        bound(&client, "other-").await == 9
    })
    .await;
    assert_eq!(bound(&client, "g-").await, 0, "log:\n{}", sched.logs());
    let failed = messages(&client, "g-", "FailedScheduling").await;
    assert!(
        failed
            .iter()
            .any(|m| m.contains("timed out after 8s with 9 of 10 members reserved")),
        "{failed:?}"
    );
    wait_until("the group's status", Duration::from_secs(30), || async {
        let s = status(&client, "g").await;
        s["phase"] == "PreScheduling" && s["scheduled"].as_u64().unwrap_or(0) == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_created_over_several_seconds_bind_together() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    gpu_node(&client, "s0", 8, json!({})).await;
    let cfg = config(tmp.path(), "{}", None);
    let sched = start(tmp.path(), "gangs-slow", &cfg, &["--leader-elect", "false"]);
    ready(&sched).await;
    create_group(&client, "slow", 4, json!({})).await;
    for i in 0..4 {
        create_pod(&client, &format!("slow-{i}"), Some("slow"), 1, None).await;
        if i < 3 {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert_eq!(
                bound(&client, "slow-").await,
                0,
                "bound before the group was complete"
            );
        }
    }
    wait_until("the group bound", Duration::from_secs(60), || async {
        bound(&client, "slow-").await == 4
    })
    .await;
    let early = messages(&client, "slow-0", "FailedScheduling").await;
    assert!(
        early
            .iter()
            .any(|m| m.contains("pod group gangs/slow has 1 pod(s), fewer than its minMember 4")),
        "{early:?}\nlog:\n{}",
        sched.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_nvlink_group_lands_in_the_only_domain_that_fits() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let clique = |d: &str| json!({"nvidia.com/gpu.clique": d});
    // nvl-a: 8 GPUs free over two nodes; nvl-b: 4 of 8 free; nvl-c: 4.
    gpu_node(&client, "a1", 4, clique("nvl-a")).await;
    gpu_node(&client, "a2", 4, clique("nvl-a")).await;
    gpu_node(&client, "b1", 8, clique("nvl-b")).await;
    gpu_node(&client, "c1", 2, clique("nvl-c")).await;
    gpu_node(&client, "c2", 2, clique("nvl-c")).await;
    create_pod(&client, "busy", None, 4, Some("b1")).await;
    let required = |d: &str| json!({"metadata": {"annotations": {"scheduling.wasmsched.io/required-topology": d}}});
    create_group(&client, "nvl", 4, required("nvidia.com/gpu.clique")).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_group(&client, "big", 2, required("nvidia.com/gpu.clique")).await;
    for i in 0..4 {
        create_pod(&client, &format!("nvl-{i}"), Some("nvl"), 2, None).await;
    }
    for i in 0..2 {
        create_pod(&client, &format!("big-{i}"), Some("big"), 4, None).await;
    }
    let cfg = config(tmp.path(), "{}", None);
    let sched = start(tmp.path(), "gangs-nvl", &cfg, &["--leader-elect", "false"]);
    ready(&sched).await;
    wait_until("the group bound", Duration::from_secs(60), || async {
        bound(&client, "nvl-").await == 4
    })
    .await;
    let nodes = nodes_of(&client, "nvl-").await;
    assert!(
        nodes
            .values()
            .all(|n| matches!(n.as_deref(), Some("a1" | "a2"))),
        "{nodes:?}"
    );
    // 16 GPUs are free elsewhere, but no domain has 8 for `big`.
    wait_until("big told why", Duration::from_secs(60), || async {
        messages(&client, "big-", "FailedScheduling").await.len() >= 2
    })
    .await;
    assert_eq!(bound(&client, "big-").await, 0, "log:\n{}", sched.logs());
    for m in messages(&client, "big-", "FailedScheduling").await {
        assert!(
            m.contains("no nvidia.com/gpu.clique domain has room"),
            "{m}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_deleted_while_waiting_releases_the_group() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..3 {
        gpu_node(&client, &format!("d{i}"), 3, json!({})).await;
    }
    let cfg = config(tmp.path(), "{podGroupBackoffSeconds: 60}", None);
    let sched = start(
        tmp.path(),
        "gangs-delete",
        &cfg,
        &["--leader-elect", "false"],
    );
    ready(&sched).await;
    create_group(
        &client,
        "g",
        10,
        json!({"spec": {"scheduleTimeoutSeconds": 300}}),
    )
    .await;
    for i in 0..10 {
        create_pod(&client, &format!("g-{i}"), Some("g"), 1, None).await;
    }
    wait_until("nine members waiting", Duration::from_secs(60), || async {
        waiting(&client, "g-").await == 9
    })
    .await;
    let mut victim = String::new();
    for name in nodes_of(&client, "g-").await.keys() {
        if !events_for(&client, NS, name, "Waiting").await.is_empty() {
            victim = name.clone();
            break;
        }
    }
    assert!(!victim.is_empty());
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete(&victim, &force)
        .await
        .unwrap();
    // Every reservation is released (long before the 300 s timeout): a
    // pod needing a whole node's GPUs fits.
    create_pod(&client, "whole-node", None, 3, None).await;
    wait_until("whole-node bound", Duration::from_secs(60), || async {
        bound(&client, "whole-node").await == 1
    })
    .await;
    assert_eq!(bound(&client, "g-").await, 0, "log:\n{}", sched.logs());
    let failed = messages(&client, "g-", "FailedScheduling").await;
    let why = format!("pod group gangs/g gangs/{victim} gave up its reservation");
    assert!(failed.iter().any(|m| m.contains(&why)), "{failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_while_members_wait_the_new_leader_binds_all_or_none() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let lease = "gangs-failover";
    let _ = Api::<Lease>::namespaced(client.clone(), "default")
        .delete(lease, &DeleteParams::default())
        .await;
    for i in 0..3 {
        gpu_node(&client, &format!("f{i}"), 3, json!({})).await;
    }
    let cfg = config(tmp.path(), "{podGroupBackoffSeconds: 2}", Some(lease));
    let mut a = start(tmp.path(), "a", &cfg, &[]);
    let holder = || async {
        Api::<Lease>::namespaced(client.clone(), "default")
            .get_opt(lease)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
    };
    wait_until("a to lead", Duration::from_secs(60), || async {
        holder().await.as_deref() == Some("a")
    })
    .await;
    let b = start(tmp.path(), "b", &cfg, &[]);
    ready(&b).await;
    create_group(
        &client,
        "g",
        10,
        json!({"spec": {"scheduleTimeoutSeconds": 300}}),
    )
    .await;
    for i in 0..10 {
        create_pod(&client, &format!("g-{i}"), Some("g"), 1, None).await;
    }
    wait_until(
        "nine members waiting on a",
        Duration::from_secs(60),
        || async { waiting(&client, "g-").await == 9 },
    )
    .await;
    a.kill();
    assert_eq!(
        bound(&client, "g-").await,
        0,
        "a bound a member before it died"
    );
    wait_until("b to lead", Duration::from_secs(60), || async {
        holder().await.as_deref() == Some("b")
    })
    .await;
    // b rebuilds the group from the API and reserves nine again: none
    // binds while the tenth cannot.
    wait_until("b's members waiting", Duration::from_secs(60), || async {
        messages(&client, "g-", "Waiting").await.len() >= 18
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(bound(&client, "g-").await, 0, "b log:\n{}", b.logs());
    // A tenth GPU: b binds the whole group.
    gpu_node(&client, "f3", 1, json!({})).await;
    wait_until(
        "the whole group bound by b",
        Duration::from_secs(60),
        || async { bound(&client, "g-").await == 10 },
    )
    .await;
    // Events trail the bindings (their own rate budget): wait for each.
    for name in nodes_of(&client, "g-").await.keys() {
        wait_until(
            &format!("{name}'s Scheduled event"),
            Duration::from_secs(30),
            || async { !events_for(&client, NS, name, "Scheduled").await.is_empty() },
        )
        .await;
        let ev = events_for(&client, NS, name, "Scheduled").await;
        assert_eq!(ev.len(), 1, "{name}: {ev:?}");
        assert_eq!(ev[0].reporting_instance.as_deref(), Some("b"));
    }
    wait_until("the status", Duration::from_secs(30), || async {
        let s = status(&client, "g").await;
        s["phase"] == "Scheduled" && s["scheduled"] == 10
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gangs_component_is_accepted_and_its_rbac_suffices() {
    let _g = serial();
    let client = client().await;
    setup(&client).await;
    reset(&client, &["wasmsched"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let deploy = repo().join("deploy");
    let component = deploy.join("components/gangs");
    install_service_monitor_crd(tmp.path());
    let with = dry_run(&component_enabled(tmp.path()));
    for kind in [
        "customresourcedefinition.apiextensions.k8s.io/podgroups.scheduling.x-k8s.io",
        "clusterrole.rbac.authorization.k8s.io/wasmsched-gangs",
        "clusterrolebinding.rbac.authorization.k8s.io/wasmsched-gangs",
    ] {
        assert!(
            with.contains(kind),
            "{kind} missing with the component: {with}"
        );
    }
    // Coscheduling is in the default profile; the component's fragment
    // names it in the gpu-scheduler profile of deploy/config.yaml, and
    // `profiles` says so.
    let with_fragment = runnable_config_with(&["gangs"], tmp.path());
    let profiles = |path: &Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .args(["profiles", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let fragment = with_fragment.with_file_name("fragment-gangs.yaml");
    let named = format!(
        "from file {} (profiles[0].plugins.multiPoint): Coscheduling\n",
        fragment.display()
    );
    assert!(profiles(&with_fragment).contains(&named));
    let base = profiles(&deploy.join("config.yaml"));
    assert!(base.contains("  queuesort: Coscheduling\n"), "{base}");
    assert!(
        !base.contains("(profiles[0].plugins.multiPoint): Coscheduling"),
        "{base}"
    );

    // Run as the ServiceAccount with the base role and the component's.
    apply(&[
        deploy.join("serviceaccount.yaml"),
        deploy.join("rbac.yaml"),
        component.join("rbac.yaml"),
    ]);
    let config_path = runnable_config_with(&["gangs"], tmp.path());
    let sa = service_account_kubeconfig(tmp.path());
    let _ = Api::<Lease>::namespaced(client.clone(), "wasmsched")
        .delete("wasmsched", &DeleteParams::default())
        .await;
    gpu_node(&client, "r0", 4, json!({})).await;
    create_group(&client, "rbac", 2, json!({})).await;
    for i in 0..2 {
        create_pod(&client, &format!("rbac-{i}"), Some("rbac"), 1, None).await;
    }
    let sched = Scheduler::start(
        tmp.path(),
        "gangs-rbac",
        &sa,
        &["--config", config_path.to_str().unwrap()],
    );
    wait_until(
        "bound with its status written",
        Duration::from_secs(90),
        || async {
            bound(&client, "rbac-").await == 2
                && status(&client, "rbac").await["phase"] == "Scheduled"
        },
    )
    .await;
    assert!(
        !sched.logs().contains("forbidden"),
        "a call was refused: {}",
        sched.logs()
    );
}

/// `deploy/` copied to `dir` with the gangs component enabled.
fn component_enabled(dir: &Path) -> PathBuf {
    crate::deploy::deploy_with_components(dir, &["gangs"])
}
