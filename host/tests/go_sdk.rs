//! The Go SDK (`plugins/sdk-go`) and its second example: GpuTopology's
//! "origin" policy ported to Go (`examples/plugins/go-gpu`) places the pods
//! of `examples/gpu-cluster` and `examples/gpu-fragmentation` as the
//! built-in GpuTopology does with `args: {policy: origin}` (same nodes,
//! scores and FitError messages); and the Go unit tests (the SDK's
//! canonical-ABI glue run natively, the generated files current, the two
//! examples) pass.
//!
//! The component is built by `scripts/build-example-plugins DIR` (which
//! `scripts/test` runs) as `DIR/gpu-origin-go.wasm`, found through
//! `WASMSCHED_EXAMPLE_PLUGINS=DIR`; the Go tests need `go` (1.24 or newer)
//! on PATH. Without either, these tests fail saying so.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use common::*;
use wasmsched::config;
use wasmsched::simulate::{self, Report};
use wasmsched::wasm::bindings::types as wit;
use wasmsched::wasm::instance::Instance;
use wasmsched::wasm::{self, Limits, PluginModule};

fn go_gpu_component() -> PathBuf {
    let dir = match std::env::var_os("WASMSCHED_EXAMPLE_PLUGINS") {
        Some(d) => PathBuf::from(d),
        None => panic!(
            "WASMSCHED_EXAMPLE_PLUGINS is not set: run `scripts/build-example-plugins DIR` and set WASMSCHED_EXAMPLE_PLUGINS=DIR (or run scripts/test)"
        ),
    };
    let file = dir.join("gpu-origin-go.wasm");
    assert!(
        file.is_file(),
        "{} is missing: run `scripts/build-example-plugins {} go`",
        file.display(),
        dir.display()
    );
    file
}

/// Runs `example` (a directory of the repository) through `config_text`.
fn run(example: &str, config_text: &str) -> Report {
    let file = config::parse(config_text).unwrap_or_else(|e| panic!("config: {e}"));
    let scheduler =
        config::build(&file, &repo_root(), 1).unwrap_or_else(|e| panic!("config builds: {e}"));
    let manifests = wasmsched::manifest::load(&[repo_root().join(example)]).unwrap();
    simulate::run(&scheduler, manifests, &simulate::Options::default()).expect("simulation runs")
}

/// The built-in GpuTopology with the origin policy, `score_disabled`
/// naming Score plugins turned off.
fn rust_config(score_disabled: &[&str]) -> String {
    format!(
        "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n\
         - schedulerName: gpu-scheduler\n  plugins:\n    score:\n      disabled: [{}]\n  \
         pluginConfig:\n  - name: GpuTopology\n    args: {{policy: origin}}\n",
        disabled(score_disabled)
    )
}

/// The Go port in GpuTopology's place, with GpuTopology's default weight
/// (3).
fn go_config(score_disabled: &[&str]) -> String {
    format!(
        "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nwasmPlugins:\n\
         - name: GpuOriginGo\n  path: {}\nprofiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    \
         multiPoint:\n      enabled: [{{name: GpuOriginGo, weight: 3}}]\n      disabled: [{{name: GpuTopology}}]\n    \
         score:\n      disabled: [{}]\n  pluginConfig:\n  - name: GpuOriginGo\n    args: {{policy: origin}}\n",
        go_gpu_component().display(),
        disabled(score_disabled)
    )
}

