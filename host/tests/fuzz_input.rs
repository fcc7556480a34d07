//! Fuzzing of everything a user types or points the scheduler at:
//! manifests (then scheduled and printed), the configuration, and the
//! args of the core plugins. (The built-in wasm plugins' args parsers are
//! fuzzed natively in their own crates, `plugins/*/tests/fuzz_args.rs`.)
//! Inputs are structured-random Kubernetes
//! objects and configurations, random YAML/JSON values, and text
//! mutations of both (anchors, aliases, nesting, stray syntax, NUL).
//!
//! Nothing may panic, and every error is one line without control
//! characters; time and memory stay bounded because the input caps
//! (`wasmsched::input::Limits`) stop what would grow.
//!
//! A fixed seed and case count keep CI deterministic and short. A longer
//! run by hand: `WASMSCHED_FUZZ_CASES=20000 WASMSCHED_FUZZ_SEED=7 cargo
//! test -p wasmsched --release --test fuzz_input`.

mod common;

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{json, Map, Value};

use wasmsched::framework::registry;
use wasmsched::input::Limits;
use wasmsched::{config, manifest, output, simulate};

/// The native plugins' names.
fn native_names() -> Vec<&'static str> {
    registry::native_names()
}

/// Builds native plugin `name` from `args`, as a configuration does.
fn build_native(name: &str, args: &Value) {
    if let Some(factory) = registry::native(name) {
        let _ = factory(Some(args), &registry::Handle::default());
    }
}

/// Cases per target, and the seed (environment overrides for long runs).
fn runner() -> TestRunner {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    TestRunner::new(Config {
        cases: env("WASMSCHED_FUZZ_CASES", 200) as u32,
        rng_seed: RngSeed::Fixed(env("WASMSCHED_FUZZ_SEED", 0x5eed)),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Field names of manifests, the configuration and plugin args.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    "apiVersion", "kind", "metadata", "name", "namespace", "labels", "annotations", "uid",
    "spec", "status", "allocatable", "capacity", "containers", "initContainers", "image",
    "resources", "requests", "limits", "cpu", "memory", "pods", "nvidia.com/gpu", "ports",
    "containerPort", "hostPort", "hostIP", "protocol", "overhead", "nodeName", "nodeSelector",
    "tolerations", "key", "operator", "value", "effect", "taints", "affinity", "nodeAffinity",
    "podAffinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
    "matchExpressions", "matchLabels", "values", "weight", "topologyKey", "labelSelector",
    "namespaceSelector", "topologySpreadConstraints", "maxSkew", "whenUnsatisfiable",
    "minDomains", "priority", "schedulerName", "unschedulable", "items", "ownerReferences",
    "controller", "volumes", "persistentVolumeClaim", "claimName", "phase", "profiles",
    "plugins", "multiPoint", "filter", "score", "enabled", "disabled", "pluginConfig", "args",
    "parallelism", "percentageOfNodesToScore", "wasmPlugins", "path", "timeout", "initTimeout",
    "memoryLimit", "failurePolicy", "leaderElection", "leaderElect", "leaseDuration",
    "renewDeadline", "retryPeriod", "resourceLock", "clientConnection", "qps", "burst",
    "bindConcurrency", "deletionCost", "interval", "hysteresis", "writesPerSecond",
    "staleAfter", "prometheus", "url", "queries", "podMetrics", "port", "workloads",
    "selectors", "plugin", "scoringStrategy", "type", "shape", "utilization",
    "requestedToCapacityRatio", "ignoredResources", "ignoredResourceGroups",
    "defaultConstraints", "defaultingType", "hardPodAffinityWeight",
    "ignorePreferredTermsOfExistingPods", "costs", "sameNode", "sameZone", "sameRegion",
    "crossRegion", "unknown", "zoneCosts", "policy", "fitWeight", "utilizationWeight",
    "unknownUtilization", "utilizationAnnotation", "utilizationMetric", "modelAliases",
    "modelMatching", "topologyPenalty", "fractional", "cpuPodsAvoidGpuNodes", "traffic",
    "connections", "warmUp", "warmUpSeconds", "warmUpCost", "tiers", "tierLabel", "cap",
];

/// Values those fields take, right and nearly right.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "v1", "Node", "Pod", "List", "NodeList", "PodList", "default", "kube-system", "n1", "n2",
    "p1", "web", "DoNotSchedule", "ScheduleAnyway", "NoSchedule", "NoExecute",
    "PreferNoSchedule", "Exists", "Equal", "In", "NotIn", "Gt", "Lt", "DoesNotExist", "TCP",
    "UDP", "zone", "kubernetes.io/hostname", "topology.kubernetes.io/zone", "1", "0", "-1",
    "100m", "1Gi", "-5", "1e3", "9223372036854775807", "99999999999999999999", "1e308", "0.5",
    "binpack", "spread", "origin", "LeastAllocated", "MostAllocated",
    "RequestedToCapacityRatio", "NodeResourcesFit", "TaintToleration", "PodTopologySpread",
    "InterPodAffinity", "NodeAffinity", "NodePorts", "GpuTopology", "*", "Fail", "Ignore",
    "10s", "0s", "-1s", "999999999999h", "leases", "yes", "null", "~", "",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(|w| json!(w)),
        2 => any::<i64>().prop_map(|i| json!(i)),
        1 => prop_oneof![Just(0i64), Just(-1), Just(65536), Just(i64::MAX), Just(i64::MIN)]
            .prop_map(|i| json!(i)),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        1 => "\\PC{0,12}".prop_map(Value::String),
        1 => "[\\x00-\\x1f\\u{202e}a-z]{1,6}".prop_map(Value::String),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "\\PC{0,8}",
    ]
}

