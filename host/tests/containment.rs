//! A plugin that loops forever, grows memory without bound, traps, or
//! returns an out-of-range score is stopped within its limit, handled by
//! its failure policy, and the other pods still schedule. Uses the real
//! `chaos` component built by host/build.rs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wasmsched::{config, manifest, simulate};

fn chaos_wasm() -> PathBuf {
    Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("chaos.wasm")
}

const CLUSTER: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: node-a, labels: {chaos/score: "10"}}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: node-b, labels: {chaos/score: "90"}}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: node-c, labels: {chaos/reject: "true", chaos/score: "100"}}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
"#;

fn pods() -> String {
    (1..=4)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: default, creationTimestamp: \"2026-01-01T00:00:0{i}Z\"}}\n\
                 spec: {{schedulerName: chaos, containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]}}\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

#[derive(Debug)]
struct Run {
    report: simulate::Report,
    elapsed: Duration,
}

fn run(args: &str, policy: &str) -> Result<Run, config::ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), CLUSTER).unwrap();
    std::fs::write(dir.path().join("pods.yaml"), pods()).unwrap();
    let cfg = format!(
        r#"
parallelism: 2
wasmPlugins:
- name: Chaos
  path: {path}
  timeout: 100ms
  initTimeout: 2s
  memoryLimit: 16Mi
  failurePolicy: {policy}
profiles:
- schedulerName: chaos
  plugins:
    multiPoint:
      disabled: [{{name: "*"}}]
    filter:
      enabled: [{{name: NodeResourcesFit}}, {{name: Chaos}}]
    score:
      enabled: [{{name: Chaos, weight: 1}}]
  pluginConfig:
  - name: Chaos
    args: {args}
"#,
        path = chaos_wasm().display()
    );
    let file = config::parse(&cfg).expect("test config parses");
    let started = Instant::now();
    let scheduler = config::build(&file, dir.path(), 1)?;
    let manifests = manifest::load(&[dir.path().to_path_buf()]).unwrap();
    let report = simulate::run(&scheduler, manifests, &simulate::Options::default()).unwrap();
    Ok(Run {
        report,
        elapsed: started.elapsed(),
    })
}

fn placed(r: &simulate::Report, pod: &str) -> Option<String> {
    r.scheduled
        .iter()
        .find(|s| s.pod == pod)
        .map(|s| s.node.clone())
}

fn message(r: &simulate::Report, pod: &str) -> Option<String> {
    r.unschedulable
        .iter()
        .find(|s| s.pod == pod)
        .map(|s| s.message.clone())
}

#[test]
fn well_behaved_plugin_filters_and_scores() {
    let r = run("{}", "Fail").unwrap().report;
    // node-c is rejected by the plugin, node-b scores 90 > node-a's 10.
    for p in ["p1", "p2", "p3", "p4"] {
        assert_eq!(placed(&r, p).as_deref(), Some("node-b"), "{p}: {r:?}");
    }
    assert!(r.plugin_health.is_empty());
}

#[test]
fn endless_loop_in_filter_times_out_and_fails_only_that_pod() {
    let r = run(
        r#"{"misbehave": "loop", "at": "filter", "only_pod": "p2"}"#,
        "Fail",
    )
    .unwrap();
    let msg = message(&r.report, "p2").expect("p2 is unschedulable");
    assert!(msg.starts_with("0/3 nodes are available: "), "{msg}");
    assert!(msg.contains("plugin Chaos failed: timeout"), "{msg}");
    for p in ["p1", "p3", "p4"] {
        assert_eq!(
            placed(&r.report, p).as_deref(),
            Some("node-b"),
            "{p} still schedules"
        );
    }
    let health = &r.report.plugin_health[0];
    assert!(
        health.failures.get("timeout").copied().unwrap_or(0) >= 1,
        "{health:?}"
    );
    // Each of the pod's attempts is bounded by the 100 ms deadline (and the
    // failed plugin is not called again within a cycle).
    assert!(r.elapsed < Duration::from_secs(20), "took {:?}", r.elapsed);
}

#[test]
fn endless_loop_with_ignore_policy_skips_the_plugin_for_that_pod() {
    let r = run(
        r#"{"misbehave": "loop", "at": "filter", "only_pod": "p2"}"#,
        "Ignore",
    )
    .unwrap()
    .report;
    // Without the plugin's filter, p2 may land anywhere NodeResourcesFit allows.
    assert!(placed(&r, "p2").is_some(), "{r:?}");
    assert_eq!(placed(&r, "p3").as_deref(), Some("node-b"));
    assert!(r.plugin_health[0].skips >= 1);
}

#[test]
fn unbounded_memory_growth_is_capped() {
    let r = run(
        r#"{"misbehave": "grow", "at": "score", "only_pod": "p3"}"#,
        "Fail",
    )
    .unwrap()
    .report;
    let msg = message(&r, "p3").expect("p3 fails");
    assert!(
        msg.contains("plugin Chaos failed: memory limit exceeded"),
        "{msg}"
    );
    for p in ["p1", "p2", "p4"] {
        assert_eq!(placed(&r, p).as_deref(), Some("node-b"));
    }
    let health = &r.plugin_health[0];
    assert!(health.failures.contains_key("memory"));
    // The failed instance was replaced, and the report says why.
    assert!(health.instances >= 2, "{health:?}");
    assert!(
        health
            .last_failure
            .as_deref()
            .is_some_and(|f| f.starts_with("memory limit exceeded")),
        "{health:?}"
    );
}