fn disabled(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{{name: {n}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn scores(r: &Report) -> Vec<(String, String, Option<i64>)> {
    r.scheduled
        .iter()
        .map(|s| (s.pod.clone(), s.node.clone(), s.score))
        .collect()
}

fn same_as_gpu_topology(example: &str, score_disabled: &[&str]) -> Report {
    let rust = run(example, &rust_config(score_disabled));
    let go = run(example, &go_config(score_disabled));
    assert_eq!(placements(&go), placements(&rust), "{example}: placements");
    assert_eq!(failures(&go), failures(&rust), "{example}: FitErrors");
    assert_eq!(
        scores(&go),
        scores(&rust),
        "{example}: order and final scores"
    );
    go
}

#[test]
fn the_go_origin_port_places_the_gpu_example_as_gpu_topology_does() {
    let go = same_as_gpu_topology("examples/gpu-cluster", &[]);
    // What the comparison covers: model and memory filtering, utilization
    // from the annotation, free GPUs after a placed pod, a pod that uses no
    // GPU, and FitErrors with GpuTopology's reasons.
    let placed = placements(&go);
    assert_eq!(
        placed.get("ml/gpu-pod").map(String::as_str),
        Some("gpu-a100-1")
    );
    assert_eq!(
        placed.get("etl/data-prep").map(String::as_str),
        Some("cpu-2")
    );
    let failed = failures(&go);
    assert!(
        failed["ml/h100-job"].contains("3 GPU model mismatch"),
        "{failed:?}"
    );
}

#[test]
fn the_go_origin_port_packs_the_fragmentation_example_as_gpu_topology_does() {
    // examples/gpu-fragmentation/origin.yaml: only the GPU policy scores.
    let go = same_as_gpu_topology(
        "examples/gpu-fragmentation",
        &["NodeResourcesFit", "NodeResourcesBalancedAllocation"],
    );
    let big = go
        .scheduled
        .iter()
        .filter(|s| s.pod.starts_with("job-"))
        .count();
    assert_eq!(big, 4, "8-GPU jobs placed (docs/gpu-topology.md: origin 4)");
}

#[test]
fn the_go_origin_port_exports_what_it_implements() {
    let file = go_gpu_component();
    let out = wasmsched(&["plugin", "check", file.to_str().unwrap()]);
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("exports:     lifecycle, interests, filter, score\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "contract:    wasmsched:plugin@{}",
            wasm::CONTRACT_VERSION
        )),
        "{}",
        out.stdout
    );
    let refused = wasmsched(&[
        "plugin",
        "check",
        file.to_str().unwrap(),
        "--args",
        r#"{"policy": "binpack"}"#,
    ]);
    assert!(!refused.success);
    assert!(
        refused
            .stderr
            .contains("gpu-origin args: field policy: only origin is ported to Go"),
        "{}",
        refused.stderr
    );
}

/// `go test ./...` in the SDK and both Go examples: the SDK's lifting and
/// lowering against layouts written from the canonical ABI's rules, every
/// exported function's body, the generated files current with
/// wit/plugin.wit (the contract version stated once), the examples' unit
/// tests.
#[test]
fn go_unit_tests_pass() {
    for module in [
        "plugins/sdk-go",
        "examples/plugins/go",
        "examples/plugins/go-gpu",
    ] {
        let out = Command::new("go")
            .args(["test", "./..."])
            .current_dir(repo_root().join(module))
            .env_remove("GOOS")
            .env_remove("GOARCH")
            .output()
            .unwrap_or_else(|e| {
                panic!("running `go test` in {module}: {e} (install Go 1.24 or newer and put `go` on PATH)")
            });
        assert!(
            out.status.success(),
            "go test ./... in {module} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Builds `plugins/sdk-go/internal/probe` (a test plugin that implements
/// every extension point and answers with what it was given) with the
/// SDK's build command, once, into the tests' temporary directory.
fn build_probe() -> PathBuf {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("go-sdk-probe.wasm");
            let cache = std::env::var_os("WASMSCHED_CACHE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/wasmsched")
                });
            let built = Command::new("go")
                .args(["run", "./cmd/build-plugin", "-o"])
                .arg(&out)
                .arg("-jco")
                .arg(cache.join("tools/jco-1.35.0"))
                .arg("./internal/probe")
                .current_dir(repo_root().join("plugins/sdk-go"))
                .env_remove("GOOS")
                .env_remove("GOARCH")
                .output()
                .unwrap_or_else(|e| {
                    panic!("running `go run ./cmd/build-plugin`: {e} (install Go 1.24 or newer)")
                });
            assert!(
                built.status.success(),
                "building the probe plugin failed:\n{}",
                String::from_utf8_lossy(&built.stderr)
            );
            out
        })
        .clone()
}

