//! `namespaceSelector` in `run`, on the real API server: a pod whose
//! affinity term selects namespaces by label is unschedulable while no
//! namespace carries the label, and is bound next to its peer once the
//! peer's namespace is labelled (the Namespace watch updates the labels
//! and retries the pod, without a restart).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::env::*;
use crate::faults::create_nodes;

const NS: &str = "nsaff";
const PEER_NS: &str = "nsaff-peer";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_labelled_later_lets_the_pod_join_its_peer() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS, PEER_NS]).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // A label left by an earlier run is taken off first.
    let unlabel = json!({"metadata": {"labels": {"team": null}}});
    namespaces
        .patch(PEER_NS, &PatchParams::default(), &Patch::Merge(&unlabel))
        .await
        .unwrap();
    create_nodes(&client, "nsaff", 2, "4").await;
    let peers: Api<Pod> = Api::namespaced(client.clone(), PEER_NS);
    let peer: Pod = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": PEER_NS, "labels": {"app": "db"}},
        "spec": {"nodeName": "nsaff-1",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}
    }))
    .unwrap();
    peers.create(&PostParams::default(), &peer).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let sched = Scheduler::start(
        tmp.path(),
        "namespaces",
        &env().kubeconfig,
        &["--leader-elect", "false"],
    );
    sched.wait_ready().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let follower: Pod = serde_json::from_value(json!({
        "metadata": {"name": "follower", "namespace": NS},
        "spec": {"schedulerName": "gpu-scheduler",
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {"matchLabels": {"team": "data"}},
                "topologyKey": "kubernetes.io/hostname"}]}},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &follower)
        .await
        .unwrap();
    wait_until(
        "FailedScheduling while no namespace is labelled",
        Duration::from_secs(30),
        || async {
            events_for(&client, NS, "follower", "FailedScheduling")
                .await
                .iter()
                .any(|e| {
                    e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("didn't match pod affinity rules"))
                })
        },
    )
    .await;
    assert!(!is_bound(&pods.get("follower").await.unwrap()));
    let label = json!({"metadata": {"labels": {"team": "data"}}});
    namespaces
        .patch(PEER_NS, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    wait_until(
        "the follower bound once the namespace is labelled",
        Duration::from_secs(30),
        || async { pods.get("follower").await.is_ok_and(|p| is_bound(&p)) },
    )
    .await;
    let node = pods.get("follower").await.unwrap().spec.unwrap().node_name;
    assert_eq!(node.as_deref(), Some("nsaff-1"), "{}", sched.logs());
}
