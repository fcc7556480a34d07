//! `deploy/components/monitoring/prometheusrule.yaml`: its rules pass
//! `promtool check rules` (the Prometheus the tests run ships promtool),
//! and each alert fires on the series that should fire it and not on
//! healthy ones (`promtool test rules`, with the rule annotations left out
//! of the comparison). The Helm chart's PrometheusRule renders the same
//! file's spec (its `files/prometheusrule.yaml` is a link to it; the
//! rendering is compared in host/tests/kube/node.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn promtool(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (the prometheus package; scripts/test-servers installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

const RULE: &str = "deploy/components/monitoring/prometheusrule.yaml";

/// The PrometheusRule's `spec` (its `groups`).
fn rules() -> Value {
    let text = std::fs::read_to_string(repo().join(RULE)).unwrap();
    let rule: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(
        rule["metadata"]["labels"]["release"], "kube-prometheus-stack",
        "kube-prometheus-stack's default ruleSelector"
    );
    rule["spec"].clone()
}

#[test]
fn the_charts_rules_are_the_kustomize_components() {
    let link = repo().join("deploy/chart/wasmsched/files/prometheusrule.yaml");
    assert_eq!(
        std::fs::canonicalize(&link).unwrap(),
        std::fs::canonicalize(repo().join(RULE)).unwrap(),
        "{} is not a link to {RULE}",
        link.display()
    );
}

#[test]
fn the_rules_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.json"), rules().to_string()).unwrap();
    let (ok, out) = promtool(&["check", "rules", "rules.json"], dir.path());
    assert!(ok, "{out}");
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");
}

/// One alert test: `series` (name, values), the alert, whether it fires
/// at `at`, and the labels it carries then.
fn case(series: &[(&str, &str)], alert: &str, at: &str, fires: Option<Value>) -> Value {
    json!({
        "interval": "1m",
        "input_series": series.iter().map(|(s, v)| json!({"series": s, "values": v})).collect::<Vec<_>>(),
        "alert_rule_test": [{
            "eval_time": at,
            "alertname": alert,
            "exp_alerts": fires.map(|l| vec![json!({"exp_labels": l})]).unwrap_or_default(),
        }],
    })
}

#[test]
fn each_alert_fires_when_it_should() {
    let mut spec = rules();
    for g in spec["groups"].as_array_mut().unwrap() {
        for r in g["rules"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("annotations");
        }
    }
    let job = r#"job="wasmsched""#;
    let tests = vec![
        case(
            &[(&format!("leader_election_master_status{{{job},name=\"wasmsched\",instance=\"a\"}}"), "0x10")],
            "WasmschedNoLeader",
            "5m",
            Some(json!({"severity": "critical"})),
        ),
        case(
            &[
                (&format!("leader_election_master_status{{{job},name=\"wasmsched\",instance=\"a\"}}"), "0x10"),
                (&format!("leader_election_master_status{{{job},name=\"wasmsched\",instance=\"b\"}}"), "1x10"),
            ],
            "WasmschedNoLeader",
            "5m",
            None,
        ),
        case(
            &[(&format!("wasmsched_bindings_total{{{job},result=\"error\"}}"), "0+3x30")],
            "WasmschedBindingErrors",
            "20m",
            Some(json!({"severity": "warning"})),
        ),
        case(
            &[(&format!("wasmsched_bindings_total{{{job},result=\"error\"}}"), "5x30")],
            "WasmschedBindingErrors",
            "20m",
            None,
        ),
        case(
            &[(&format!("wasmsched_plugin_errors_total{{{job},profile=\"p\",plugin=\"GpuTopology\",cause=\"timeout\"}}"), "0+1x30")],
            "WasmschedPluginTimeouts",
            "20m",
            Some(json!({"severity": "warning", "profile": "p", "plugin": "GpuTopology"})),
        ),
        case(
            &[(&format!("wasmsched_plugin_errors_total{{{job},profile=\"p\",plugin=\"GpuTopology\",cause=\"timeout\"}}"), "0+1x30")],
            "WasmschedPluginErrors",
            "20m",
            None,
        ),
        case(
            &[(&format!("wasmsched_plugin_errors_total{{{job},profile=\"p\",plugin=\"Mine\",cause=\"trap\"}}"), "0+1x30")],
            "WasmschedPluginErrors",
            "20m",
            Some(json!({"severity": "warning", "profile": "p", "plugin": "Mine", "cause": "trap"})),
        ),
        case(
            &[(&format!("scheduler_pending_pods{{{job},queue=\"unschedulable\"}}"), "1+1x60")],
            "WasmschedPendingPodsGrowing",
            "40m",
            Some(json!({"severity": "warning"})),
        ),
        case(
            &[(&format!("scheduler_pending_pods{{{job},queue=\"unschedulable\"}}"), "7x60")],
            "WasmschedPendingPodsGrowing",
            "40m",
            None,
        ),
        case(
            &[(&format!("up{{{job},instance=\"a\"}}"), "0x10")],
            "WasmschedDown",
            "8m",
            Some(json!({"severity": "critical"})),
        ),
        case(
            &[(&format!("up{{{job},instance=\"a\"}}"), "1x10")],
            "WasmschedDown",
            "8m",
            None,
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.json"), spec.to_string()).unwrap();
    let file = json!({"rule_files": ["rules.json"], "evaluation_interval": "1m", "tests": tests});
    std::fs::write(dir.path().join("tests.json"), file.to_string()).unwrap();
    let (ok, out) = promtool(&["test", "rules", "tests.json"], dir.path());
    assert!(ok, "{out}");
    assert!(out.contains("SUCCESS"), "{out}");
}