/// The probe, compiled once for all the tests.
fn probe_module() -> Arc<PluginModule> {
    static MODULE: OnceLock<Arc<PluginModule>> = OnceLock::new();
    MODULE
        .get_or_init(|| {
            let source = wasm::source::read(&build_probe()).unwrap();
            PluginModule::compile(&source.bytes).unwrap_or_else(|e| panic!("probe compiles: {e}"))
        })
        .clone()
}

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn amounts(kv: &[(&str, i64)]) -> Vec<wit::ResourceAmount> {
    kv.iter()
        .map(|(name, amount)| wit::ResourceAmount {
            name: name.to_string(),
            amount: *amount,
        })
        .collect()
}

/// A pod with every field set.
fn full_pod(uid: &str, name: &str, node: Option<&str>) -> wit::Pod {
    wit::Pod {
        uid: uid.into(),
        namespace: "ml".into(),
        name: name.into(),
        labels: pairs(&[("app", "train"), ("tier", "batch")]),
        annotations: pairs(&[("probe/x", "1"), ("x", "ünï")]),
        requests: amounts(&[("cpu", 1500), ("nvidia.com/gpu", 2)]),
        limits: amounts(&[("memory", 1 << 34)]),
        tolerations: vec![
            wit::Toleration {
                key: Some("gpu".into()),
                operator: wit::TolerationOperator::Equal,
                value: "yes".into(),
                effect: Some(wit::TaintEffect::NoExecute),
            },
            wit::Toleration {
                key: None,
                operator: wit::TolerationOperator::Exists,
                value: String::new(),
                effect: None,
            },
        ],
        priority: -7,
        creation_timestamp_ms: 1_700_000_000_123,
        owner: Some(wit::Owner {
            kind: "ReplicaSet".into(),
            name: "train-7d9f".into(),
        }),
        node_name: node.map(str::to_string),
    }
}

fn probe_node(name: &str, labels: &[(&str, &str)], cordoned: bool) -> wit::Node {
    wit::Node {
        name: name.into(),
        labels: pairs(labels),
        annotations: pairs(&[("note", "x")]),
        allocatable: amounts(&[("cpu", 4000), ("nvidia.com/gpu", 8)]),
        taints: vec![wit::Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: wit::TaintEffect::PreferNoSchedule,
        }],
        unschedulable: cordoned,
        metrics: vec![("DCGM_FI_DEV_GPU_UTIL".into(), 42.5)],
    }
}

/// A probe instance with nodes 0 (two pods placed, one removed), 1
/// (labelled to be rejected), 2 (cordoned), 3 (refuses reserve) and a
/// removed node 4, in the cycle of pod `u-1`.
fn probe_in_a_cycle() -> Instance {
    let mut inst = Instance::new("probe", &probe_module(), Limits::default(), "{}").unwrap();
    let running = full_pod("u-run", "running", Some("n0"));
    let mut small = full_pod("u-small", "small", Some("n0"));
    small.requests = amounts(&[("cpu", 500)]);
    inst.apply(
        &[
            wit::Delta::NodeSet((0, probe_node("n0", &[("zone", "a")], false))),
            wit::Delta::NodeSet((
                1,
                probe_node("n1", &[("reject", "GPU model mismatch")], false),
            )),
            wit::Delta::NodeSet((2, probe_node("n2", &[], true))),
            wit::Delta::NodeSet((3, probe_node("n3", &[("refuse-reserve", "")], false))),
            wit::Delta::NodeSet((4, probe_node("gone", &[], false))),
            wit::Delta::NodeRemove(4),
            wit::Delta::PodAdd(wit::Placement {
                node: 0,
                pod: running,
            }),
            wit::Delta::PodAdd(wit::Placement {
                node: 0,
                pod: small,
            }),
            wit::Delta::PodRemove(wit::Removal {
                node: 0,
                pod_uid: "u-run".into(),
            }),
        ],
        true,
    )
    .unwrap();
    let plan = inst
        .cycle_start(&full_pod("u-1", "train", None))
        .unwrap()
        .unwrap();
    assert!(plan.filter && plan.score);
    inst
}