/// Any JSON value, with the fields' names for keys.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn node_template() -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a", "kubernetes.io/hostname": "n1"}},
        "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "4"}}})
}

fn pod_template() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "x",
                    "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                 "overhead": {"cpu": "10m"},
                 "nodeSelector": {"zone": "a"},
                 "tolerations": [{"key": "gpu", "operator": "Exists"}],
                 "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule", "minDomains": 1,
                    "labelSelector": {"matchLabels": {"app": "web"}}}],
                 "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    [{"topologyKey": "kubernetes.io/hostname",
                      "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}]}}}})
}

/// Places in the templates a patch may replace.
#[rustfmt::skip]
const PATHS: &[&str] = &[
    "/metadata/name", "/metadata/namespace", "/metadata/labels", "/metadata/labels/app",
    "/metadata/labels/zone", "/kind", "/spec", "/status/allocatable/pods",
    "/status/allocatable/cpu", "/status/capacity/cpu", "/spec/taints/0/key",
    "/spec/taints/0/effect", "/spec/containers/0/resources/requests/cpu",
    "/spec/containers/0/resources/limits/cpu", "/spec/containers/0/ports/0/hostPort",
    "/spec/containers/0/ports/0/containerPort", "/spec/overhead/cpu", "/spec/nodeSelector",
    "/spec/tolerations/0/operator", "/spec/topologySpreadConstraints/0/minDomains",
    "/spec/topologySpreadConstraints/0/maxSkew",
    "/spec/topologySpreadConstraints/0/whenUnsatisfiable", "/spec/affinity",
    "/spec/containers", "/metadata",
];

fn patched_object() -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        prop_oneof![
            1 => Just(Vec::new()),
            2 => prop::collection::vec((prop::sample::select(PATHS), value()), 1..3),
        ],
    )
        .prop_map(|(node, patches)| {
            let mut v = if node {
                node_template()
            } else {
                pod_template()
            };
            for (path, new) in patches {
                if let Some(slot) = v.pointer_mut(path) {
                    *slot = new;
                }
            }
            v
        })
}

