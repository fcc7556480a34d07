//! `deploy/`: every manifest is accepted by the real API server, and the
//! scheduler works with exactly the permissions its RBAC grants.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::env::*;

fn kubectl(args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env().kubeconfig)
        .args(args)
        .output()
        .expect("kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The Prometheus Operator's ServiceMonitor kind, reduced to what the
/// API server needs to accept ours (the operator is not part of the test).
const SERVICE_MONITOR_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

/// A kubeconfig that authenticates as `deploy/`'s ServiceAccount.
fn service_account_kubeconfig(dir: &Path) -> std::path::PathBuf {
    let (ok, token) = kubectl(&[
        "create",
        "token",
        "wasmsched",
        "-n",
        "wasmsched",
        "--duration",
        "1h",
    ]);
    assert!(ok, "token request: {token}");
    let admin = std::fs::read_to_string(&env().kubeconfig).unwrap();
    let mut kc: serde_json::Value = serde_saphyr::from_str(&admin).unwrap();
    kc["users"][0]["user"]["token"] = serde_json::Value::String(token.trim().to_string());
    let path = dir.join("sa-kubeconfig");
    std::fs::write(&path, serde_saphyr::to_string(&kc).unwrap()).unwrap();
    path
}

/// Metric names a dashboard expression reads (without `_bucket` etc.).
fn dashboard_metrics() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("deploy/grafana-dashboard.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut names = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if (word.starts_with("scheduler_")
                    || word.starts_with("wasmsched_")
                    || word.starts_with("leader_"))
                    && !names.contains(&word.to_string())
                {
                    names.push(word.to_string());
                }
            }
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_manifests_are_accepted_and_their_rbac_suffices() {
    let _g = serial();
    let client = client().await;
    reset(&client, &["wasmsched", "rbac"]).await;
    let tmp = tempfile::tempdir().unwrap();

    // Every manifest, through kustomize, accepted by the server.
    let crd = tmp.path().join("crd.yaml");
    std::fs::write(&crd, SERVICE_MONITOR_CRD).unwrap();
    let (ok, out) = kubectl(&["apply", "-f", crd.to_str().unwrap()]);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&[
        "wait",
        "--for",
        "condition=Established",
        "crd/servicemonitors.monitoring.coreos.com",
    ]);
    assert!(ok, "{out}");
    let deploy = repo().join("deploy");
    let (ok, out) = kubectl(&["apply", "--dry-run=server", "-k", deploy.to_str().unwrap()]);
    assert!(ok, "server dry run of deploy/: {out}");
    for kind in [
        "namespace/wasmsched",
        "serviceaccount/wasmsched",
        "clusterrole.rbac.authorization.k8s.io/wasmsched",
        "role.rbac.authorization.k8s.io/wasmsched-leader-election",
        "configmap/wasmsched-plugins",
        "configmap/wasmsched-dashboard",
        "deployment.apps/wasmsched",
        "service/wasmsched-metrics",
        "servicemonitor.monitoring.coreos.com/wasmsched",
    ] {
        assert!(out.contains(kind), "{kind} missing from the dry run: {out}");
    }

    // The ServiceAccount and its RBAC for real; the scheduler runs as it,
    // with deploy/config.yaml (the plugin cache moved to a writable place).
    for f in ["serviceaccount.yaml", "rbac.yaml"] {
        let (ok, out) = kubectl(&["apply", "-f", deploy.join(f).to_str().unwrap()]);
        assert!(ok, "{out}");
    }
    let config = std::fs::read_to_string(deploy.join("config.yaml"))
        .unwrap()
        .replace(
            "/var/cache/wasmsched",
            tmp.path().join("cache").to_str().unwrap(),
        );
    let config_path = tmp.path().join("config.yaml");
    std::fs::write(&config_path, config).unwrap();
    let sa = service_account_kubeconfig(tmp.path());
    let _ = Api::<Lease>::namespaced(client.clone(), "wasmsched")
        .delete("wasmsched", &DeleteParams::default())
        .await;

    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "rbac-node", "labels": {"kubernetes.io/hostname": "rbac-node"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let mut sched = Scheduler::start(
        tmp.path(),
        "rbac-replica",
        &sa,
        &["--config", config_path.to_str().unwrap()],
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "rbac");
    // Two profiles of deploy/config.yaml in one process.
    for (name, cpu, profile) in [
        ("fits", "1", "gpu-scheduler"),
        ("too-big", "64", "gpu-scheduler"),
        ("second-profile", "1", "wasmsched-default"),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "rbac"},
            "spec": {"schedulerName": profile, "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    wait_until(
        "fits bound, too-big reported",
        Duration::from_secs(90),
        || async {
            pods.get("fits")
                .await
                .ok()
                .and_then(|p| p.spec?.node_name)
                .is_some()
                && !events_for(&client, "rbac", "too-big", "FailedScheduling")
                    .await
                    .is_empty()
                && pods
                    .get("too-big")
                    .await
                    .ok()
                    .and_then(|p| p.status?.conditions)
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c.reason.as_deref() == Some("Unschedulable"))
                    })
        },
    )
    .await;
    for pod in ["fits", "second-profile"] {
        // Events are written after the binding, asynchronously.
        wait_until("the Scheduled event", Duration::from_secs(30), || async {
            !events_for(&client, "rbac", pod, "Scheduled")
                .await
                .is_empty()
        })
        .await;
    }
    assert_eq!(
        events_for(&client, "rbac", "fits", "Scheduled").await.len(),
        1
    );
    let lease = Api::<Lease>::namespaced(client.clone(), "wasmsched")
        .get("wasmsched")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("rbac-replica")
    );
    let logs = sched.logs();
    assert!(!logs.contains("forbidden"), "a call was refused:\n{logs}");

    // Every metric the dashboard queries is served.
    let (_, metrics) = sched.get("/metrics").await.unwrap();
    let missing: Vec<String> = dashboard_metrics()
        .into_iter()
        .filter(|m| !metrics.lines().any(|l| l.starts_with(m.as_str())))
        .collect();
    assert!(
        missing.is_empty(),
        "dashboard metrics not served: {missing:?}"
    );

    // Least privilege: what the scheduler does not do, it may not do.
    let sa_client = client_for(&sa).await;
    let as_sa: Api<Pod> = Api::namespaced(sa_client.clone(), "rbac");
    match as_sa.delete("fits", &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403),
        other => panic!("the scheduler's account may delete pods: {other:?}"),
    }
    match Api::<Secret>::namespaced(sa_client, "wasmsched")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403),
        other => panic!("the scheduler's account may read secrets: {other:?}"),
    }

    // SIGTERM releases the lease (an `update` the Role grants).
    assert!(sched.terminate().success(), "{}", sched.logs());
    let lease = Api::<Lease>::namespaced(client.clone(), "wasmsched")
        .get("wasmsched")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
}