/// Every record, option, variant and list of the contract crosses the Go
/// SDK's hand-written canonical-ABI glue through wasmtime, both ways: init,
/// interests, apply, cycle-start, filter, score and normalize-score.
#[test]
fn the_go_sdk_glue_carries_the_lifecycle_filter_and_score_through_wasmtime() {
    let refused = Instance::new(
        "probe",
        &probe_module(),
        Limits::default(),
        r#"{"refuse": 1}"#,
    )
    .err();
    assert!(
        refused.is_some_and(|e| e.to_string().contains("probe args: refused as asked")),
        "init's error reaches the host"
    );
    let mut inst = probe_in_a_cycle();
    let keys = &inst.interests;
    assert!(keys.pod_labels.wants("anything") && keys.node_labels.wants("anything"));
    assert!(keys.pod_annotations.wants("probe/seen") && keys.pod_annotations.wants("x"));
    assert!(!keys.pod_annotations.wants("y") && !keys.node_annotations.wants("note"));
    let mut bad = full_pod("u-bad", "bad", None);
    bad.labels.clear();
    assert_eq!(inst.cycle_start(&bad).unwrap().unwrap_err(), "bad pod ✗");
    inst.cycle_start(&full_pod("u-1", "train", None))
        .unwrap()
        .unwrap();

    let verdicts = inst.filter(&[0, 1, 2, 4, 9]).unwrap();
    let verdicts: Vec<Option<(String, bool)>> = verdicts
        .into_iter()
        .map(|v| v.map(|r| (r.reason, r.unresolvable)))
        .collect();
    assert_eq!(
        verdicts,
        vec![
            None,
            Some(("GPU model mismatch".into(), true)),
            Some(("cordoned".into(), false)),
            Some(("node unknown to plugin".into(), true)),
            Some(("node unknown to plugin".into(), true)),
        ]
    );
    assert_eq!(inst.score(&[0, 2]).unwrap(), vec![-7, 1993]);
    assert_eq!(
        inst.normalize(&[0, 2], &[-7, 1993]).unwrap(),
        Some(vec![0, 19])
    );
    assert!(inst
        .score(&[9])
        .unwrap_err()
        .to_string()
        .contains("node index 9 unknown to plugin"));
}

/// Reserve (with PreBind's patch, which shows what the plugin saw of the
/// node and of the pod, every field), Unreserve and Permit through wasmtime.
#[test]
fn the_go_sdk_glue_carries_reserve_permit_and_pre_bind_through_wasmtime() {
    let mut inst = probe_in_a_cycle();
    let patch = inst.reserve(0).unwrap().unwrap();
    assert_eq!(patch.labels, pairs(&[("probe/node", "n0")]));
    assert_eq!(
        patch.annotations,
        pairs(&[
            (
                "probe/node-seen",
                "n0 #0 l:zone=a a:note=x alloc:cpu=4000 alloc:nvidia.com/gpu=8 \
                 taint:dedicated=gpu:prefer-no-schedule m:DCGM_FI_DEV_GPU_UTIL=42.5 pods:1 cpu:500"
            ),
            (
                "probe/pod-seen",
                "u-1 ml/train l:app=train l:tier=batch a:probe/x=1 a:x=ünï req:cpu=1500 \
                 req:nvidia.com/gpu=2 lim:memory=17179869184 tol:gpu,equal,yes,no-execute \
                 tol:*,exists,,* prio:-7 created:1700000000123 owner:ReplicaSet/train-7d9f"
            ),
        ])
    );
    assert_eq!(
        inst.reserve(3).unwrap().unwrap_err(),
        "reserve refused on n3"
    );

    inst.unreserve("u-a", 0).unwrap();
    inst.unreserve("u-b", 4).unwrap();
    let waiting = inst.permit(0).unwrap();
    assert!(matches!(waiting.decision, wit::PermitDecision::Wait(1500)));
    assert_eq!(waiting.allow_waiting, ["w1", "u-a@n0", "u-b@gone"]);
    let rejected = inst.permit(1).unwrap();
    assert!(
        matches!(&rejected.decision, wit::PermitDecision::Reject(r) if r == "no room for train")
    );
    assert!(rejected.allow_waiting.is_empty());
    assert!(matches!(
        inst.permit(2).unwrap().decision,
        wit::PermitDecision::Allow
    ));
}

