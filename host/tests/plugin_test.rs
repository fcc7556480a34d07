//! `wasmsched plugin test`: a case file that passes, one that fails with
//! the diff shown, and case files that are wrong (one-line errors), on the
//! built-in GpuTopology component.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use wasmsched::plugin_test::{CaseFile, Diff};
use wasmsched::wasm::{Limits, PluginModule};

fn gpu_wasm() -> PathBuf {
    Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("gpu_topology.wasm")
}

fn cases(name: &str) -> PathBuf {
    fixtures().join("plugin-test").join(name)
}

fn test_cli(cases_file: &Path, extra: &[&str]) -> Output {
    let plugin = gpu_wasm();
    let mut args = vec![
        "plugin",
        "test",
        plugin.to_str().unwrap(),
        "--cases",
        cases_file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    wasmsched(&args)
}

#[test]
fn a_passing_case_file() {
    let o = test_cli(&cases("gpu-topology.cases.yaml"), &[]);
    assert!(o.success, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    assert_eq!(
        o.stdout,
        "ok    an A100 pod fits the A100 node only\n\
         ok    a pod without GPUs skips Filter and prefers the CPU node\n\
         ok    a bad annotation makes the pod unschedulable\n\
         3 passed, 0 failed\n"
    );
}

#[test]
fn a_failing_case_file_shows_the_diff() {
    let o = test_cli(&cases("gpu-topology.failing.cases.yaml"), &[]);
    assert!(!o.success);
    assert_eq!(o.code, Some(1));
    assert_eq!(
        o.stdout,
        "FAIL  an A100 pod fits the A100 node only\n\
         \x20     filter cpu\n\
         \x20       - Success\n\
         \x20       + UnschedulableAndUnresolvable: Not enough GPUs\n\
         \x20     score a100\n\
         \x20       - 90\n\
         \x20       + 85\n\
         ok    a pod without GPUs skips Filter and prefers the CPU node\n\
         FAIL  a bad annotation makes the pod unschedulable\n\
         \x20     cycle-start error\n\
         \x20       - invalid annotation gpu.nvidia.com/memory=\"lots\": not a number\n\
         \x20       + invalid annotation gpu.nvidia.com/memory=\"lots\": not a non-negative integer (MiB)\n\
         1 passed, 2 failed\n"
    );
}

#[test]
fn args_on_the_command_line_replace_the_files() {
    // Under `spread` the A100 node (2 of 8 GPUs free) scores lower.
    let o = test_cli(
        &cases("gpu-topology.cases.yaml"),
        &["--args", r#"{"policy": "spread"}"#],
    );
    assert!(!o.success);
    assert!(
        o.stdout.contains("      score a100\n        - 85\n"),
        "{}",
        o.stdout
    );
    let bad = test_cli(
        &cases("gpu-topology.cases.yaml"),
        &["--args", r#"{"policy": 1}"#],
    );
    assert_one_line_error(
        &bad,
        &[
            "gpu_topology.wasm: failed to start",
            "rejected its args",
            "policy",
        ],
    );
}

#[test]
fn scores_of_nodes_filter_rejected_and_skipped_points_are_explained() {
    let text = std::fs::read_to_string(cases("gpu-topology.cases.yaml"))
        .unwrap()
        .replace("score: {a100: 85}", "score: {a100: 85, h100: 10}")
        .replace(
            "filter: {h100: Success}",
            "filter: {h100: \"Unschedulable: Not enough free GPUs\"}",
        );
    let file = CaseFile::parse(&text).unwrap();
    let module = PluginModule::compile(&std::fs::read(gpu_wasm()).unwrap()).unwrap();
    let report = wasmsched::plugin_test::run(&module, &file, None, Limits::default()).unwrap();
    assert_eq!(
        report.cases[0].diffs,
        vec![Diff {
            what: "score h100".into(),
            expected: "10".into(),
            got: "not scored: Filter said UnschedulableAndUnresolvable: GPU model mismatch".into(),
        }]
    );
    assert_eq!(
        report.cases[1].diffs,
        vec![Diff {
            what: "filter h100".into(),
            expected: "Unschedulable: Not enough free GPUs".into(),
            got: "Success".into(),
        }]
    );
}

#[test]
fn a_wrong_case_file_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(cases("gpu-topology.cases.yaml")).unwrap();
    let wrong: [(&str, String, &[&str]); 5] = [
        (
            "unknown node",
            good.replace("score: {a100: 85}", "score: {a10: 85}"),
            &[
                "cases[0] \"an A100 pod fits the A100 node only\" expect.score.a10",
                "no node of that name",
            ],
        ),
        (
            "bad verdict",
            good.replace("a100: Success", "a100: Fits"),
            &["expect.filter.a100", "\"Fits\" is not a verdict"],
        ),
        (
            "unknown field",
            good.replace("  expect:\n    plan:", "  expected:\n    plan:"),
            &["cases[0]", "unknown field `expected`"],
        ),
        (
            "pending pod among placed pods",
            good.replace("    nodeName: a100\n", ""),
            &["pods[0] (Pod ml/trainer)", "spec.nodeName: missing"],
        ),
        (
            "bad quantity",
            good.replace("cpu: \"16\"", "cpu: sixteen"),
            &["nodes[2]", "status.allocatable.cpu", "invalid quantity"],
        ),
    ];
    for (what, text, needles) in wrong {
        let file = dir.path().join("cases.yaml");
        std::fs::write(&file, text).unwrap();
        let o = test_cli(&file, &[]);
        let line = assert_one_line_error(&o, needles);
        assert!(line.contains("cases.yaml: "), "{what}: {line}");
    }
    let missing = test_cli(&dir.path().join("nope.yaml"), &[]);
    assert_one_line_error(&missing, &["case file", "nope.yaml"]);
}

#[test]
fn deletion_cost_cases_call_deletion_cost() {
    let text = r#"
nodes: [{metadata: {name: n}}]
cases:
- name: a cost
  deletionCost:
    pod: {metadata: {name: web-1, namespace: shop}}
    ageSeconds: 3600
    metrics: {cpu: 0.25}
  expect: {deletionCost: 5}
- name: no opinion
  deletionCost: {pod: {metadata: {name: web-2}}}
  expect: {deletionCost: null}
"#;
    let file = CaseFile::parse(text).unwrap();
    let module = PluginModule::compile(&std::fs::read(gpu_wasm()).unwrap()).unwrap();
    let report = wasmsched::plugin_test::run(&module, &file, None, Limits::default()).unwrap();
    let got = "error: the plugin does not export deletion-cost";
    assert_eq!(
        report.cases[0].diffs,
        vec![Diff {
            what: "deletion-cost".into(),
            expected: "5".into(),
            got: got.into(),
        }]
    );
    assert_eq!(report.cases[1].diffs[0].expected, "null (no opinion)");
    for (bad, needle) in [
        ("expect: {deletionCost: 1.5}", "1.5 is not a 32-bit integer"),
        ("expect: {deletionCost: [1]}", "expected an integer, null"),
        ("expect: {score: {n: 1}}", "need a `pod` input"),
    ] {
        let err = CaseFile::parse(&text.replace("expect: {deletionCost: 5}", bad)).unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
    }
}
