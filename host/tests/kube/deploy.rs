//! `deploy/`: every manifest is accepted by the real API server (with and
//! without the deletion-cost component; the monitoring component's kinds
//! only with it), and the scheduler works with
//! exactly the permissions its RBAC grants: the base role without the
//! controller (no `patch` on pods), the component's role with it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::env::*;

pub fn kubectl(args: &[&str]) -> (bool, String) {
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

/// A Prometheus Operator kind (`ServiceMonitor`, `PrometheusRule`),
/// reduced to what the API server needs to accept ours (the operator is
/// not part of the test): its CRD, and the CRD's name.
fn operator_crd(kind: &str) -> (String, String) {
    let plural = format!("{}s", kind.to_lowercase());
    let name = format!("{plural}.monitoring.coreos.com");
    let crd = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {name}
spec:
  group: monitoring.coreos.com
  names: {{kind: {kind}, plural: {plural}, singular: {singular}, listKind: {kind}List}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#,
        singular = kind.to_lowercase()
    );
    (crd, name)
}

/// Applies the CRD file `path` and waits until it is Established.
pub fn apply_crd(path: &Path, name: &str) {
    let (ok, out) = kubectl(&["apply", "-f", path.to_str().unwrap()]);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&[
        "wait",
        "--for",
        "condition=Established",
        &format!("crd/{name}"),
    ]);
    assert!(ok, "{out}");
}

/// Installs the Prometheus Operator kind `kind`'s CRD (written into `dir`).
fn install_operator_crd(dir: &Path, kind: &str) {
    let (crd, name) = operator_crd(kind);
    let path = dir.join(format!("{}-crd.yaml", kind.to_lowercase()));
    std::fs::write(&path, crd).unwrap();
    apply_crd(&path, &name);
}

/// Preemption with the account's rights: it watches budgets and classes,
/// deletes the victim, writes the nomination and the Preempted event.
async fn preempt_as_the_account(client: &kube::Client, sched: &Scheduler) {
    for (name, value) in [("rbac-low", 10), ("rbac-high", 1000)] {
        let pc: k8s_openapi::api::scheduling::v1::PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).unwrap();
        let api: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
        let _ = api.delete(name, &DeleteParams::default()).await;
        api.create(&PostParams::default(), &pc).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "rbac");
    // The node holds `fits` and `second-profile` (1 cpu each): low fits,
    // high needs low (and one of the others) gone.
    for (name, class, cpu) in [("low", "rbac-low", "2"), ("high", "rbac-high", "3")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "rbac"},
            "spec": {"schedulerName": "gpu-scheduler", "priorityClassName": class,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        if name == "low" {
            wait_until("low bound", Duration::from_secs(60), || async {
                pods.get("low")
                    .await
                    .ok()
                    .and_then(|p| p.spec?.node_name)
                    .is_some()
            })
            .await;
        }
    }
    wait_until(
        "high nominated, low evicted",
        Duration::from_secs(60),
        || async {
            let high = pods.get("high").await.ok();
            let nominated = high.and_then(|p| p.status?.nominated_node_name);
            let low = pods.get("low").await.ok();
            nominated.as_deref() == Some("rbac-node")
                && low.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
                && !events_for(client, "rbac", "low", "Preempted")
                    .await
                    .is_empty()
        },
    )
    .await;
    let logs = sched.logs();
    assert!(!logs.contains("forbidden"), "a call was refused:\n{logs}");
    let _ = pods.delete("high", &DeleteParams::default()).await;
}

/// A token of the ServiceAccount `ns/name` (TokenRequest API).
pub fn service_account_token(ns: &str, name: &str) -> String {
    let (ok, token) = kubectl(&["create", "token", name, "-n", ns, "--duration", "1h"]);
    assert!(ok, "token request: {token}");
    token.trim().to_string()
}

