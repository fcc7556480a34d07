//! The deletion-cost controller against a real kube-apiserver (1.20.2) and
//! a real Prometheus scraping a test exporter on loopback
//! (`scripts/test-servers`, started by `scripts/test`).
//!
//! Each test works in a namespace of its own. Passes are driven one at a
//! time (one pass is one interval of the running controller), so "the
//! annotation follows within one interval" is asserted without clocks;
//! `run_controller_loop_follows_metrics` runs the real loop.

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::Client;
use prometheus::Registry;
use serde_json::{json, Value};

use wasmsched::deletion_cost::cluster;
use wasmsched::deletion_cost::decision::SkipReason;
use wasmsched::deletion_cost::report::Outcome;
use wasmsched::deletion_cost::{Controller, Mode, Report};

use support::*;

const OPT_IN: &str = "deletion-cost.wasmsched.io/enabled";

/// Series of the test exporter and the cost the documented formula gives
/// (docs/deletion-cost.md): requests x 5 + hit rate x 100 + response
/// bonus (capped at 1000), plus connections x 10 (capped at 1000), then
/// the cap of 1000.
const A: [(&str, f64); 4] = [
    ("app_active_requests", 12.0),      // 60
    ("app_cache_hit_ratio", 0.85),      // + 85
    ("app_response_seconds_avg", 0.08), // + 50 (< 100 ms)
    ("app_active_connections", 30.0),   // + 300
];
const A_COST: &str = "495";
const B: [(&str, f64); 4] = [
    ("app_active_requests", 2.0),      // 10
    ("app_cache_hit_ratio", 0.5),      // + 50
    ("app_response_seconds_avg", 0.3), // + 20 (< 500 ms)
    ("app_active_connections", 0.0),   // + 0
];
const B_COST: &str = "80";
const C: [(&str, f64); 4] = [
    ("app_active_requests", 300.0), // 1500 + 90 + 0 -> capped 1000
    ("app_cache_hit_ratio", 0.9),
    ("app_response_seconds_avg", 1.0),
    ("app_active_connections", 150.0), // 1500 -> capped 1000
];
const C_COST: &str = "1000"; // 2000, capped

fn with(base: &[(&'static str, f64)], name: &str, v: f64) -> Vec<(&'static str, f64)> {
    base.iter()
        .map(|(k, old)| (*k, if *k == name { v } else { *old }))
        .collect()
}

async fn pass(c: &mut Controller, client: &Client, ns: &str) -> Report {
    let inventory = cluster::list_namespace(client, ns).await.expect("list");
    c.pass(client, &inventory, Mode::Apply, Timestamp::now())
        .await
}

fn outcome<'a>(r: &'a Report, ns: &str, pod: &str) -> &'a Outcome {
    &r.row(ns, pod)
        .unwrap_or_else(|| panic!("no row for {pod}: {r:?}"))
        .outcome
}

fn skip_reason(r: &Report, ns: &str, pod: &str) -> SkipReason {
    match outcome(r, ns, pod) {
        Outcome::Skipped { reason, .. } => *reason,
        o => panic!("{pod}: expected a skip, got {o:?}"),
    }
}

fn count(c: &Controller, metric: &str, label: &str) -> u64 {
    let t = c.telemetry();
    match metric {
        "skips" => t.skips.with_label_values(&[label]).get(),
        "errors" => t.errors.with_label_values(&[label]).get(),
        _ => unreachable!(),
    }
}