/// Bits of YAML syntax that mutations insert.
#[rustfmt::skip]
const BITS: &[&str] = &[
    "&a ", "*a", "*b", "&b [*a, *a, *a, *a, *a, *a, *a, *a]\n", "<<: *a\n", "[", "]", "{",
    "}", ": ", "- ", "\n", "\t", "#", "'", "\"", "|\n", ">-\n", "!!str ", "!!binary ",
    "!!int ", "!custom ", "---\n", "...\n", "%YAML 1.2\n", "\\", "\0", "\u{feff}", "? ",
    ",", "~", "\u{1b}[31m", "\r\n", "  ", "0x1F", ".nan", "-.inf", "1e999",
];

#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, &'static str),
    Delete(usize, usize),
    Repeat(usize, usize, usize),
}

/// Mostly none: a text that does not parse tests little past the parser.
fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop_oneof![
        2 => Just(Vec::new()),
        1 => prop::collection::vec(mutation(), 1..4),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), prop::sample::select(BITS)).prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => (any::<usize>(), 1..40usize).prop_map(|(p, n)| Mutation::Delete(p, n)),
        1 => (any::<usize>(), 1..20usize, 2..50usize).prop_map(|(p, n, k)| Mutation::Repeat(p, n, k)),
    ]
}

