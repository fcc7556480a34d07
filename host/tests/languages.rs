//! The spot-affinity example policy written in Rust, Python, JavaScript, C
//! and Go (`examples/plugins/`) schedules the same pods onto the same
//! nodes, and passes the same `plugin test` case file, in every language.
//!
//! The components are built by `scripts/build-example-plugins DIR` (which
//! `scripts/test` runs), and found through `WASMSCHED_EXAMPLE_PLUGINS=DIR`:
//! `spot-affinity-{rust,python,js,c,go}.wasm`. Without the variable these
//! tests fail, saying so: they are the proof that the five build.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use common::*;
use wasmsched::config;
use wasmsched::plugin_test::{self, CaseFile};
use wasmsched::simulate::{self, Report};
use wasmsched::wasm::{self, DiskCache, Limits, PluginModule};

const LANGS: [&str; 5] = ["rust", "python", "js", "c", "go"];

fn plugin_dir() -> PathBuf {
    match std::env::var_os("WASMSCHED_EXAMPLE_PLUGINS") {
        Some(d) => PathBuf::from(d),
        None => panic!(
            "WASMSCHED_EXAMPLE_PLUGINS is not set: run `scripts/build-example-plugins DIR` and set WASMSCHED_EXAMPLE_PLUGINS=DIR (or run scripts/test)"
        ),
    }
}

fn component(lang: &str) -> PathBuf {
    let file = plugin_dir().join(format!("spot-affinity-{lang}.wasm"));
    assert!(
        file.is_file(),
        "{} is missing: run `scripts/build-example-plugins {}`",
        file.display(),
        plugin_dir().display()
    );
    file
}

fn examples() -> PathBuf {
    repo_root().join("examples/plugins")
}

/// A precompiled-component cache that outlives the test run: compiling
/// the Python and JavaScript components takes many seconds in a debug
/// build, loading them from here milliseconds.
fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("example-plugin-cache")
}

/// The compiled component of `lang`, kept alive for the whole run so that
/// every later load of the same bytes (the configurations below) finds it
/// in the process-wide module cache.
fn module(lang: &str) -> Arc<PluginModule> {
    static MODULES: OnceLock<BTreeMap<&'static str, Arc<PluginModule>>> = OnceLock::new();
    let modules = MODULES.get_or_init(|| {
        let disk = DiskCache::new(cache_dir()).expect("cache dir");
        LANGS
            .iter()
            .map(|&lang| {
                let source = wasm::source::read(&component(lang)).unwrap();
                let (module, _) = PluginModule::compile_with(&source.bytes, Some(&disk))
                    .unwrap_or_else(|e| panic!("{lang}: compiles: {e}"));
                (lang, module)
            })
            .collect()
    });
    modules[lang].clone()
}

/// Runs `examples/plugins/cluster` through the example configuration's
/// profile with the component of `lang`; memoized, since the Python and
/// JavaScript components take seconds to compile.
fn schedule(lang: &str) -> &'static Report {
    static RUNS: OnceLock<BTreeMap<&'static str, Report>> = OnceLock::new();
    let runs = RUNS.get_or_init(|| {
        LANGS
            .iter()
            .map(|&lang| {
                let _compiled = module(lang);
                let text = std::fs::read_to_string(examples().join("config.yaml")).unwrap();
                let text = text.replace(
                    "../../target/example-plugins/spot-affinity-rust.wasm",
                    &component(lang).display().to_string(),
                );
                let file = config::parse(&text).unwrap_or_else(|e| panic!("config: {e}"));
                let scheduler = config::build(&file, &examples(), 1)
                    .unwrap_or_else(|e| panic!("{lang}: config builds: {e}"));
                let manifests = wasmsched::manifest::load(&[examples().join("cluster")]).unwrap();
                let report = simulate::run(&scheduler, manifests, &simulate::Options::default())
                    .unwrap_or_else(|e| panic!("{lang}: simulation runs: {e}"));
                (lang, report)
            })
            .collect()
    });
    &runs[lang]
}