fn series(ns: &str, name: &str, pod: &str) -> String {
    format!("{name}{{namespace=\"{ns}\",pod=\"{pod}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_follow_the_formula_metric_changes_hysteresis_and_never_a_user_cost() {
    let client = client().await;
    let ns = namespace(&client, "formula").await;
    let exporter = Exporter::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let expose = |a: &[(&str, f64)], b: &[(&str, f64)]| {
        exposition(
            &ns,
            &[("web-a", a), ("web-b", b), ("web-c", &C), ("web-user", &A)],
        )
    };
    exporter.set(expose(&A, &B));
    let _target = ScrapeTarget::add(&ns, exporter.addr);
    workload(
        &client,
        &ns,
        "web",
        &[(OPT_IN, "true")],
        &[
            TestPod::new("web-a"),
            TestPod::new("web-b"),
            TestPod::new("web-c"),
            TestPod::new("web-user").cost("7"),
        ],
    )
    .await;
    until_prometheus(&series(&ns, "app_active_connections", "web-c"), Some("150")).await;
    let cfg = config(&format!(
        "  hysteresis: 10\n{}  args: {{warmUp: false}}\n",
        prometheus_queries(&env().prometheus)
    ));
    let registry = Registry::new();
    let mut c = Controller::new(cfg, &registry).unwrap();
    let user_before = cost_and_version(&client, &ns, "web-user").await;

    // Costs match the formula for each pod's metrics.
    let r = pass(&mut c, &client, &ns).await;
    for (pod, want) in [("web-a", A_COST), ("web-b", B_COST), ("web-c", C_COST)] {
        let (cost, _) = cost_and_version(&client, &ns, pod).await;
        assert_eq!(cost.as_deref(), Some(want), "{pod}: {}", r.table());
    }
    assert_eq!(c.telemetry().updates.get(), 3);
    assert_eq!(
        c.telemetry().costs.pods(),
        4,
        "the distribution counts every pod"
    );
    // A cost a user set is never touched (not even read into a write).
    assert_eq!(
        cost_and_version(&client, &ns, "web-user").await,
        user_before
    );
    assert_eq!(skip_reason(&r, &ns, "web-user"), SkipReason::UserSet);

    // web-a moves by 5 (inside the hysteresis of 10), web-b by 190.
    let versions_before: Vec<_> =
        futures::future::join_all(["web-a", "web-c"].map(|p| cost_and_version(&client, &ns, p)))
            .await;
    exporter.set(expose(
        &with(&A, "app_active_requests", 13.0),
        &with(&B, "app_active_requests", 40.0),
    ));
    until_prometheus(&series(&ns, "app_active_requests", "web-b"), Some("40")).await;
    let r = pass(&mut c, &client, &ns).await;
    // One pass later the annotation follows the metric.
    assert_eq!(
        cost_and_version(&client, &ns, "web-b").await.0.as_deref(),
        Some("270"),
        "{}",
        r.table()
    );
    // The small change wrote nothing: same value, same resourceVersion.
    let versions_after: Vec<_> =
        futures::future::join_all(["web-a", "web-c"].map(|p| cost_and_version(&client, &ns, p)))
            .await;
    assert_eq!(versions_after, versions_before);
    assert_eq!(skip_reason(&r, &ns, "web-a"), SkipReason::Hysteresis);
    assert_eq!(r.row(&ns, "web-a").unwrap().cost, Some(500));
    assert_eq!(skip_reason(&r, &ns, "web-c"), SkipReason::Unchanged);
    assert_eq!(c.telemetry().updates.get(), 4, "writes so far");
    assert_eq!(count(&c, "skips", "hysteresis"), 1);

    // A person takes web-b over: the controller leaves it from now on.
    user_sets_cost(&client, &ns, "web-b", "999").await;
    let taken = cost_and_version(&client, &ns, "web-b").await;
    exporter.set(expose(&A, &with(&B, "app_active_requests", 100.0)));
    until_prometheus(&series(&ns, "app_active_requests", "web-b"), Some("100")).await;
    let r = pass(&mut c, &client, &ns).await;
    assert_eq!(cost_and_version(&client, &ns, "web-b").await, taken);
    assert_eq!(skip_reason(&r, &ns, "web-b"), SkipReason::UserSet);
    assert_eq!(
        cost_and_version(&client, &ns, "web-user").await,
        user_before
    );
    assert_eq!(c.telemetry().updates.get(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_down_causes_no_writes_and_a_visible_error() {
    let client = client().await;
    let ns = namespace(&client, "promdown").await;
    let exporter = Exporter::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    exporter.set(exposition(&ns, &[("web-a", &A)]));
    let _target = ScrapeTarget::add(&ns, exporter.addr);
    workload(
        &client,
        &ns,
        "web",
        &[(OPT_IN, "true")],
        &[TestPod::new("web-a")],
    )
    .await;
    until_prometheus(&series(&ns, "app_active_connections", "web-a"), Some("30")).await;

    let upstream: std::net::SocketAddr = env()
        .prometheus
        .trim_start_matches("http://")
        .parse()
        .expect("WASMSCHED_TEST_PROMETHEUS is http://HOST:PORT");
    let proxy = Proxy::start("127.0.0.1:0".parse().unwrap(), upstream).await;
    let proxy_addr = proxy.addr;
    let cfg = config(&format!(
        "{}  args: {{warmUp: false}}\n",
        prometheus_queries(&format!("http://{proxy_addr}"))
    ));
    let registry = Registry::new();
    let mut c = Controller::new(cfg, &registry).unwrap();
    pass(&mut c, &client, &ns).await;
    assert_eq!(
        cost_and_version(&client, &ns, "web-a").await.0.as_deref(),
        Some(A_COST)
    );

    // Prometheus goes away; the metric changes meanwhile.
    proxy.stop().await;
    exporter.set(exposition(
        &ns,
        &[("web-a", &with(&A, "app_active_requests", 100.0))],
    ));
    until_prometheus(&series(&ns, "app_active_requests", "web-a"), Some("100")).await;
    let before = cost_and_version(&client, &ns, "web-a").await;
    let r = pass(&mut c, &client, &ns).await;
    assert_eq!(
        cost_and_version(&client, &ns, "web-a").await,
        before,
        "no write"
    );
    assert_eq!(skip_reason(&r, &ns, "web-a"), SkipReason::MetricsFault);
    let row = r.row(&ns, "web-a").unwrap();
    assert!(
        row.faults
            .iter()
            .all(|f| f.contains("Prometheus unreachable")),
        "{:?}",
        row.faults
    );
    assert!(count(&c, "errors", "prometheus-unreachable") >= 1);
    assert_eq!(c.telemetry().updates.get(), 1);
    let text = r.table();
    assert!(
        text.contains("skip: metrics-fault") && text.contains("Prometheus unreachable"),
        "{text}"
    );

    // Back: the new cost is written: 100 x 5 + 85 + 50, plus 300.
    let proxy = Proxy::start(proxy_addr, upstream).await;
    pass(&mut c, &client, &ns).await;
    assert_eq!(
        cost_and_version(&client, &ns, "web-a").await.0.as_deref(),
        Some("935")
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_metrics_hold_the_cost() {
    let client = client().await;
    let ns = namespace(&client, "garbage").await;
    let exporter = Exporter::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let pods = ["g-nan", "g-neg", "g-missing"];
    exporter.set(exposition(&ns, &pods.map(|p| (p, &A[..]))));
    let _target = ScrapeTarget::add(&ns, exporter.addr);
    workload(
        &client,
        &ns,
        "web",
        &[(OPT_IN, "true")],
        &pods.map(TestPod::new),
    )
    .await;
    until_prometheus(
        &series(&ns, "app_active_connections", "g-missing"),
        Some("30"),
    )
    .await;
    let cfg = config(&format!(
        "{}  args: {{warmUp: false}}\n",
        prometheus_queries(&env().prometheus)
    ));
    let registry = Registry::new();
    let mut c = Controller::new(cfg, &registry).unwrap();
    pass(&mut c, &client, &ns).await;
    let before: Vec<_> =
        futures::future::join_all(pods.map(|p| cost_and_version(&client, &ns, p))).await;
    assert!(
        before.iter().all(|(c, _)| c.as_deref() == Some(A_COST)),
        "{before:?}"
    );

    exporter.set(exposition(
        &ns,
        &[
            ("g-nan", &with(&A, "app_active_requests", f64::NAN)),
            ("g-neg", &with(&A, "app_active_connections", -3.0)),
        ],
    ));
    until_prometheus(&series(&ns, "app_active_requests", "g-missing"), None).await;
    until_prometheus(&series(&ns, "app_active_requests", "g-nan"), Some("NaN")).await;
    let r = pass(&mut c, &client, &ns).await;
    let after: Vec<_> =
        futures::future::join_all(pods.map(|p| cost_and_version(&client, &ns, p))).await;
    assert_eq!(after, before, "no annotation churn: {}", r.table());
    for p in pods {
        assert_eq!(skip_reason(&r, &ns, p), SkipReason::MetricsFault, "{p}");
    }
    for cause in ["metric-nan", "metric-negative", "metric-missing"] {
        assert!(count(&c, "errors", cause) >= 1, "{cause}: {}", r.table());
    }
    let missing = &r.row(&ns, "g-missing").unwrap().faults;
    assert!(
        missing
            .iter()
            .any(|f| f.contains("series is missing (last value 12")),
        "{missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_metrics_endpoints() {
    let client = client().await;
    let ns = namespace(&client, "endpoint").await;
    // One exporter per pod IP (127.0.0.x is loopback), on one port.
    let ips = ["127.0.0.21", "127.0.0.22"];
    let (exporters, port) = 'bind: loop {
        let first = Exporter::start(format!("{}:0", ips[0]).parse().unwrap())
            .await
            .unwrap();
        let port = first.addr.port();
        let mut all = vec![first];
        for ip in &ips[1..] {
            match Exporter::start(format!("{ip}:{port}").parse().unwrap()).await {
                Ok(e) => all.push(e),
                Err(_) => continue 'bind,
            }
        }
        break (all, port);
    };
    let plain = |series: &[(&str, f64)]| {
        series
            .iter()
            .map(|(k, v)| format!("# TYPE {k} gauge\n{k} {v}\n"))
            .collect::<String>()
    };
    exporters[0].set(plain(&A));
    exporters[1].set(plain(&B));
    workload(
        &client,
        &ns,
        "web",
        &[(OPT_IN, "true")],
        &[
            TestPod::new("e-a").ip(ips[0]),
            TestPod::new("e-b").ip(ips[1]),
            // Nothing listens there.
            TestPod::new("e-down").ip("127.0.0.23"),
        ],
    )
    .await;
    let cfg = config(&format!(
        r#"  podMetrics:
    port: {port}
    metrics:
      active_requests: app_active_requests
      cache_hit_rate: app_cache_hit_ratio
      avg_response_time_seconds: app_response_seconds_avg
      active_connections: app_active_connections
  args: {{warmUp: false}}
"#
    ));
    let registry = Registry::new();
    let mut c = Controller::new(cfg, &registry).unwrap();
    let r = pass(&mut c, &client, &ns).await;
    assert_eq!(
        cost_and_version(&client, &ns, "e-a").await.0.as_deref(),
        Some(A_COST),
        "{}",
        r.table()
    );
    assert_eq!(
        cost_and_version(&client, &ns, "e-b").await.0.as_deref(),
        Some(B_COST)
    );
    assert_eq!(cost_and_version(&client, &ns, "e-down").await.0, None);
    assert_eq!(skip_reason(&r, &ns, "e-down"), SkipReason::MetricsFault);
    assert!(count(&c, "errors", "pod-endpoint-unreachable") >= 1);

    exporters[1].set(plain(&with(&B, "app_active_connections", 20.0)));
    let r = pass(&mut c, &client, &ns).await;
    assert_eq!(
        cost_and_version(&client, &ns, "e-b").await.0.as_deref(),
        Some("280"),
        "{}",
        r.table()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_retried_and_a_cost_set_meanwhile_is_kept() {
    let client = client().await;
    let ns = namespace(&client, "conflict").await;
    workload(
        &client,
        &ns,
        "web",
        &[(OPT_IN, "true")],
        &[TestPod::new("c-a"), TestPod::new("c-b")],
    )
    .await;
    // No metric source: the warm-up rule alone (the pods are new: -50).
    let cfg = config("  hysteresis: 0\n");
    let registry = Registry::new();
    let mut c = Controller::new(cfg, &registry).unwrap();
    let stale = cluster::list_namespace(&client, &ns).await.unwrap();
    // Both pods change after the controller read them.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.patch(
        "c-a",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    user_sets_cost(&client, &ns, "c-b", "7").await;

    let r = c.pass(&client, &stale, Mode::Apply, Timestamp::now()).await;
    assert!(r.conflicts_retried >= 2, "{r:?}");
    assert_eq!(
        cost_and_version(&client, &ns, "c-a").await.0.as_deref(),
        Some("-50")
    );
    assert_eq!(
        cost_and_version(&client, &ns, "c-b").await.0.as_deref(),
        Some("7")
    );
    assert_eq!(skip_reason(&r, &ns, "c-b"), SkipReason::UserSet);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_pods_are_skipped() {
    let client = client().await;
    let ns = namespace(&client, "terminating").await;
    workload(
        &client,
        &ns,
        "web",
        &[(OPT_IN, "true")],
        &[TestPod::new("t-a")],
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.patch(
        "t-a",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": ["test.wasmsched.io/hold"]}})),
    )
    .await
    .unwrap();
    pods.delete("t-a", &DeleteParams::default()).await.unwrap();
    let registry = Registry::new();
    let mut c = Controller::new(config("  hysteresis: 0\n"), &registry).unwrap();
    let r = pass(&mut c, &client, &ns).await;
    assert_eq!(skip_reason(&r, &ns, "t-a"), SkipReason::Terminating);
    assert_eq!(cost_and_version(&client, &ns, "t-a").await.0, None);
    pods.patch(
        "t-a",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_controller_loop_follows_metrics() {
    let client = client().await;
    let ns = namespace(&client, "loop").await;
    let exporter = Exporter::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    exporter.set(exposition(&ns, &[("l-a", &A)]));
    let _target = ScrapeTarget::add(&ns, exporter.addr);
    // An opt-in label of its own: the loop watches every namespace.
    let label = format!("test.wasmsched.io/{ns}");
    workload(
        &client,
        &ns,
        "web",
        &[(label.as_str(), "true")],
        &[TestPod::new("l-a")],
    )
    .await;
    until_prometheus(&series(&ns, "app_active_connections", "l-a"), Some("30")).await;
    let cfg = config(&format!(
        "  interval: 1s\n  workloads: {{label: '{label}'}}\n{}  args: {{warmUp: false}}\n",
        prometheus_queries(&env().prometheus)
    ));
    let registry = Box::leak(Box::new(Registry::new()));
    let token = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(wasmsched::deletion_cost::run_controller(
        client.clone(),
        cfg,
        registry,
        token.clone().cancelled_owned(),
    ));
    let until_cost = |want: &'static str| {
        let client = client.clone();
        let ns = ns.clone();
        async move {
            for _ in 0..600 {
                if cost_and_version(&client, &ns, "l-a").await.0.as_deref() == Some(want) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("l-a never got cost {want}");
        }
    };
    until_cost(A_COST).await;
    exporter.set(exposition(
        &ns,
        &[("l-a", &with(&A, "app_active_connections", 60.0))],
    ));
    until_cost("795").await;
    token.cancel();
    task.await.unwrap().expect("the controller stops cleanly");
    let text = {
        let mut buf = Vec::new();
        use prometheus::Encoder;
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut buf)
            .unwrap();
        String::from_utf8(buf).unwrap()
    };
    assert!(
        text.contains("wasmsched_deletion_cost_updates_total 2"),
        "{text}"
    );
    // The distribution of the last pass: one pod, at 795.
    assert!(
        text.contains("wasmsched_pod_deletion_cost_bucket{le=\"750\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("wasmsched_pod_deletion_cost_bucket{le=\"1000\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("wasmsched_pod_deletion_cost_count 1"),
        "{text}"
    );
}

/// Runs the binary against the test API server.
fn wasmsched(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .env_remove("WASMSCHED_LOG")
        .output()
        .expect("running wasmsched");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_command_dry_run_then_apply() {
    let client = client().await;
    let ns = namespace(&client, "cli").await;
    let label = format!("test.wasmsched.io/{ns}");
    workload(
        &client,
        &ns,
        "web",
        &[(label.as_str(), "true")],
        &[TestPod::new("o-a"), TestPod::new("o-b").cost("3")],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    // No metric source: young pods get the warm-up cost.
    std::fs::write(
        &config,
        format!("deletionCost:\n  workloads: {{label: '{label}'}}\n"),
    )
    .unwrap();
    let kubeconfig = env().kubeconfig.display().to_string();
    let config = config.display().to_string();
    let base = [
        "deletion-cost",
        "--kubeconfig",
        &kubeconfig,
        "--config",
        &config,
    ];

    let (ok, out, err) = wasmsched(&[&base[..], &["--dry-run"]].concat());
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("{ns}/o-a")) && out.contains("would set (none) -> -50"),
        "{out}"
    );
    assert!(out.contains("skip: user-set"), "{out}");
    assert!(
        out.contains("2 pod(s): 1 would be written (dry run), 1 skipped (1 user-set)"),
        "{out}"
    );
    assert_eq!(cost_and_version(&client, &ns, "o-a").await.0, None);

    let (ok, out, err) = wasmsched(&[&base[..], &["--output", "json"]].concat());
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let row = v["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pod"] == "o-a")
        .unwrap();
    assert_eq!(
        row["outcome"],
        json!({"action": "written", "from": null, "to": -50})
    );
    assert_eq!(
        cost_and_version(&client, &ns, "o-a").await.0.as_deref(),
        Some("-50")
    );
    assert_eq!(
        cost_and_version(&client, &ns, "o-b").await.0.as_deref(),
        Some("3")
    );

    // A configuration error is one line naming the field.
    std::fs::write(
        dir.path().join("bad.yaml"),
        "deletionCost:\n  hysteresis: -1\n",
    )
    .unwrap();
    let bad = dir.path().join("bad.yaml").display().to_string();
    let (ok, _, err) = wasmsched(&[
        "deletion-cost",
        "--kubeconfig",
        &kubeconfig,
        "--config",
        &bad,
    ]);
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("deletionCost.hysteresis"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_preview_orders_by_the_costs_on_the_pods() {
    let client = client().await;
    let ns = namespace(&client, "preview").await;
    workload(
        &client,
        &ns,
        "web",
        &[],
        &[
            TestPod::new("p-high").cost("100"),
            TestPod::new("p-low").cost("-10"),
            TestPod::new("p-mid").cost("5"),
            TestPod {
                ready: false,
                ..TestPod::new("p-unready").cost("1000")
            },
        ],
    )
    .await;
    let kubeconfig = env().kubeconfig.display().to_string();
    let workload = format!("{ns}/Deployment/web");
    let (ok, out, err) = wasmsched(&[
        "scale-down-preview",
        "--kubeconfig",
        &kubeconfig,
        "--workload",
        &workload,
        "--replicas",
        "1",
        "--output",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let order: Vec<(&str, bool, Option<&str>)> = v["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap(),
                p["deleted"].as_bool().unwrap(),
                p["before_next"]["rule"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("p-unready", true, Some("not-ready")),
            ("p-low", true, Some("deletion-cost")),
            ("p-mid", true, Some("deletion-cost")),
            ("p-high", false, None),
        ]
    );
}

/// Timing of passes over many pods (not run by default; numbers for
/// docs/deletion-cost.md): `cargo test -p wasmsched --test deletion_cost
/// -- --ignored --nocapture measure_pass`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_pass() {
    const PODS: usize = 200;
    let client = client().await;
    let ns = namespace(&client, "measure").await;
    let exporter = Exporter::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let names: Vec<String> = (0..PODS).map(|i| format!("m-{i:03}")).collect();
    let all: Vec<(&str, &[(&str, f64)])> = names.iter().map(|n| (n.as_str(), &A[..])).collect();
    exporter.set(exposition(&ns, &all));
    let _target = ScrapeTarget::add(&ns, exporter.addr);
    let pods: Vec<TestPod> = names.iter().map(|n| TestPod::new(n)).collect();
    workload(&client, &ns, "web", &[(OPT_IN, "true")], &pods).await;
    until_prometheus(
        &series(&ns, "app_active_connections", &names[PODS - 1]),
        Some("30"),
    )
    .await;
    let cfg = config(&format!(
        "  writesPerSecond: 1000\n{}  args: {{warmUp: false}}\n",
        prometheus_queries(&env().prometheus)
    ));
    let registry = Registry::new();
    let mut c = Controller::new(cfg, &registry).unwrap();
    for label in [
        "first pass (200 writes)",
        "second pass (no writes)",
        "third pass (no writes)",
    ] {
        let inventory = cluster::list_namespace(&client, &ns).await.unwrap();
        let t = std::time::Instant::now();
        let r = c
            .pass(&client, &inventory, Mode::Apply, Timestamp::now())
            .await;
        eprintln!(
            "{label}: {:.0} ms, {} ({} queries)",
            t.elapsed().as_secs_f64() * 1e3,
            r.summary(),
            PODS * 4
        );
    }
    // The policy alone.
    let policy = wasmsched::deletion_cost::policy::CostPolicy::new(&c.config().policy).unwrap();
    let inventory = cluster::list_namespace(&client, &ns).await.unwrap();
    let status =
        wasmsched::deletion_cost::policy::pod_status(&inventory.pods[0], Timestamp::now()).unwrap();
    let metrics: Vec<(String, f64)> = [
        ("active_requests", 12.0),
        ("cache_hit_rate", 0.85),
        ("avg_response_time_seconds", 0.08),
        ("active_connections", 30.0),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), *v))
    .collect();
    let n = 2000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        policy.cost(&status, &metrics).unwrap();
    }
    eprintln!(
        "policy call: {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