/// A kubeconfig that authenticates as `deploy/`'s ServiceAccount.
pub fn service_account_kubeconfig(dir: &Path) -> std::path::PathBuf {
    let token = service_account_token("wasmsched", "wasmsched");
    let admin = std::fs::read_to_string(&env().kubeconfig).unwrap();
    let mut kc: serde_json::Value = serde_saphyr::from_str(&admin).unwrap();
    kc["users"][0]["user"]["token"] = serde_json::Value::String(token.trim().to_string());
    let path = dir.join("sa-kubeconfig");
    std::fs::write(&path, serde_saphyr::to_string(&kc).unwrap()).unwrap();
    path
}

/// Metric names a dashboard expression reads (without `_bucket` etc.).
pub fn dashboard_metrics() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("deploy/grafana-dashboard.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut names = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if (word.starts_with("scheduler_")
                    || word.starts_with("wasmsched_")
                    || word.starts_with("leader_")
                    || word.starts_with("rest_client_")
                    || word.starts_with("process_"))
                    && !names.contains(&word.to_string())
                {
                    names.push(word.to_string());
                }
            }
        }
    }
    names
}

/// The deletion-cost controller's metrics (served once it runs).
const CONTROLLER_METRICS: &str = "wasmsched_pod_deletion_cost";

/// Per-device GPU metrics (served once a node runs HAMi's device plugin;
/// host/tests/kube/hami.rs checks them).
const GPU_DEVICE_METRICS: &str = "wasmsched_gpu_device_";

/// The node-metrics source's metrics (served once `nodeMetrics` is
/// configured; host/tests/kube/node_metrics.rs checks them).
const NODE_METRICS_SOURCE: &str = "wasmsched_node_metrics_";

/// DynamicResources' metrics (served once DRA objects exist;
/// host/tests/kube/dra.rs checks them).
const DRA_METRICS: &str = "wasmsched_dra_";

/// The dashboard's metrics that `/metrics` does not serve.
async fn missing_dashboard_metrics(sched: &Scheduler) -> Vec<String> {
    let (status, metrics) = sched.get("/metrics").await.unwrap();
    assert_eq!(status, 200, "{metrics}");
    dashboard_metrics()
        .into_iter()
        .filter(|m| !metrics.lines().any(|l| l.starts_with(m.as_str())))
        .collect()
}