#[test]
fn trap_in_cycle_start_rejects_nodes_with_the_cause() {
    let r = run(
        r#"{"misbehave": "trap", "at": "cycle", "only_pod": "p1"}"#,
        "Fail",
    )
    .unwrap()
    .report;
    let msg = message(&r, "p1").expect("p1 fails");
    assert!(msg.contains("plugin Chaos failed: trap"), "{msg}");
    for p in ["p2", "p3", "p4"] {
        assert_eq!(
            placed(&r, p).as_deref(),
            Some("node-b"),
            "the replaced instance keeps working"
        );
    }
}

#[test]
fn out_of_range_score_is_a_plugin_failure() {
    let r = run(
        r#"{"misbehave": "bad-score", "at": "score", "only_pod": "p4"}"#,
        "Fail",
    )
    .unwrap()
    .report;
    let msg = message(&r, "p4").expect("p4 fails");
    assert!(msg.contains("score 1000 is outside 0..=100"), "{msg}");
    assert_eq!(placed(&r, "p1").as_deref(), Some("node-b"));
    let r = run(
        r#"{"misbehave": "bad-score", "at": "score", "only_pod": "p4"}"#,
        "Ignore",
    )
    .unwrap()
    .report;
    assert!(
        placed(&r, "p4").is_some(),
        "Ignore: scored without the plugin"
    );
}

#[test]
fn plugin_that_hangs_in_init_fails_at_start() {
    let e = run(r#"{"misbehave": "loop", "at": "init"}"#, "Fail").expect_err("start fails");
    assert!(
        e.to_string()
            .contains("plugin Chaos failed to start: timeout"),
        "{e}"
    );
}

#[test]
fn plugin_that_rejects_its_args_fails_at_start() {
    let e = run(r#"{"misbehave": "sideways"}"#, "Fail").expect_err("start fails");
    let s = e.to_string();
    assert!(
        s.contains("rejected its args") && s.contains("sideways"),
        "{s}"
    );
}

// ---- hostile plugins: host calls, output, imports --------------------

/// A plugin that sleeps (WASI clocks and `io/poll`) cannot block past its
/// deadline: sleeping returns at once, so a plugin that sleeps forever is
/// a loop the epoch deadline stops, and the pod gets the timeout.
#[test]
fn a_plugin_that_sleeps_forever_times_out_instead_of_blocking() {
    let r = run(
        r#"{"misbehave": "sleep", "at": "filter", "only_pod": "p3"}"#,
        "Fail",
    )
    .unwrap();
    let msg = message(&r.report, "p3").expect("p3 is unschedulable");
    assert!(msg.contains("plugin Chaos failed: timeout"), "{msg}");
    for p in ["p1", "p2", "p4"] {
        assert_eq!(placed(&r.report, p).as_deref(), Some("node-b"), "{p}");
    }
    let health = &r.report.plugin_health[0];
    assert!(
        health.failures.get("timeout").is_some_and(|n| *n >= 1),
        "{health:?}"
    );
}

/// A host function the plugin called returning an error is named as
/// such, with its cause, not as a bare wasm backtrace.
#[test]
fn a_failed_host_call_names_its_cause() {
    let r = run(
        r#"{"misbehave": "host-error", "at": "filter", "only_pod": "p1"}"#,
        "Fail",
    )
    .unwrap();
    let msg = message(&r.report, "p1").expect("p1 is unschedulable");
    assert!(
        msg.contains("plugin Chaos failed: trap: a host call failed: requested len"),
        "{msg}"
    );
    assert!(!msg.contains("wasm backtrace"), "{msg}");
}

/// What a plugin prints goes to the scheduler's log escaped, cut, and
/// within a rate limit per plugin; what is dropped is counted.
#[test]
fn plugin_output_is_escaped_and_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), CLUSTER).unwrap();
    std::fs::write(dir.path().join("pods.yaml"), pods()).unwrap();
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "wasmPlugins:\n- name: Chaos\n  path: {}\n  timeout: 5s\nprofiles:\n- schedulerName: chaos\n  plugins:\n    filter:\n      enabled: [{{name: Chaos}}]\n  pluginConfig:\n  - name: Chaos\n    args: {{misbehave: spam, at: filter}}\n",
            chaos_wasm().display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["simulate", "--log", "info", "--config"])
        .arg(&cfg)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = out.stderr;
    // 4 pods x 4 MiB printed; the log carries at most the burst and a
    // little more, and a note of what it dropped.
    assert!(stderr.len() < 512 * 1024, "{} bytes of log", stderr.len());
    assert!(!stderr.contains(&0x1b), "a raw escape byte reached the log");
    let text = String::from_utf8_lossy(&stderr);
    assert!(text.contains("chaos "), "{}", &text[..text.len().min(2000)]);
    assert!(text.contains("dropped"), "the drop is said");
}

/// A component that imports what a policy may not use (a socket) is
/// refused when it is loaded, naming the import.
#[test]
fn forbidden_imports_are_refused_at_load() {
    let bytes = wat::parse_str(
        r#"(component
  (import "wasi:sockets/tcp@0.2.0" (instance))
  (core module $m (func (export "v") (result i32) i32.const 0))
  (core instance $i (instantiate $m))
  (func $v (result u32) (canon lift (core func $i "v")))
  (instance $lc (export "contract-version" (func $v)))
  (export "wasmsched:plugin/lifecycle@0.2.0" (instance $lc))
)"#,
    )
    .unwrap();
    let err = wasmsched::wasm::PluginModule::compile(&bytes)
        .err()
        .expect("refused");
    assert_eq!(
        err.to_string(),
        "imports wasi:sockets/tcp@0.2.0, which a scheduling policy may not use (allowed: wasi:cli, wasi:clocks, wasi:filesystem without directories, wasi:io, wasi:random, and the wasmsched:plugin host interface)"
    );
}
