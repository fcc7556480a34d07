//! wasmsched in kube-scheduler's place, on the real API server: the
//! configuration file kube-scheduler 1.37.2 writes (`--write-config-to`)
//! run as it is, and the command line of a kubeadm static pod
//! (`/etc/kubernetes/manifests/kube-scheduler.yaml`), with kube-scheduler's
//! endpoints (`/livez`, `/readyz`, `/healthz` open; `/configz` and
//! `/metrics` behind a token).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use crate::env::*;
use crate::faults::create_nodes;

const NS: &str = "dropin";

/// `kube-scheduler --write-config-to FILE` of the test servers' binary:
/// its complete v1 configuration with every default written out.
fn written_by_kube_scheduler(dir: &Path) -> PathBuf {
    let bin = std::env::var("WASMSCHED_TEST_KUBE_BIN").expect("WASMSCHED_TEST_KUBE_BIN");
    let path = dir.join("kube-scheduler-config.yaml");
    let out = Command::new(format!("{bin}/kube-scheduler"))
        .arg(format!("--kubeconfig={}", env().kubeconfig.display()))
        .arg(format!("--write-config-to={}", path.display()))
        .output()
        .expect("run kube-scheduler");
    assert!(
        path.exists(),
        "kube-scheduler --write-config-to wrote nothing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// kubeadm's kube-scheduler flags (v1.37), with the test's kubeconfig and
/// a free port; `extra` after them.
fn kubeadm_flags(kubeconfig: &Path, port: u16, extra: &[&str]) -> Vec<String> {
    let k = kubeconfig.display();
    let mut args = vec![
        format!("--authentication-kubeconfig={k}"),
        format!("--authorization-kubeconfig={k}"),
        "--bind-address=127.0.0.1".to_string(),
        format!("--kubeconfig={k}"),
        "--leader-elect=true".to_string(),
        format!("--secure-port={port}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

async fn create_pod(name: &str, scheduler_name: Option<&str>) {
    let mut spec = json!({"containers": [{"name": "c", "image": "x",
        "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]});
    if let Some(s) = scheduler_name {
        spec["schedulerName"] = json!(s);
    }
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}))
            .unwrap();
    let api: Api<Pod> = Api::namespaced(client().await, NS);
    api.create(&PostParams::default(), &pod).await.unwrap();
}

async fn wait_bound(name: &str, sched: &Scheduler) {
    let api: Api<Pod> = Api::namespaced(client().await, NS);
    let limit = Duration::from_secs(60);
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if api.get(name).await.is_ok_and(|p| is_bound(&p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("pod {name} not bound in 60 s; log:\n{}", sched.logs());
}

/// The probes kube-scheduler serves, without a token, and `/configz`
/// behind one; returns `/configz`'s document.
async fn probes_and_configz(sched: &Scheduler) -> Value {
    for path in ["/livez", "/healthz", "/readyz"] {
        let (status, body) = sched.get_as(path, None).await.expect(path);
        assert_eq!((status, body.as_str()), (200, "ok"), "{path}");
        let (status, body) = sched
            .get_as(&format!("{path}?verbose"), None)
            .await
            .expect(path);
        let name = path.trim_start_matches('/');
        assert_eq!(status, 200, "{path}?verbose");
        assert!(
            body.contains("[+]ping ok") && body.ends_with(&format!("{name} check passed\n")),
            "{path}?verbose: {body}"
        );
    }
    let (_, ready) = sched.get_as("/readyz?verbose", None).await.unwrap();
    assert!(ready.contains("[+]sched-handler-sync ok"), "{ready}");
    let (status, _) = sched.get_as("/configz", None).await.unwrap();
    assert_eq!(status, 401, "/configz needs a token");
    let (status, _) = sched.get_as("/metrics", None).await.unwrap();
    assert_eq!(status, 401, "/metrics needs a token");
    let (status, body) = sched.get("/configz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("/configz is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_schedulers_own_configuration_file_runs_as_written() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    create_nodes(&client, "dropin", 2, "4").await;
    let tmp = tempfile::tempdir().unwrap();
    let config = written_by_kube_scheduler(tmp.path());
    let text = std::fs::read_to_string(&config).unwrap();
    // What the file holds that a drop-in must read, not refuse.
    for field in [
        "acceptContentTypes",
        "contentType: application/vnd.kubernetes.protobuf",
        "podInitialBackoffSeconds: 1",
        "placementGenerate",
        "name: NodeDeclaredFeatures",
        "weight: 0",
    ] {
        assert!(
            text.contains(field),
            "the written file has {field}:\n{text}"
        );
    }

    // `profiles` reads it and names what it does not act on.
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["profiles", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("default-scheduler"), "{stdout}");
    assert!(
        stdout.contains("NodeDeclaredFeatures")
            && !stdout.contains("NodeDeclaredFeatures not implemented"),
        "NodeDeclaredFeatures runs: {stdout}"
    );

    // kubeadm's flags with the file, as a kube-scheduler static pod with
    // `--config` runs (no other change).
    let port = free_port();
    let mut args = kubeadm_flags(&env().kubeconfig, port, &["-v=2"]);
    args.push(format!("--config={}", config.display()));
    let mut sched = Scheduler::start_as_given(tmp.path(), "dropin-file", port, &args);
    sched.wait_ready().await;
    let configz = probes_and_configz(&sched).await;
    let c = &configz["componentconfig"];
    assert_eq!(c["kind"], "KubeSchedulerConfiguration", "{configz:#}");
    assert_eq!(c["leaderElection"]["resourceName"], "kube-scheduler");
    assert_eq!(c["leaderElection"]["leaseDuration"], "15s");
    assert_eq!(c["podMaxBackoffSeconds"], 10);
    assert_eq!(c["profiles"][0]["schedulerName"], "default-scheduler");
    let scores: Vec<(String, i64)> = c["profiles"][0]["plugins"]["score"]["enabled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["weight"].as_i64().unwrap(),
            )
        })
        .collect();
    // kube-scheduler 1.37's default Score plugins and weights.
    for expected in [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ] {
        assert!(
            scores.contains(&(expected.0.to_string(), expected.1)),
            "{expected:?} in {scores:?}"
        );
    }

    // A pod without a schedulerName is kube-scheduler's, so now ours.
    create_pod("plain", None).await;
    wait_bound("plain", &sched).await;
    let logs = sched.logs();
    assert!(
        logs.contains("clientConnection.contentType"),
        "clientConnection.contentType named at start as not acted on:\n{logs}"
    );
    assert!(
        logs.contains("plain"),
        "-v=2 logs the binding of pod plain:\n{logs}"
    );
    let status = sched.terminate();
    assert!(status.success(), "{status}\n{}", sched.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_kube_scheduler_command_line_runs() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    create_nodes(&client, "dropin", 2, "4").await;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    // kubeadm's flags without --config, and the other kube-scheduler
    // flags users add: verbosity, log format, feature gates (a default
    // turned off, a gate that does not touch scheduling), a bare
    // --leader-elect and the lease flags.
    let args = kubeadm_flags(
        &env().kubeconfig,
        port,
        &[
            "-v=2",
            "--logging-format=json",
            "--feature-gates=SchedulerAsyncPreemption=false,APIResponseCompression=true",
            "--leader-elect",
            "--leader-elect-lease-duration=20s",
            "--leader-elect-renew-deadline=15s",
            "--leader-elect-retry-period=3s",
            "--leader-elect-resource-lock=leases",
            "--leader-elect-resource-name=dropin-kubeadm",
            "--leader-elect-resource-namespace=kube-system",
            "--kube-api-qps=80",
            "--kube-api-burst=160",
        ],
    );
    let mut sched = Scheduler::start_as_given(tmp.path(), "dropin-flags", port, &args);
    sched.wait_ready().await;
    let configz = probes_and_configz(&sched).await;
    let c = &configz["componentconfig"];
    assert_eq!(c["leaderElection"]["leaderElect"], true, "{configz:#}");
    assert_eq!(c["leaderElection"]["leaseDuration"], "20s");
    assert_eq!(c["leaderElection"]["renewDeadline"], "15s");
    assert_eq!(c["leaderElection"]["retryPeriod"], "3s");
    assert_eq!(c["leaderElection"]["resourceName"], "dropin-kubeadm");
    assert_eq!(c["clientConnection"]["qps"], 80.0);
    assert_eq!(c["clientConnection"]["burst"], 160);
    assert_eq!(configz["featureGates"]["SchedulerAsyncPreemption"], false);
    // The Lease the flags name is the one held.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    wait_until("the flags' Lease held", Duration::from_secs(30), || async {
        leases
            .get("dropin-kubeadm")
            .await
            .is_ok_and(|l| l.spec.and_then(|s| s.holder_identity).is_some())
    })
    .await;
    create_pod("flags", Some("gpu-scheduler")).await;
    wait_bound("flags", &sched).await;
    let logs = sched.logs();
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("--logging-format=json: {l}: {e}"))
        })
        .collect();
    assert!(
        lines.iter().any(|l| l["msg"]
            .as_str()
            .is_some_and(|m| m.contains("APIResponseCompression") && m.contains("no effect"))),
        "the gate without effect is named:\n{logs}"
    );
    let status = sched.terminate();
    assert!(status.success(), "{status}\n{}", sched.logs());
}

/// The gates `--feature-gates` knows are kube-scheduler's: every gate its
/// `--help` lists (the ones not yet GA), with the same default and stage.
#[test]
fn feature_gates_are_kube_schedulers() {
    let bin = std::env::var("WASMSCHED_TEST_KUBE_BIN").expect("WASMSCHED_TEST_KUBE_BIN");
    let out = Command::new(format!("{bin}/kube-scheduler"))
        .arg("--help")
        .output()
        .unwrap();
    let help =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let ours = wasmsched::feature_gates::gates();
    let mut listed = 0;
    for line in help.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("kube:") else {
            continue;
        };
        let Some((name, spec)) = rest.split_once("=true|false (") else {
            continue;
        };
        if name == "AllAlpha" || name == "AllBeta" {
            continue;
        }
        // `(BETA - default=false)`, possibly followed by the value under
        // --min-compatibility-version.
        let spec = spec.split(')').next().unwrap();
        let (stage, default) = spec.split_once(" - default=").unwrap();
        let gate = ours.iter().find(|g| g.name == name).unwrap_or_else(|| {
            panic!("kube-scheduler's gate {name} is missing from wasmsched's table (scripts/gen-feature-gates)")
        });
        assert_eq!(gate.stage.as_str(), stage, "{name}'s stage");
        assert_eq!(gate.default.to_string(), default, "{name}'s default");
        listed += 1;
    }
    assert!(
        listed > 100,
        "kube-scheduler --help listed {listed} gates:\n{help}"
    );
}