#[test]
fn the_rust_policy_places_pods_by_class() {
    let r = schedule("rust");
    let placed = placements(r);
    let on = |pod: &str| placed.get(&format!("shop/{pod}")).map(String::as_str);
    for i in 0..6 {
        let node = on(&format!("etl-{i}")).unwrap_or_else(|| panic!("etl-{i} placed"));
        assert!(
            ["spot-1", "spot-2", "batch-pool-1"].contains(&node),
            "batch pod etl-{i} on spot capacity, got {node}"
        );
    }
    for i in 0..5 {
        let node = on(&format!("api-{i}")).unwrap_or_else(|| panic!("api-{i} placed"));
        assert!(
            ["on-demand-1", "on-demand-2", "latency-pool-1"].contains(&node),
            "latency-critical pod api-{i} off spot capacity, got {node}"
        );
    }
    for i in 0..3 {
        let node = on(&format!("tool-{i}")).unwrap_or_else(|| panic!("tool-{i} placed"));
        assert!(
            !node.ends_with("pool-1"),
            "unclassified tool-{i} not on a reserved node, got {node}"
        );
    }
    let failed = failures(r);
    assert_eq!(
        failed.get("shop/web-0").map(String::as_str),
        Some(
            "0/6 nodes are available: invalid label wasmsched.io/workload-class=\"web\": expected batch or latency-critical. not found"
        ),
        "{failed:?}"
    );
    assert_eq!(placed.len(), 14, "{placed:?}");
}

fn same_as_rust(lang: &str) {
    let (rust, other) = (schedule("rust"), schedule(lang));
    assert_eq!(
        placements(other),
        placements(rust),
        "{lang} places pods as the Rust plugin does"
    );
    assert_eq!(
        failures(other),
        failures(rust),
        "{lang} refuses pods as the Rust plugin does"
    );
    let scores = |r: &Report| -> Vec<(String, Option<i64>)> {
        r.scheduled
            .iter()
            .map(|s| (s.pod.clone(), s.score))
            .collect()
    };
    assert_eq!(scores(other), scores(rust), "{lang}: same final scores");
}

#[test]
fn python_places_pods_as_rust_does() {
    same_as_rust("python");
}

#[test]
fn javascript_places_pods_as_rust_does() {
    same_as_rust("js");
}

#[test]
fn c_places_pods_as_rust_does() {
    same_as_rust("c");
}

#[test]
fn go_places_pods_as_rust_does() {
    same_as_rust("go");
}

/// `examples/plugins/spot-affinity.cases.yaml` passes in every language.
#[test]
fn the_case_file_passes_in_every_language() {
    let text = std::fs::read_to_string(examples().join("spot-affinity.cases.yaml")).unwrap();
    let cases = CaseFile::parse(&text).unwrap_or_else(|e| panic!("case file: {e}"));
    for lang in LANGS {
        let report = plugin_test::run(&module(lang), &cases, None, Limits::default())
            .unwrap_or_else(|e| panic!("{lang}: starts: {e}"));
        assert!(report.success(), "{lang}:\n{report}");
        assert_eq!(report.passed(), cases.cases.len());
    }
}

/// `plugin check` accepts every language's component (imports and
/// exports), and each refuses args it does not take.
#[test]
fn every_language_passes_plugin_check_and_refuses_args() {
    let cache = cache_dir();
    for lang in LANGS {
        let _compiled = module(lang); // fills the disk cache the CLI reads
        let file = component(lang);
        let check = |args: &str| {
            wasmsched(&[
                "plugin",
                "check",
                file.to_str().unwrap(),
                "--cache-dir",
                cache.to_str().unwrap(),
                "--args",
                args,
            ])
        };
        let ok = check("{}");
        assert!(ok.success, "{lang}: {}", ok.stderr);
        assert!(
            ok.stdout.contains("exports:     lifecycle, filter, score"),
            "{lang}: {}",
            ok.stdout
        );
        let refused = check(r#"{"unexpected": 1}"#);
        assert!(!refused.success, "{lang} accepted args it does not take");
        for needle in [
            "error: ",
            "init failed",
            "rejected its args",
            "spot-affinity args",
        ] {
            assert!(
                refused.stderr.contains(needle),
                "{lang}: {needle:?} in {}",
                refused.stderr
            );
        }
    }
}

/// The contract evolves compatibly: the C, Python and JavaScript examples
/// are built against 0.1.0 and the Go one against 0.2.0 (`wit/history/`),
/// the Rust one against the current contract (0.3), and all five schedule
/// alike (the tests above compare every placement, FitError and score).
#[test]
fn components_of_the_previous_minor_load_and_behave_the_same() {
    use wasmsched::wasm::exports::Minor;
    assert_eq!(module("rust").minor(), Minor::Current);
    for lang in ["python", "js", "c", "go"] {
        let minor = if lang == "go" {
            Minor::V0_2
        } else {
            Minor::V0_1
        };
        assert_eq!(module(lang).minor(), minor, "{lang}");
        assert_eq!(
            placements(schedule(lang)),
            placements(schedule("rust")),
            "{lang}"
        );
        assert_eq!(
            failures(schedule(lang)),
            failures(schedule("rust")),
            "{lang}"
        );
    }
}