/// `deploy/` copied to `dir`, with `components` enabled as its
/// kustomization says (uncommenting `components:` and their lines).
pub fn deploy_with_components(dir: &Path, components: &[&str]) -> std::path::PathBuf {
    let out = dir.join("deploy");
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new("cp")
        .arg("-r")
        .arg(repo().join("deploy"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let k = out.join("kustomization.yaml");
    let text = std::fs::read_to_string(&k).unwrap();
    let mut enabled = text.replace("# components:\n", "components:\n");
    for c in components {
        let line = format!("# - components/{c}\n");
        assert!(enabled.contains(&line), "kustomization.yaml names no {c}");
        enabled = enabled.replace(&line, &format!("- components/{c}\n"));
    }
    assert_ne!(
        enabled, text,
        "kustomization.yaml has no commented components"
    );
    std::fs::write(&k, enabled).unwrap();
    out
}

/// `kubectl apply --dry-run=server -k DIR`, which must succeed.
pub fn dry_run(dir: &Path) -> String {
    let (ok, out) = kubectl(&["apply", "--dry-run=server", "-k", dir.to_str().unwrap()]);
    assert!(ok, "server dry run of {}: {out}", dir.display());
    out
}

pub fn install_service_monitor_crd(dir: &Path) {
    install_operator_crd(dir, "ServiceMonitor");
}

/// The ServiceMonitor and PrometheusRule kinds (`components/monitoring`,
/// the chart's `metrics.serviceMonitor` and `metrics.prometheusRule`).
pub fn install_monitoring_crds(dir: &Path) {
    install_operator_crd(dir, "ServiceMonitor");
    install_operator_crd(dir, "PrometheusRule");
}

/// A configuration file of `deploy/` with the plugin cache moved to a
/// writable place, written into `dir`.
pub fn runnable_config(source: &Path, dir: &Path) -> std::path::PathBuf {
    let config = std::fs::read_to_string(source)
        .unwrap()
        .replace("/var/cache/wasmsched", dir.join("cache").to_str().unwrap());
    let path = dir.join("config.yaml");
    std::fs::write(&path, config).unwrap();
    path
}

/// `deploy/config.yaml` runnable (above) with the configuration fragments
/// of `components` beside it, as the components lay them out in the
/// ConfigMap.
pub fn runnable_config_with(components: &[&str], dir: &Path) -> std::path::PathBuf {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("fragment-") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    for c in components {
        let name = format!("fragment-{c}.yaml");
        let from = repo().join("deploy/components").join(c).join(&name);
        std::fs::copy(&from, dir.join(&name)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    runnable_config(&repo().join("deploy/config.yaml"), dir)
}

pub fn apply(files: &[std::path::PathBuf]) {
    for f in files {
        let (ok, out) = kubectl(&["apply", "-f", f.to_str().unwrap()]);
        assert!(ok, "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_manifests_are_accepted_with_and_without_the_deletion_cost_component() {
    let _g = serial();
    let client = client().await;
    reset(&client, &["wasmsched"]).await;
    let _ = kubectl(&["delete", "clusterrolebinding", "wasmsched-deletion-cost"]);
    let tmp = tempfile::tempdir().unwrap();
    install_monitoring_crds(tmp.path());

    let out = dry_run(&repo().join("deploy"));
    for kind in [
        "namespace/wasmsched",
        "serviceaccount/wasmsched",
        "clusterrole.rbac.authorization.k8s.io/wasmsched ",
        "clusterrolebinding.rbac.authorization.k8s.io/wasmsched ",
        "clusterrole.rbac.authorization.k8s.io/wasmsched-metrics-reader",
        "role.rbac.authorization.k8s.io/wasmsched-leader-election",
        "configmap/wasmsched-plugins",
        "configmap/wasmsched-dashboard",
        "deployment.apps/wasmsched",
        "poddisruptionbudget.policy/wasmsched",
        "service/wasmsched-metrics",
        "networkpolicy.networking.k8s.io/wasmsched",
    ] {
        assert!(out.contains(kind), "{kind} missing from the dry run: {out}");
    }
    // The Prometheus Operator's kinds are the monitoring component's: the
    // base applies where its CRDs are not installed.
    assert!(
        !out.contains("monitoring.coreos.com"),
        "the base has a Prometheus Operator object: {out}"
    );
    let monitoring = dry_run(&deploy_with_components(tmp.path(), &["monitoring"]));
    for kind in [
        "servicemonitor.monitoring.coreos.com/wasmsched",
        "prometheusrule.monitoring.coreos.com/wasmsched",
    ] {
        assert!(
            monitoring.contains(kind),
            "{kind} missing with the monitoring component: {monitoring}"
        );
    }
    assert!(
        !out.contains("wasmsched-deletion-cost"),
        "the controller's role is bound without the controller: {out}"
    );

    let with = dry_run(&deploy_with_components(tmp.path(), &["deletion-cost"]));
    for kind in [
        "clusterrole.rbac.authorization.k8s.io/wasmsched-deletion-cost",
        "clusterrolebinding.rbac.authorization.k8s.io/wasmsched-deletion-cost",
    ] {
        assert!(
            with.contains(kind),
            "{kind} missing with the component: {with}"
        );
    }

    // The component's fragment brings the deletionCost section: the base
    // configuration has none, with the fragment it has one.
    let deletion_cost = |path: &Path| {
        let file = wasmsched::config::load(path).unwrap();
        wasmsched::deletion_cost::DeletionCostConfig::from_file(&file, Path::new("."))
            .unwrap()
            .is_some()
    };
    assert!(!deletion_cost(&repo().join("deploy/config.yaml")));
    assert!(deletion_cost(&runnable_config_with(
        &["deletion-cost"],
        tmp.path()
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_runs_with_exactly_its_service_accounts_rbac() {
    let _g = serial();
    let client = client().await;
    reset(&client, &["wasmsched", "rbac"]).await;
    let _ = kubectl(&["delete", "clusterrolebinding", "wasmsched-deletion-cost"]);
    let tmp = tempfile::tempdir().unwrap();
    let deploy = repo().join("deploy");

    // The ServiceAccount and its RBAC for real; the scheduler runs as it,
    // with deploy/config.yaml (the plugin cache moved to a writable place).
    apply(&[
        deploy.join("serviceaccount.yaml"),
        deploy.join("rbac.yaml"),
        deploy.join("metrics-reader.yaml"),
    ]);
    let config_path = runnable_config(&deploy.join("config.yaml"), tmp.path());
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

    // Every metric the dashboard queries is served (the deletion-cost
    // controller's once it runs, below); the request's token is reviewed
    // with the ServiceAccount's tokenreviews and subjectaccessreviews
    // rights.
    let missing = missing_dashboard_metrics(&sched).await;
    assert!(
        missing.iter().all(|m| m.starts_with(CONTROLLER_METRICS)
            || m.starts_with(GPU_DEVICE_METRICS)
            || m.starts_with(DRA_METRICS)
            || m.starts_with(NODE_METRICS_SOURCE)),
        "dashboard metrics not served: {missing:?}"
    );
    let logs = sched.logs();
    assert!(!logs.contains("forbidden"), "a call was refused:\n{logs}");

    preempt_as_the_account(&client, &sched).await;

    // Least privilege: what the scheduler does not do, it may not do; and
    // without the deletion-cost controller it may not patch pods.
    let sa_client = client_for(&sa).await;
    let as_sa: Api<Pod> = Api::namespaced(sa_client.clone(), "rbac");
    let stray: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "namespace": "rbac"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}
    }))
    .unwrap();
    match as_sa.create(&PostParams::default(), &stray).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403),
        other => panic!("the scheduler's account may create pods: {other:?}"),
    }
    let annotate = kube::api::Patch::Merge(json!({"metadata": {"annotations": {
        "controller.kubernetes.io/pod-deletion-cost": "7"}}}));
    match as_sa
        .patch("fits", &kube::api::PatchParams::default(), &annotate)
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403),
        other => panic!("the scheduler's account may patch pods: {other:?}"),
    }
    match Api::<Secret>::namespaced(sa_client.clone(), "wasmsched")
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

    // With the component: its role, and its configuration's controller
    // runs (its watches of ReplicaSets, Deployments and Pods sync, a pass
    // completes) without a refused call.
    let component = deploy.join("components/deletion-cost");
    apply(&[component.join("rbac.yaml")]);
    let config_path = runnable_config_with(&["deletion-cost"], tmp.path());
    let sched = Scheduler::start(
        tmp.path(),
        "rbac-controller",
        &sa,
        &["--config", config_path.to_str().unwrap()],
    );
    wait_until("a deletion-cost pass", Duration::from_secs(90), || async {
        sched.logs().contains("deletion-cost pass")
    })
    .await;
    let logs = sched.logs();
    assert!(!logs.contains("forbidden"), "a call was refused:\n{logs}");
    // (A new process: only the controller's are checked, it binds nothing.)
    let missing = missing_dashboard_metrics(&sched).await;
    assert!(
        !missing.iter().any(|m| m.starts_with(CONTROLLER_METRICS)),
        "the controller's dashboard metrics are not served: {missing:?}"
    );
    as_sa
        .patch("fits", &kube::api::PatchParams::default(), &annotate)
        .await
        .expect("with the component, the account may patch pods");
    drop(sched);
    let _ = kubectl(&["delete", "clusterrolebinding", "wasmsched-deletion-cost"]);
}
