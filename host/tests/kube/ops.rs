//! Operated like kube-scheduler: klog's `-v=2` lines (one per binding and
//! per failed attempt) in klog's JSON shape, nothing of them at the
//! default level.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::env::*;

const NS: &str = "ops";

/// `wasmsched run` with `args`, logging as they say (no WASMSCHED_LOG).
fn start(dir: &std::path::Path, name: &str, args: &[&str]) -> Scheduler {
    let port = free_port();
    let log = dir.join(format!("{name}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("run")
        .arg("--kubeconfig")
        .arg(&env().kubeconfig)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--identity", name, "--leader-elect=false"])
        .args(args)
        .env_remove("WASMSCHED_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn wasmsched");
    Scheduler { child, port, log }
}

async fn cluster(client: &Client) {
    reset(client, &[NS]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "ops-node"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
}

async fn pod(client: &Client, name: &str, cpu: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulerName": "gpu-scheduler",
            "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu}}}]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
}

async fn bound(client: &Client, name: &str) -> bool {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.get(name).await.is_ok_and(|p| is_bound(&p))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_logs_each_binding_and_failure_in_klogs_json() {
    let _g = serial();
    let client = client().await;
    cluster(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(
        tmp.path(),
        "ops-json",
        &["-v=2", "--logging-format", "json"],
    );
    sched.wait_ready().await;
    pod(&client, "fits", "1").await;
    pod(&client, "too-big", "100").await;
    wait_until("fits bound", Duration::from_secs(60), || {
        bound(&client, "fits")
    })
    .await;
    // The API server shows the binding before the scheduler's binder logs
    // it, so wait for both lines rather than for the pod.
    wait_until(
        "the binding and the failure logged",
        Duration::from_secs(60),
        || async {
            let logs = sched.logs();
            logs.contains("Successfully bound pod to node")
                && logs.contains("Unable to schedule pod")
        },
    )
    .await;
    let logs = sched.logs();
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    for l in &lines {
        assert!(l["ts"].is_f64(), "{l}");
        assert!(l["msg"].is_string(), "{l}");
    }
    let bound_line = lines
        .iter()
        .find(|l| l["msg"] == "Successfully bound pod to node")
        .unwrap_or_else(|| panic!("no binding line:\n{logs}"));
    assert_eq!(bound_line["pod"], json!({"name": "fits", "namespace": NS}));
    assert_eq!(bound_line["node"], json!({"name": "ops-node"}));
    assert_eq!(bound_line["v"], 2);
    let failed = lines
        .iter()
        .find(|l| l["msg"] == "Unable to schedule pod; no fit; waiting")
        .unwrap();
    assert_eq!(failed["pod"], json!({"name": "too-big", "namespace": NS}));
    let err = failed["err"].as_str().unwrap();
    assert!(
        err.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{err}"
    );
    assert_eq!(failed["v"], 2);
    // Compiling the built-in components logs nothing of the compiler's.
    assert!(
        !logs.contains("cranelift") && !logs.contains("wasmtime"),
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_level_logs_no_binding_lines() {
    let _g = serial();
    let client = client().await;
    cluster(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(tmp.path(), "ops-quiet", &[]);
    sched.wait_ready().await;
    pod(&client, "quiet", "1").await;
    wait_until("quiet bound", Duration::from_secs(60), || {
        bound(&client, "quiet")
    })
    .await;
    let logs = sched.logs();
    assert!(!logs.contains("Successfully bound"), "{logs}");
}

/// Events as kube-scheduler's recorder writes them, read back through
/// `events.k8s.io/v1`: `Scheduled` (action `Binding`) and
/// `FailedScheduling` (action `Scheduling`) with kube-scheduler's notes,
/// reported by the profile; repeats of the failure patched into the
/// event's series, not new events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_events_k8s_io_v1_with_series() {
    use k8s_openapi::api::events::v1::Event;
    use kube::api::ListParams;
    let _g = serial();
    let client = client().await;
    cluster(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(tmp.path(), "ops-events", &[]);
    sched.wait_ready().await;
    pod(&client, "fits", "1").await;
    pod(&client, "too-big", "100").await;
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let about = |name: &'static str, reason: &'static str| {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                })
                .collect::<Vec<_>>()
        }
    };
    wait_until("the Scheduled event", Duration::from_secs(60), || async {
        !about("fits", "Scheduled").await.is_empty()
    })
    .await;
    let scheduled = about("fits", "Scheduled").await;
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    let e = &scheduled[0];
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.action.as_deref(), Some("Binding"));
    assert_eq!(
        e.note.as_deref(),
        Some("Successfully assigned ops/fits to ops-node")
    );
    assert_eq!(e.reporting_controller.as_deref(), Some("gpu-scheduler"));
    assert_eq!(e.reporting_instance.as_deref(), Some("ops-events"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let uid = pods.get("fits").await.unwrap().metadata.uid;
    assert_eq!(e.regarding.as_ref().unwrap().uid, uid);
    assert_eq!(e.regarding.as_ref().unwrap().kind.as_deref(), Some("Pod"));

    // Cluster events send the unschedulable pod back to the queue; its
    // failures fold into the first event's series.
    let nodes: Api<Node> = Api::all(client.clone());
    let mut touch = 0;
    wait_until(
        "a FailedScheduling series",
        Duration::from_secs(120),
        || {
            touch += 1;
            let patch = json!({"metadata": {"labels": {"touch": touch.to_string()}}});
            let nodes = nodes.clone();
            let about = &about;
            async move {
                let _ = nodes
                    .patch(
                        "ops-node",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&patch),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(900)).await;
                about("too-big", "FailedScheduling")
                    .await
                    .iter()
                    .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 2))
            }
        },
    )
    .await;
    let failed = about("too-big", "FailedScheduling").await;
    assert_eq!(failed.len(), 1, "one event, its series counts: {failed:?}");
    let e = &failed[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.action.as_deref(), Some("Scheduling"));
    assert!(
        e.note
            .as_deref()
            .is_some_and(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")),
        "{e:?}"
    );
}

/// `wasmsched explain NS/POD` against the running scheduler: the
/// `--explain` view of a fresh attempt of the pending pod on the live
/// state, behind the same authentication as `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_says_why_a_pod_is_pending() {
    let _g = serial();
    let client = client().await;
    cluster(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = start(tmp.path(), "ops-explain", &[]);
    sched.wait_ready().await;
    pod(&client, "too-big", "100").await;
    pod(&client, "fits", "1").await;
    wait_until("fits bound", Duration::from_secs(60), || {
        bound(&client, "fits")
    })
    .await;
    let server = format!("https://127.0.0.1:{}", sched.port);
    let explain = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .arg("explain")
            .args(args)
            .args(["--server", &server, "--insecure-skip-tls-verify"])
            .env_remove("WASMSCHED_TOKEN")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let token = admin_token();
    let (code, out, err) = explain(&["ops/too-big", "--token", &token]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("Explain ops/too-big (profile gpu-scheduler): unschedulable\n"),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.contains("ops-node"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("NodeResourcesFit"), "{out}");
    assert!(out.contains("Insufficient cpu"), "{out}");
    // JSON: the report of `simulate --explain --output json`.
    let (code, out, err) = explain(&["ops/too-big", "--token", &token, "--output", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["pod"], "too-big");
    assert!(v["node"].is_null());
    assert_eq!(v["nodes"][0]["node"], "ops-node");
    // A bound pod is not pending; no token is refused.
    let (code, _, err) = explain(&["ops/fits", "--token", &token]);
    assert_eq!(code, Some(1));
    assert!(err.contains("404") && err.contains("not pending"), "{err}");
    let (code, _, err) = explain(&["ops/too-big"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("401"), "{err}");
}
