//! Measures the plugin lifecycle: how long from writing a new plugin file
//! to the new policy deciding placements (plain file, and a ConfigMap
//! `..data` symlink swap), and how long a restart takes with a cold and a
//! warm precompiled cache. The numbers in BENCHMARKS.md (`## Plugin
//! reload`) come from:
//!
//!     cargo run --release --example reload_latency
//!
//! Components: the `chaos` test plugin and the built-in `gpu-topology` and
//! `network-locality` plugins (Rust, 180-280 KB). Each version written is
//! made unique by a custom section, so every reload compiles. With
//! `-- --extra FILE` (for example an 18 MB componentize-py component) the
//! restart and per-component tables also measure FILE as the policy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmsched::config;
use wasmsched::framework::{Outcome, Snapshot};
use wasmsched::model::{Node, Pod};
use wasmsched::reload::{Options, PluginWatcher, ReloadResult, Reloader};
use wasmsched::wasm::{builtin, DiskCache, Origin, PluginModule};

const ROUNDS: usize = 6;

fn builtin_bytes(name: &str) -> Vec<u8> {
    builtin::BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .expect("built in")
        .1
        .to_vec()
}

fn chaos() -> Vec<u8> {
    std::fs::read(Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("chaos.wasm")).unwrap()
}

/// `bytes` with a custom section: a new digest, the same behaviour.
fn tagged(bytes: &[u8], tag: &str) -> Vec<u8> {
    let name = b"wasmsched-bench";
    let mut body = vec![name.len() as u8];
    body.extend(name);
    body.extend(tag.as_bytes());
    assert!(body.len() < 128);
    let mut out = bytes.to_vec();
    out.extend([0, body.len() as u8]);
    out.extend(body);
    out
}

fn node(name: &str, labels: serde_json::Value) -> Node {
    let n = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
    });
    Node::from_k8s(&serde_json::from_value(n).unwrap()).unwrap()
}

fn pod(i: usize) -> Pod {
    let p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "default", "uid": format!("u{i}")},
        "spec": {"schedulerName": "bench", "containers": [{"name": "c", "image": "x"}]}
    });
    Pod::from_k8s(&serde_json::from_value(p).unwrap()).unwrap()
}

