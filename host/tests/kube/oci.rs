//! `wasmsched run` with the GPU policy pulled from an OCI registry by
//! digest: it binds the GPU example's pods where `simulate` (same
//! configuration) places them; then the configuration names new
//! references while it runs — a tampered layer and a digest the registry
//! does not have are refused with one log line each and the running
//! version keeps scheduling, a good one is swapped in.

use super::*;
use crate::registry::*;

/// `simulate --output json` of the example with `config`.
fn simulate_with(dir: &Path, config: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("simulate")
        .arg(dir)
        .arg("--config")
        .arg(config)
        .args(["--output", "json", "--seed", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Replaces the configuration file at once (a rename, as a ConfigMap
/// volume's update is).
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn plugin_digest(sched: &Scheduler, digest: &str) -> f64 {
    sched
        .metric(
            "wasmsched_plugin_info",
            &[("plugin", "GpuTopology"), ("digest", digest)],
        )
        .await
}

#[tokio::test]
async fn run_loads_the_gpu_policy_by_digest_and_keeps_it_when_a_new_reference_is_refused() {
    let _serial = serial();
    let r = registries();
    let client = client().await;
    reset(&client, &["ml", "etl", "web"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let good = gpu_component();
    let name = unique("policies/run-gpu");
    let v1 = push(&r, tmp.path(), &good, &name, "v1");
    let at = |d: &str| format!("oci://{}/{name}@{d}", r.plain);
    let config = tmp.path().join("config.yaml");
    replace(&config, &gpu_config(&at(&v1), &r.plain, "", ""));
    let dir = repo().join("examples/gpu-cluster");
    let expected = simulate_with(&dir, &config);
    let pods = load_example(&client, &dir).await;
    let mut sched = Scheduler::start(
        tmp.path(),
        "oci",
        &env().kubeconfig,
        &[
            "--config",
            config.to_str().unwrap(),
            "--leader-elect",
            "false",
            "--seed",
            "0",
        ],
    );
    sched.wait_ready().await;
    let running = sha256(&good)["sha256:".len()..].to_string();
    assert_eq!(
        plugin_digest(&sched, &running).await,
        1.0,
        "{}",
        sched.logs()
    );
    for p in &pods {
        create_pod(&client, p.clone()).await;
    }
    let scheduled: Vec<(String, String)> = expected["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap(),
                    p["pod"].as_str().unwrap()
                ),
                p["node"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(!scheduled.is_empty());
    let all_bound = || async {
        let now = placements(&client).await;
        scheduled
            .iter()
            .all(|(k, _)| now.get(k).cloned().flatten().is_some())
    };
    wait_until(
        "the example's pods bound",
        Duration::from_secs(120),
        all_bound,
    )
    .await;
    let now = placements(&client).await;
    for (k, n) in &scheduled {
        assert_eq!(now[k].as_deref(), Some(n.as_str()), "{k}\n{}", sched.logs());
    }

    // A tampered layer: refused with one line, the running version stays.
    let tampered = variant(&good, &unique("run-tampered"));
    let v2 = push(&r, tmp.path(), &tampered, &name, "v2");
    tamper(&r, &sha256(&tampered));
    replace(&config, &gpu_config(&at(&v2), &r.plain, "", ""));
    let rejected = |n: f64| {
        let sched = &sched;
        async move {
            sched
                .metric(
                    "wasmsched_plugin_reloads_total",
                    &[("plugin", "GpuTopology"), ("result", "rejected")],
                )
                .await
                >= n
        }
    };
    wait_until(
        "the tampered layer refused",
        Duration::from_secs(30),
        || rejected(1.0),
    )
    .await;
    let log = sched.logs();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("GpuTopology rejected at pull"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains(&format!("pull {}: layer digest mismatch", at(&v2))),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(&format!("keeping {}", &running[..12])),
        "{}",
        lines[0]
    );
    eprintln!("{}", lines[0]);
    assert_eq!(plugin_digest(&sched, &running).await, 1.0);
    // It still schedules, with the running version: a new pod is bound.
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "after-rejection", "namespace": "ml"},
        "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "10m"}}}]}
    });
    create_pod(&client, pod).await;
    wait_until(
        "a pod bound after the rejection",
        Duration::from_secs(60),
        || async { placements(&client).await["ml/after-rejection"].is_some() },
    )
    .await;

    // A digest the registry does not have.
    let wrong = sha256(b"no such manifest");
    replace(&config, &gpu_config(&at(&wrong), &r.plain, "", ""));
    wait_until("the wrong digest refused", Duration::from_secs(30), || {
        rejected(2.0)
    })
    .await;
    assert!(
        sched.logs().contains(&format!("pull {}: GET", at(&wrong))),
        "{}",
        sched.logs()
    );
    assert_eq!(plugin_digest(&sched, &running).await, 1.0);

    // A good new version: swapped in, and it schedules.
    let newer = variant(&good, &unique("run-good"));
    let v3 = push(&r, tmp.path(), &newer, &name, "v3");
    replace(&config, &gpu_config(&at(&v3), &r.plain, "", ""));
    let new_digest = sha256(&newer)["sha256:".len()..].to_string();
    wait_until(
        "the new version running",
        Duration::from_secs(60),
        || async { plugin_digest(&sched, &new_digest).await == 1.0 },
    )
    .await;
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "after-reload", "namespace": "ml"},
        "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "10m"}}}]}
    });
    create_pod(&client, pod).await;
    wait_until(
        "a pod bound by the new version",
        Duration::from_secs(60),
        || async { placements(&client).await["ml/after-reload"].is_some() },
    )
    .await;
    assert!(
        sched.logs().contains("GpuTopology success:"),
        "{}",
        sched.logs()
    );
    sched.terminate();
}