/// PostFilter (candidates with victims) and DeletionCost (a pod status with
/// metrics; an opinion, none, an error) through wasmtime.
#[test]
fn the_go_sdk_glue_carries_post_filter_and_deletion_cost_through_wasmtime() {
    let mut inst = probe_in_a_cycle();
    let victim = |uid: &str, cost: i32, start: i64, violates: bool| wit::Victim {
        pod: full_pod(uid, uid, Some("n0")),
        deletion_cost: cost,
        start_time_ms: start,
        violates_budget: violates,
    };
    let advice = inst
        .post_filter(&[
            wit::Candidate {
                node: 0,
                victims: vec![victim("v1", 0, 7, false), victim("v2", 3, 8, false)],
                budget_violations: 0,
            },
            wit::Candidate {
                node: 2,
                victims: vec![victim("v3", -1, 42, true)],
                budget_violations: 1,
            },
        ])
        .unwrap()
        .expect("post-filter exported");
    assert_eq!(advice.ranking, [1, 0]);
    assert_eq!(advice.vetoed, ["v3@2/1/-1", "v2@0/0/3"]);

    let status = |phase: &str, ready: bool| wit::PodStatus {
        pod: full_pod("web-1", "web", Some("n0")),
        phase: phase.into(),
        ready,
        age_seconds: 3600,
        restarts: 2,
    };
    let metrics = vec![("cpu".to_string(), 0.5), ("requests".to_string(), 10.0)];
    assert_eq!(
        inst.deletion_cost(&status("Running", true), &metrics)
            .unwrap(),
        Some(5610)
    );
    assert_eq!(
        inst.deletion_cost(&status("Running", false), &metrics)
            .unwrap(),
        None
    );
    let failed = inst
        .deletion_cost(&status("Failed", true), &[])
        .unwrap_err();
    assert!(failed.to_string().contains("failed pod web"), "{failed}");
    // The instance is still sound after all of that.
    assert_eq!(inst.score(&[3]).unwrap(), vec![2993]);
}

/// The SDK turns the Go runtime's automatic collection off (a collection
/// inside `cabi_realloc` would call an import while the host lowers
/// arguments, which traps) and collects after exported calls instead:
/// garbage does not pile up across many full syncs.
#[test]
fn a_go_instance_collects_its_garbage_between_calls() {
    let mut inst = Instance::new("probe", &probe_module(), Limits::default(), "{}").unwrap();
    let labels: Vec<(String, String)> = (0..20)
        .map(|i| (format!("example.com/label-{i:02}"), "x".repeat(40)))
        .collect();
    for round in 0..40 {
        let deltas: Vec<wit::Delta> = (0..2000)
            .map(|i| {
                let mut node = probe_node(&format!("node-{i}"), &[], false);
                node.labels = labels.clone();
                wit::Delta::NodeSet((i, node))
            })
            .collect();
        inst.apply(&deltas, true)
            .unwrap_or_else(|e| panic!("sync {round}: {e}"));
        inst.cycle_start(&full_pod("u", "p", None))
            .unwrap()
            .unwrap();
        assert_eq!(inst.score(&[1999]).unwrap(), vec![1_998_993]);
    }
    // Each sync replaces 2000 nodes of about 2 KB: 160 MB of garbage in all.
    let memory = inst.memory_bytes();
    assert!(
        memory < 48 << 20,
        "linear memory {memory} bytes after 40 syncs"
    );
}