fn boundary(s: &str, at: usize) -> usize {
    let mut at = at % (s.len() + 1);
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(mut text: String, mutations: &[Mutation]) -> String {
    for m in mutations {
        match *m {
            Mutation::Insert(p, bit) => {
                let p = boundary(&text, p);
                text.insert_str(p, bit);
            }
            Mutation::Delete(p, n) => {
                let (a, b) = (boundary(&text, p), boundary(&text, p.saturating_add(n)));
                if a < b {
                    text.replace_range(a..b, "");
                }
            }
            Mutation::Repeat(p, n, k) => {
                let (a, b) = (boundary(&text, p), boundary(&text, p.saturating_add(n)));
                if a < b {
                    let piece = text[a..b].repeat(k);
                    text.insert_str(b, &piece);
                }
            }
        }
    }
    text
}

/// An alias bomb (`levels` of `fanout` aliases each) or a deep nesting,
/// inside an otherwise ordinary document.
fn amplifier() -> impl Strategy<Value = String> {
    prop_oneof![
        (2..10usize, 2..12usize, prop::sample::select(PATHS)).prop_map(|(levels, fanout, at)| {
            let mut s = String::from("a0: &a0 \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n");
            for l in 1..levels {
                let refs = vec![format!("*a{}", l - 1); fanout].join(", ");
                s.push_str(&format!("a{l}: &a{l} [{refs}]\n"));
            }
            let last = levels - 1;
            let field = at.rsplit('/').next().unwrap_or("x");
            format!("{s}kind: Pod\nmetadata: {{name: p}}\nspec: {{{field}: *a{last}}}\n")
        }),
        (100..20_000usize, any::<bool>()).prop_map(|(depth, flow)| if flow {
            format!(
                "kind: Node\nmetadata: {{name: n, labels: {}{}}}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            )
        } else {
            format!("kind: Node\nx:\n{}y\n", "- ".repeat(depth))
        }),
    ]
}

/// A manifest file's text: objects as YAML or JSON documents, or a List,
/// then mutated; or an amplifier.
fn manifest_text() -> impl Strategy<Value = String> {
    let docs = (
        prop::collection::vec(prop_oneof![6 => patched_object(), 1 => value()], 1..5),
        0..3u8,
        mutations(),
    )
        .prop_map(|(mut objects, form, mutations)| {
            // Distinct names, or most files would be duplicates.
            for (i, o) in objects.iter_mut().enumerate() {
                if let Some(Value::String(name)) = o.pointer_mut("/metadata/name") {
                    name.push_str(&format!("-{i}"));
                }
            }
            let text = match form {
                0 => objects
                    .iter()
                    .map(|o| serde_saphyr::to_string(o).unwrap())
                    .collect::<Vec<_>>()
                    .join("---\n"),
                1 => objects
                    .iter()
                    .map(|o| o.to_string())
                    .collect::<Vec<_>>()
                    .join("\n---\n"),
                _ => json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
            };
            mutate(text, &mutations)
        });
    prop_oneof![8 => docs, 1 => amplifier()]
}

/// Small caps, so that what a cap stops is stopped quickly.
const FUZZ_LIMITS: Limits = Limits {
    file_bytes: 1 << 20,
    total_bytes: 4 << 20,
    depth: 64,
    aliases: 1000,
    alias_expansion: 100_000,
};

fn one_clean_line(what: &str, s: &str) {
    assert!(
        !s.chars().any(|c| c.is_control()),
        "{what} has a control character: {s:?}"
    );
}

#[test]
fn manifests_load_schedule_and_print_without_panicking() {
    let scheduler = common::build(&common::native_config(), 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.yaml");
    runner()
        .run(&manifest_text(), |text| {
            std::fs::write(&path, &text).unwrap();
            match manifest::load_within(std::slice::from_ref(&path), &FUZZ_LIMITS) {
                Err(e) => one_clean_line("manifest error", &e.to_string()),
                Ok(m) => {
                    let explain = m.pods.first().map(|p| p.key());
                    let options = simulate::Options {
                        all_pods: true,
                        explain,
                        metrics: None,
                    };
                    if let Ok(report) = simulate::run(&scheduler, m, &options) {
                        let table = output::table(&report);
                        for line in table.lines() {
                            one_clean_line("table line", line);
                        }
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// A configuration's text: the real sections with random values, or any
/// value, then mutated.
fn config_text() -> impl Strategy<Value = String> {
    let sections = prop::collection::btree_map(
        prop::sample::select(
            &[
                "parallelism",
                "percentageOfNodesToScore",
                "profiles",
                "wasmPlugins",
                "leaderElection",
                "clientConnection",
                "bindConcurrency",
                "deletionCost",
                "apiVersion",
                "kind",
                "pluginCacheDir",
            ][..],
        ),
        value(),
        0..5,
    );
    let profile = (
        prop::collection::vec(prop::sample::select(native_names()), 0..3),
        prop::collection::vec((prop::sample::select(native_names()), value()), 0..3),
    )
        .prop_map(|(enabled, args)| {
            json!({"schedulerName": "s",
                "plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                    "enabled": enabled.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}},
                "pluginConfig": args.iter().map(|(n, a)| json!({"name": n, "args": a})).collect::<Vec<_>>()})
        });
    (
        sections,
        prop::option::of(profile),
        any::<bool>(),
        mutations(),
    )
        .prop_map(|(sections, profile, yaml, mutations)| {
            let mut v: Map<String, Value> = sections
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            if let Some(p) = profile {
                v.insert("profiles".into(), json!([p]));
            }
            let v = Value::Object(v);
            let text = if yaml {
                serde_saphyr::to_string(&v).unwrap()
            } else {
                v.to_string()
            };
            mutate(text, &mutations)
        })
}

#[test]
fn configurations_parse_and_validate_without_panicking() {
    runner()
        .run(&prop_oneof![8 => config_text(), 1 => amplifier()], |text| {
            match config::parse(&text) {
                Err(e) => one_clean_line("config error", &e.to_string()),
                Ok(file) => {
                    if let Err(e) = config::runtime(&file, Path::new(".")) {
                        one_clean_line("runtime settings error", &e.to_string());
                    }
                    for p in &file.profiles {
                        for c in &p.plugin_config {
                            // Its error may quote a key as written;
                            // the printing edges escape it.
                            build_native(&c.name, &c.args);
                        }
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Core plugin args: a value, most often an object of args' fields.
fn args() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::collection::btree_map(key(), value(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => value(),
    ]
}

#[test]
fn core_plugin_args_parse_without_panicking() {
    runner()
        .run(&args(), |value| {
            for name in native_names() {
                build_native(name, &value);
            }
            Ok(())
        })
        .unwrap();
}
