//! Bad manifests, bad configurations and bad plugins: the binary exits
//! with status 1 and ONE line on stderr, `error: ...`, that names the file
//! and the cause (and prints nothing on stdout).

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn bad(name: &str) -> String {
    s(&fixtures().join("bad").join(name))
}

fn cfg(name: &str) -> String {
    s(&fixtures().join("config").join(name))
}

fn one_node() -> String {
    s(&fixtures().join("one-node.yaml"))
}

fn simulate_file(path: &str) -> Output {
    wasmsched(&[
        "simulate",
        path,
        "--config",
        &s(&fixtures().join("native-config.yaml")),
    ])
}

fn simulate_config(config: &str) -> Output {
    wasmsched(&["simulate", &one_node(), "--config", config])
}

// ------------------------------------------------------------ manifests

#[test]
fn malformed_yaml() {
    let f = bad("malformed.yaml");
    assert_one_line_error(
        &simulate_file(&f),
        &[
            &format!("error: {f}: document 1: not valid YAML/JSON: "),
            "at line 5 column 5",
        ],
    );
}

#[test]
fn pod_with_an_invalid_cpu_quantity() {
    let f = bad("bad-quantity.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert_eq!(
        line,
        format!("error: {f}: document 2 (Pod shop/web): spec.containers[0].resources.requests.cpu: invalid quantity \"abc\": no number")
    );
}

#[test]
fn node_with_an_unknown_taint_effect() {
    let f = bad("bad-taint-effect.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert_eq!(
        line,
        format!("error: {f}: document 1 (Node gpu-1): spec.taints[1].effect: unknown taint effect \"NoScheduleEver\"")
    );
}

/// A ReplicaSet (read for PodTopologySpread's default constraints) whose
/// selector does not parse.
#[test]
fn replica_set_with_an_unknown_selector_operator() {
    let f = bad("bad-replicaset-selector.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert!(
        line.starts_with(&format!(
            "error: {f}: document 1 (ReplicaSet shop/web): spec.selector: "
        )) && line.contains("Near"),
        "{line}"
    );
}

#[test]
fn storage_capacity_with_an_invalid_quantity() {
    let f = bad("bad-storage-capacity.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert!(
        line.starts_with(&format!(
            "error: {f}: document 1 (CSIStorageCapacity kube-system/fast-a): capacity: "
        )) && line.contains("\"lots\""),
        "{line}"
    );
}

#[test]
fn document_without_kind() {
    let f = bad("no-kind.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert_eq!(
        line,
        format!("error: {f}: document 2: missing `kind` (expected Node, Pod or List)")
    );
}

#[test]
fn field_of_the_wrong_type() {
    let f = bad("wrong-type.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert_eq!(
        line,
        format!("error: {f}: document 1 (Pod default/p): spec.containers: invalid type: string \"main\", expected a sequence")
    );
}

#[test]
fn duplicate_node_names_in_one_file() {
    let f = bad("duplicate-nodes.yaml");
    let line = assert_one_line_error(&simulate_file(&f), &[]);
    assert_eq!(
        line,
        format!("error: {f}: document 3 (Node n1): duplicate Node n1 (first in {f} document 1)")
    );
}

#[test]
fn duplicate_node_names_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    write_manifest(&a, &[NodeB::new("n1").0]);
    write_manifest(&b, &[NodeB::new("n2").0, NodeB::new("n1").0]);
    let line = assert_one_line_error(&simulate_file(&s(dir.path())), &[]);
    assert_eq!(
        line,
        format!(
            "error: {}: document 2 (Node n1): duplicate Node n1 (first in {} document 1)",
            b.display(),
            a.display()
        )
    );
}

#[test]
fn duplicate_pods() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pods.yaml");
    write_manifest(
        &f,
        &[
            PodB::new("p").ns("team").0,
            PodB::new("q").ns("team").0,
            PodB::new("p").ns("team").0,
        ],
    );
    let line = assert_one_line_error(&simulate_file(&s(&f)), &[]);
    assert_eq!(
        line,
        format!(
            "error: {0}: document 3 (Pod team/p): duplicate Pod team/p (first in {0} document 1)",
            f.display()
        )
    );
}

