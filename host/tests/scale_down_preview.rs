//! `wasmsched scale-down-preview` on manifests: the order of the
//! ReplicaSet controller, one comparison decided by each of its eight
//! rules (examples/scale-down), and bad input.

mod common;

use common::*;
use serde_json::Value;

fn example() -> String {
    repo_root()
        .join("examples/scale-down")
        .display()
        .to_string()
}

const NOW: &str = "2026-01-10T00:00:00Z";

fn preview_json(args: &[&str]) -> Value {
    let mut all = vec!["scale-down-preview", "--output", "json", "--now", NOW];
    all.extend_from_slice(args);
    let o = wasmsched(&all);
    assert!(o.success, "stderr:\n{}", o.stderr);
    serde_json::from_str(&o.stdout).expect("json output")
}

#[test]
fn example_order_shows_each_of_the_eight_rules() {
    let ex = example();
    let p = preview_json(&["--replicas", "4", &ex]);
    let pods: Vec<&str> = p["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pod"].as_str().unwrap())
        .collect();
    assert_eq!(
        pods,
        [
            "web-7d9f-pend1",
            "web-7d9f-pend2",
            "web-7d9f-nrdy",
            "web-7d9f-warm",
            "web-7d9f-dbl",
            "web-7d9f-new",
            "web-7d9f-crash",
            "web-7d9f-young",
            "web-7d9f-old"
        ]
    );
    let rules: Vec<&str> = p["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["before_next"]["rule"].as_str())
        .collect();
    assert_eq!(
        rules,
        [
            "unassigned",
            "phase",
            "not-ready",
            "deletion-cost",
            "doubled-up",
            "ready-time",
            "restarts",
            "creation-time"
        ]
    );
    let deleted: Vec<&str> = p["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["deleted"] == true)
        .map(|p| p["pod"].as_str().unwrap())
        .collect();
    assert_eq!(deleted, pods[..5]);
    assert_eq!(p["deletes"], 5);
    assert_eq!(p["workload"], "ReplicaSet shop/web-7d9f (Deployment web)");
}

#[test]
fn deployment_and_replicaset_targets_agree() {
    let ex = example();
    let by_dep = preview_json(&["--replicas", "7", "--workload", "shop/Deployment/web", &ex]);
    let by_rs = preview_json(&["--replicas", "7", "--workload", "shop/rs/web-7d9f", &ex]);
    assert_eq!(by_dep["pods"], by_rs["pods"]);
    assert_eq!(by_dep["deletes"], 2);
}

#[test]
fn table_names_the_rule_of_each_comparison() {
    let ex = example();
    let o = wasmsched(&["scale-down-preview", "--replicas", "8", "--now", NOW, &ex]);
    assert!(o.success, "{}", o.stderr);
    assert!(
        o.stdout.starts_with("ReplicaSet shop/web-7d9f (Deployment web): 9 active pod(s), target 8: the ReplicaSet controller deletes 1, in this order:"),
        "{}",
        o.stdout
    );
    for rule in 1..=8 {
        assert!(
            o.stdout.contains(&format!("rule {rule} (")),
            "rule {rule}:\n{}",
            o.stdout
        );
    }
}

#[test]
fn scaling_up_deletes_nothing() {
    let ex = example();
    let p = preview_json(&["--replicas", "12", &ex]);
    assert_eq!(p["deletes"], 0);
}

#[test]
fn bad_input_is_one_line() {
    let ex = example();
    let o = wasmsched(&[
        "scale-down-preview",
        "--replicas",
        "1",
        "--workload",
        "shop/StatefulSet/db",
        &ex,
    ]);
    assert_one_line_error(&o, &["--workload", "StatefulSet", "ReplicaSet pods only"]);
    let o = wasmsched(&[
        "scale-down-preview",
        "--replicas",
        "1",
        "--workload",
        "shop/Deployment/nope",
        &ex,
    ]);
    assert_one_line_error(&o, &["Deployment shop/nope: not found"]);
    let o = wasmsched(&[
        "scale-down-preview",
        "--replicas",
        "1",
        "--now",
        "yesterday",
        &ex,
    ]);
    assert_one_line_error(&o, &["--now \"yesterday\""]);
    let o = wasmsched(&["scale-down-preview", "--replicas", "1"]);
    assert_one_line_error(&o, &["--workload NS/KIND/NAME", "manifest PATHs"]);
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("pods.yaml");
    std::fs::write(
        &bad,
        "kind: Pod\nmetadata: {name: x}\nspec: {containers: 3}\n",
    )
    .unwrap();
    let o = wasmsched(&[
        "scale-down-preview",
        "--replicas",
        "1",
        bad.to_str().unwrap(),
    ]);
    assert_one_line_error(&o, &["pods.yaml", "document 1 (Pod", "spec.containers"]);
}