/// One profile `bench`: only Policy (Filter and Score), or (`builtins`)
/// the default chain with the built-in wasm plugins plus Policy at every
/// extension point it exports.
fn config_text(plugin: &Path, extra: &str, builtins: bool) -> String {
    let plugins = if builtins {
        "    multiPoint:\n      enabled: [{name: Policy}]\n"
    } else {
        "    multiPoint:\n      disabled: [{name: \"*\"}]\n    filter:\n      enabled: [{name: Policy}]\n    \
         score:\n      enabled: [{name: Policy, weight: 1}]\n"
    };
    format!(
        "parallelism: 2\n{extra}\nwasmPlugins:\n- name: Policy\n  path: {}\n  initTimeout: 30s\n\
         profiles:\n- schedulerName: bench\n  plugins:\n{plugins}",
        plugin.display()
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Latency {
    layout: &'static str,
    debounce: Duration,
    /// write -> a pod placed by the new version, ms.
    active: Vec<f64>,
    /// compile time within it, ms.
    compile: Vec<f64>,
}

/// Writes new versions of the policy (alternating chaos and gpu-topology)
/// and measures write -> new policy deciding placements.
fn reload_latency(configmap: bool, debounce: Duration) -> Latency {
    let dir = tempfile::tempdir().unwrap();
    let mut snap = Snapshot::default();
    snap.set_node(node("a", json!({"chaos/score": "10"})));
    snap.set_node(node("b", json!({"chaos/reject": "true"})));
    let versions = [chaos(), builtin_bytes("gpu-topology")];
    // chaos filters node b out, gpu-topology does not.
    let feasible = |v: usize| if v == 0 { 1 } else { 2 };
    let write = |round: usize| {
        let bytes = tagged(&versions[round % 2], &format!("round-{round}"));
        if configmap {
            write_configmap(dir.path(), round, &bytes);
        } else {
            std::fs::write(dir.path().join("policy.wasm"), bytes).unwrap();
        }
    };
    write(0);
    let path = dir.path().join("policy.wasm");
    let file = config::parse(&config_text(&path, "", false)).unwrap();
    let scheduler = Arc::new(config::build(&file, Path::new("."), 1).unwrap());
    let options = Options {
        debounce,
        ..Default::default()
    };
    let reloader =
        Arc::new(Reloader::from_config(scheduler.clone(), &file, Path::new("."), options).unwrap());
    let events = reloader.subscribe();
    let _watcher = PluginWatcher::start(reloader).unwrap();
    let fw = scheduler.profile("bench").unwrap();
    let placed = |i: usize| match fw.schedule(&pod(i), &snap) {
        Outcome::Scheduled(p) => p.feasible_nodes,
        o => panic!("{o:?}"),
    };
    assert_eq!(placed(0), feasible(0));
    let mut out = Latency {
        layout: if configmap {
            "ConfigMap ..data swap"
        } else {
            "plain file"
        },
        debounce,
        active: Vec::new(),
        compile: Vec::new(),
    };
    for round in 1..=ROUNDS {
        std::thread::sleep(Duration::from_millis(300));
        let written = Instant::now();
        write(round);
        // Schedule pods until one is placed by the new version.
        let mut i = 0;
        while placed(i) != feasible(round % 2) {
            i += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        out.active.push(written.elapsed().as_secs_f64() * 1e3);
        let ev = events.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(ev.result, ReloadResult::Success, "{ev}");
        out.compile
            .push(ev.compile.map_or(0.0, |c| c.elapsed.as_secs_f64() * 1e3));
    }
    out
}

fn write_configmap(dir: &Path, round: usize, bytes: &[u8]) {
    use std::os::unix::fs::symlink;
    let ts = format!("..2026_11_29_10_00_{round:02}.{}", 1000 + round);
    std::fs::create_dir(dir.join(&ts)).unwrap();
    std::fs::write(dir.join(&ts).join("policy.wasm"), bytes).unwrap();
    let old = std::fs::read_link(dir.join("..data")).ok();
    symlink(&ts, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    if old.is_none() {
        symlink("..data/policy.wasm", dir.join("policy.wasm")).unwrap();
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

/// Child mode: builds the scheduler from CONFIG (start-up as a restart
/// pays it) and prints the milliseconds.
fn child_start(config_path: &str) {
    let path = PathBuf::from(config_path);
    let file = config::load(&path).unwrap();
    let started = Instant::now();
    let s = config::build(&file, path.parent().unwrap(), 1).unwrap();
    println!("{:.3}", started.elapsed().as_secs_f64() * 1e3);
    drop(s);
}

/// Restart: a fresh process builds the scheduler (Policy, plus the
/// built-in GpuTopology and NetworkLocality), cold and warm cache.
fn restarts(policy: &[u8]) -> Vec<(&'static str, f64, f64)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.wasm"), tagged(policy, "restart")).unwrap();
    let cfg = dir.path().join("scheduler.yaml");
    std::fs::write(
        &cfg,
        config_text(Path::new("policy.wasm"), "pluginCacheDir: cache", true),
    )
    .unwrap();
    let exe = std::env::current_exe().unwrap();
    let run = || {
        let started = Instant::now();
        let o = Command::new(&exe)
            .args(["--child-start", &cfg.display().to_string()])
            .env_remove("WASMSCHED_PLUGIN_CACHE")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let build: f64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        (build, started.elapsed().as_secs_f64() * 1e3)
    };
    let mut cold = (Vec::new(), Vec::new());
    let mut warm = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let _ = std::fs::remove_dir_all(dir.path().join("cache"));
        let (b, p) = run();
        cold.0.push(b);
        cold.1.push(p);
        let (b, p) = run();
        warm.0.push(b);
        warm.1.push(p);
    }
    vec![
        (
            "cold cache (compile)",
            median(&mut cold.0),
            median(&mut cold.1),
        ),
        ("warm cache", median(&mut warm.0), median(&mut warm.1)),
    ]
}

/// Per component: compile vs load from the disk cache (in process).
fn per_component(extra: &Option<(String, Vec<u8>)>) -> Vec<(String, usize, f64, f64)> {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::new(dir.path()).unwrap();
    let mut out = Vec::new();
    let mut components = vec![
        ("chaos".to_string(), chaos()),
        ("gpu-topology".to_string(), builtin_bytes("gpu-topology")),
        (
            "network-locality".to_string(),
            builtin_bytes("network-locality"),
        ),
    ];
    components.extend(extra.clone());
    for (name, bytes) in components {
        let bytes = tagged(&bytes, "per-component");
        let mut compile = Vec::new();
        let mut load = Vec::new();
        for round in 0..3 {
            let b = tagged(&bytes, &format!("{round}"));
            let (m, r) = PluginModule::compile_with(&b, Some(&cache)).unwrap();
            assert_eq!(r.origin, Origin::Compiled);
            compile.push(r.elapsed.as_secs_f64() * 1e3);
            drop(m);
            let (m, r) = PluginModule::compile_with(&b, Some(&cache)).unwrap();
            assert_eq!(r.origin, Origin::Disk);
            load.push(r.elapsed.as_secs_f64() * 1e3);
            drop(m);
        }
        out.push((name, bytes.len(), median(&mut compile), median(&mut load)));
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child-start") {
        child_start(&args[2]);
        return;
    }
    let extra = args
        .iter()
        .position(|a| a == "--extra")
        .and_then(|i| args.get(i + 1))
        .map(|p| {
            let file = wasmsched::wasm::source::read(Path::new(p)).unwrap();
            let name = Path::new(p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, file.bytes)
        });
    println!("Reload latency: file written -> first pod placed by the new version (median of {ROUNDS}, min-max)\n");
    println!("| layout | debounce | write -> active ms | of which compile ms |");
    println!("|---|---:|---:|---:|");
    for debounce in [Duration::from_millis(200), Duration::from_millis(20)] {
        for configmap in [false, true] {
            let mut l = reload_latency(configmap, debounce);
            let (lo, hi) = (
                l.active.iter().cloned().fold(f64::MAX, f64::min),
                l.active.iter().cloned().fold(0.0, f64::max),
            );
            println!(
                "| {} | {} ms | {:.0} ({:.0}-{:.0}) | {:.0} |",
                l.layout,
                l.debounce.as_millis(),
                median(&mut l.active),
                lo,
                hi,
                median(&mut l.compile)
            );
        }
    }
    println!("\nRestart (new process builds the scheduler: Policy + GpuTopology + NetworkLocality; median of 3)\n");
    println!("| Policy | cache | build scheduler ms | whole process ms |");
    println!("|---|---|---:|---:|");
    let mut policies = vec![("chaos".to_string(), chaos())];
    policies.extend(extra.clone());
    for (name, bytes) in &policies {
        for (what, build, process) in restarts(bytes) {
            println!("| {name} | {what} | {build:.0} | {process:.0} |");
        }
    }
    println!("\nPer component: compile vs load from the disk cache (median of 3)\n");
    println!("| component | size KB | compile ms | cache load ms |");
    println!("|---|---:|---:|---:|");
    for (name, size, compile, load) in per_component(&extra) {
        println!("| {name} | {} | {compile:.1} | {load:.1} |", size / 1024);
    }
}