#[test]
fn path_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("cluster.yaml");
    let line = assert_one_line_error(&simulate_file(&s(&missing)), &[]);
    assert_eq!(
        line,
        format!(
            "error: {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[test]
fn explain_of_a_pod_that_does_not_exist() {
    let o = wasmsched(&[
        "simulate",
        &s(&fixtures().join("small-cluster")),
        "--config",
        &s(&fixtures().join("native-config.yaml")),
        "--explain",
        "apps/ghost",
    ]);
    let line = assert_one_line_error(&o, &[]);
    assert_eq!(
        line,
        "error: --explain apps/ghost: no such pod in the manifests"
    );
}

// -------------------------------------------------------- configuration

#[test]
fn config_with_an_unknown_field() {
    let f = cfg("typo.yaml");
    let line = assert_one_line_error(&simulate_config(&f), &[]);
    assert!(
        line.starts_with(&format!(
            "error: config {f}: percentageOfNodesToScor: unknown field `percentageOfNodesToScor`, expected one of "
        )),
        "{line}"
    );
    assert!(line.contains("`percentageOfNodesToScore`"), "{line}");
    assert!(line.ends_with(" at line 3 column 1"), "{line}");
}

#[test]
fn config_with_an_unknown_nested_field() {
    let f = cfg("nested-typo.yaml");
    assert_one_line_error(
        &simulate_config(&f),
        &[
            &format!("error: config {f}: "),
            "unknown field `enabeld`, expected `enabled` or `disabled`",
            "line 5 column 7",
        ],
    );
}

#[test]
fn config_type_errors_name_the_field_once() {
    let f = cfg("wrong-type.yaml");
    let line = assert_one_line_error(&simulate_config(&f), &[]);
    assert_eq!(line, format!("error: config {f}: parallelism: invalid value \"many\", expected a non-negative integer at line 1 column 14"));
}

#[test]
fn config_with_an_unknown_plugin_name() {
    let line = assert_one_line_error(&simulate_config(&cfg("unknown-plugin.yaml")), &[]);
    assert!(
        line.starts_with(&format!(
            "error: config {}: profiles[0].plugins.filter (NodeResourcesFitt): unknown plugin \"NodeResourcesFitt\" (core plugins: NodeUnschedulable, ",
            cfg("unknown-plugin.yaml")
        )),
        "{line}"
    );
    assert!(
        line.ends_with("; wasm plugins need a wasmPlugins entry)"),
        "{line}"
    );
}

#[test]
fn config_with_a_weight_out_of_range() {
    let line = assert_one_line_error(&simulate_config(&cfg("bad-weight.yaml")), &[]);
    assert_eq!(
        line,
        format!("error: config {}: profiles[0].plugins.score.enabled[0].weight: must be between 0 and 2147483647 (0 counts as 1, as in kube-scheduler), got -1", cfg("bad-weight.yaml"))
    );
}

#[test]
fn config_build_errors_name_the_config_file() {
    for name in ["unknown-plugin.yaml", "bad-weight.yaml"] {
        let f = cfg(name);
        assert_one_line_error(&simulate_config(&f), &[&f]);
    }
    // The args are in the configuration file too.
    let dir = tempfile::tempdir().unwrap();
    let c = plugin_config(dir.path(), &s(&chaos_wasm()), r#"{"bogus": 1}"#);
    assert_one_line_error(&simulate_config(&c), &[&c, "bogus"]);
}

#[test]
fn config_file_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("scheduler.yaml");
    let line = assert_one_line_error(&simulate_config(&s(&missing)), &[]);
    assert_eq!(
        line,
        format!(
            "error: config {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

// ---------------------------------------------------------- wasm plugins

/// A config in `dir` with one wasm plugin `Mine` at `path` (relative to
/// the config file), enabled at every point of the only profile, with
/// `args`.
fn plugin_config(dir: &Path, path: &str, args: &str) -> String {
    let f = dir.join("scheduler.yaml");
    std::fs::write(
        &f,
        format!(
            "wasmPlugins:\n- name: Mine\n  path: {path}\nprofiles:\n- schedulerName: s\n  plugins:\n    multiPoint:\n      \
             disabled: [{{name: \"*\"}}]\n      enabled: [{{name: Mine}}]\n  pluginConfig:\n  - name: Mine\n    args: {args}\n"
        ),
    )
    .unwrap();
    s(&f)
}

/// The expected start of the error for plugin file `file`.
fn plugin_error(file: &Path) -> String {
    let config = file
        .parent()
        .unwrap()
        .ancestors()
        .find(|d| d.join("scheduler.yaml").exists())
        .unwrap()
        .join("scheduler.yaml");
    format!(
        "error: config {}: wasmPlugins[0].path: {}: ",
        config.display(),
        file.display()
    )
}

#[test]
fn plugin_file_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let c = plugin_config(dir.path(), "plugins/mine.wasm", "{}");
    let line = assert_one_line_error(&simulate_config(&c), &[]);
    // Resolved against the configuration file's directory.
    assert_eq!(
        line,
        format!(
            "{}No such file or directory (os error 2)",
            plugin_error(&dir.path().join("plugins/mine.wasm"))
        )
    );
}

#[test]
fn unused_plugin_file_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("scheduler.yaml");
    std::fs::write(
        &c,
        "wasmPlugins:\n- name: Mine\n  path: mine.wasm\nprofiles:\n- schedulerName: s\n  plugins:\n    multiPoint:\n      \
         disabled: [{name: GpuTopology}, {name: NetworkLocality}]\n",
    )
    .unwrap();
    assert_one_line_error(
        &simulate_config(&s(&c)),
        &[
            "wasmPlugins[0].path",
            "mine.wasm",
            "No such file or directory",
        ],
    );
}

#[test]
fn plugin_file_that_is_not_wasm() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("mine.wasm");
    std::fs::write(&wasm, "#!/bin/sh\necho this is not a component\n").unwrap();
    let c = plugin_config(dir.path(), "mine.wasm", "{}");
    let line = assert_one_line_error(&simulate_config(&c), &[]);
    assert_eq!(
        line,
        format!(
            "{}not a WebAssembly file (no \\0asm header)",
            plugin_error(&wasm)
        )
    );
}

#[test]
fn plugin_file_that_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("mine.wasm");
    let bytes = std::fs::read(chaos_wasm()).unwrap();
    std::fs::write(&wasm, &bytes[..bytes.len() / 3]).unwrap();
    let c = plugin_config(dir.path(), "mine.wasm", "{}");
    let line = assert_one_line_error(&simulate_config(&c), &[]);
    assert!(
        line.starts_with(&format!("{}compilation failed: ", plugin_error(&wasm))),
        "{line}"
    );
    assert!(
        line.contains("out of bounds") || line.contains("unexpected end"),
        "{line}"
    );
}

#[test]
fn plugin_file_that_is_a_core_module() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("mine.wasm");
    std::fs::write(&wasm, b"\0asm\x01\0\0\0").unwrap();
    let c = plugin_config(dir.path(), "mine.wasm", "{}");
    let line = assert_one_line_error(&simulate_config(&c), &[]);
    assert_eq!(
        line,
        format!(
            "{}is a core WebAssembly module, not a component (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)",
            plugin_error(&wasm)
        )
    );
}

