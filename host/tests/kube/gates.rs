//! Scheduling gates on the real API server: a gated pod (Kueue's
//! admission gate) is never bound and no binding is attempted; once its
//! last gate is removed it is bound promptly. While gated it is counted in
//! `scheduler_pending_pods{queue="gated"}`, as kube-scheduler counts it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::env::*;
use crate::faults::create_nodes;

const NS: &str = "gates";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pod_waits_for_its_last_gate() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    create_nodes(&client, "g", 2, "4").await;
    let sched = Scheduler::start(
        tmp.path(),
        "gates",
        &env().kubeconfig,
        &["--leader-elect", "false"],
    );
    sched.wait_ready().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "gated", "namespace": NS},
        "spec": {"schedulerName": "gpu-scheduler",
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/second"}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // An ungated pod created after it is bound: the scheduler has seen
    // both, and the gated one is still waiting.
    let free: Pod = serde_json::from_value(json!({
        "metadata": {"name": "free", "namespace": NS},
        "spec": {"schedulerName": "gpu-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &free).await.unwrap();
    wait_until("the ungated pod bound", Duration::from_secs(30), || async {
        pods.get("free").await.is_ok_and(|p| is_bound(&p))
    })
    .await;
    wait_until(
        "the gated pod counted as gated",
        Duration::from_secs(10),
        || async {
            sched
                .metric("scheduler_pending_pods", &[("queue", "gated")])
                .await
                == 1.0
        },
    )
    .await;
    let remove_first = json!([{"op": "remove", "path": "/spec/schedulingGates/0"}]);
    pods.patch(
        "gated",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(remove_first).unwrap()),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !is_bound(&pods.get("gated").await.unwrap()),
        "one gate is left"
    );
    assert_eq!(
        sched
            .metric("scheduler_pending_pods", &[("queue", "gated")])
            .await,
        1.0
    );
    // No attempt was made: no binding, no FailedScheduling event, no
    // attempt counted for it.
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let about_gated: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("gated"))
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    assert!(
        about_gated.is_empty(),
        "events for the gated pod: {about_gated:?}"
    );
    assert_eq!(
        sched.metric("scheduler_schedule_attempts_total", &[]).await,
        1.0,
        "only the ungated pod was attempted"
    );
    assert_eq!(sched.metric("wasmsched_bindings_total", &[]).await, 1.0);
    let clear = json!([{"op": "remove", "path": "/spec/schedulingGates"}]);
    let ungated = Instant::now();
    pods.patch(
        "gated",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(clear).unwrap()),
    )
    .await
    .unwrap();
    wait_until(
        "the pod bound once ungated",
        Duration::from_secs(30),
        || async { pods.get("gated").await.is_ok_and(|p| is_bound(&p)) },
    )
    .await;
    eprintln!("bound {:?} after its last gate went", ungated.elapsed());
    assert_eq!(
        sched
            .metric("scheduler_pending_pods", &[("queue", "gated")])
            .await,
        0.0
    );
}