#[test]
fn plugin_that_rejects_its_args() {
    let dir = tempfile::tempdir().unwrap();
    let c = plugin_config(dir.path(), &s(&chaos_wasm()), r#"{"bogus": 1}"#);
    let line = assert_one_line_error(&simulate_config(&c), &[]);
    assert!(
        line.starts_with(&format!(
            "error: config {c}: profiles[0].plugins (Mine): plugin Mine failed to start: rejected its args: chaos args: unknown field `bogus`"
        )),
        "{line}"
    );
}

#[test]
fn plugin_check_of_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let o = wasmsched(&["plugin", "check", &s(&core)]);
    let line = assert_one_line_error(&o, &[]);
    assert!(
        line.starts_with(&format!(
            "error: {}: is a core WebAssembly module, not a component",
            core.display()
        )),
        "{line}"
    );

    let missing: PathBuf = dir.path().join("missing.wasm");
    let o = wasmsched(&["plugin", "check", &s(&missing)]);
    let line = assert_one_line_error(&o, &[]);
    assert_eq!(
        line,
        format!(
            "error: {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

// ------------------------------------------------------------ `run`

fn run_with_config(yaml: &str) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = wasmsched(&[
        "run",
        "--config",
        &s(&path),
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    (out, s(&path))
}

#[test]
fn run_config_renew_deadline_must_be_shorter_than_the_lease() {
    let (out, path) =
        run_with_config("leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n");
    assert_one_line_error(
        &out,
        &[&format!(
            "error: config {path}: leaderElection.renewDeadline: must be shorter than leaseDuration"
        )],
    );
}

#[test]
fn run_config_rejects_other_locks_and_bad_rates() {
    let (out, _) = run_with_config("leaderElection:\n  resourceLock: configmaps\n");
    assert_one_line_error(
        &out,
        &["leaderElection.resourceLock: unsupported \"configmaps\" (only \"leases\")"],
    );
    let (out, _) = run_with_config("clientConnection:\n  qps: 0\n");
    assert_one_line_error(
        &out,
        &["clientConnection.qps: must be a positive number, not 0"],
    );
    let (out, _) = run_with_config("leaderElection:\n  leaseDuraton: 10s\n");
    assert_one_line_error(
        &out,
        &["leaderElection.leaseDuraton: unknown field `leaseDuraton`"],
    );
    let (out, _) = run_with_config("bindConcurrency: 0\n");
    assert_one_line_error(&out, &["bindConcurrency: must be at least 1"]);
}

#[test]
fn run_with_a_missing_kubeconfig_names_it() {
    let (out, _) = run_with_config("profiles:\n- schedulerName: s\n");
    assert_one_line_error(&out, &["error: kubeconfig /nonexistent/kubeconfig: "]);
}
