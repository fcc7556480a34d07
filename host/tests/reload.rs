//! Plugin hot reload: a plugin file rewritten (in place, and as a
//! Kubernetes ConfigMap volume's `..data` symlink swap) while pods are
//! being scheduled; rejected versions (truncated, not wasm, wrong contract,
//! refusing its args, deleted file) leave the old policy running; the
//! precompiled disk cache; compressed modules; `plugin check` and
//! `plugin watch`.
//!
//! The two policies: v1 is the `chaos` test component (Filter rejects
//! nodes labelled `chaos/reject: "true"`, Score is label `chaos/score`),
//! v2 the built-in `gpu-topology` component (a pod without GPUs passes
//! every node and scores the same everywhere). On the three test nodes the two
//! give different (feasible nodes, score) pairs, and so do the two ways of
//! mixing them (v1's Filter with v2's Score, and the reverse): a pod's
//! pair tells which version its whole cycle ran.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{chaos_wasm, NodeB, PodB};
use wasmsched::config::{self, Scheduler};
use wasmsched::framework::{Outcome, Snapshot};
use wasmsched::metrics::Metrics;
use wasmsched::model::Pod;
use wasmsched::reload::{
    FileState, Options, PluginWatcher, ReloadEvent, ReloadResult, Reloader, Stage,
};
use wasmsched::wasm::{self, DiskCache, Origin, PluginModule};

const SCHED: &str = "reload";
/// Generous: compiling gpu-topology in a debug build takes seconds.
const EVENT_TIMEOUT: Duration = Duration::from_secs(120);

fn v1() -> Vec<u8> {
    std::fs::read(chaos_wasm()).unwrap()
}

fn v2() -> Vec<u8> {
    wasm::builtin::BUILTIN
        .iter()
        .find(|(name, _)| *name == "gpu-topology")
        .expect("gpu-topology is built in")
        .1
        .to_vec()
}

/// `bytes` with a custom section appended: another digest, same behaviour
/// (so tests running in parallel do not share compiled modules).
fn tagged(bytes: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let name = b"wasmsched-test";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend(name);
    body.extend(tag.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend(body);
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn config_text(path: &Path, args: &str, extra: &str) -> String {
    format!(
        r#"
parallelism: 2
{extra}
wasmPlugins:
- name: Chaos
  path: {path}
  timeout: 2s
  initTimeout: 20s
profiles:
- schedulerName: {SCHED}
  plugins:
    multiPoint:
      disabled: [{{name: "*"}}]
    filter:
      enabled: [{{name: Chaos}}]
    score:
      enabled: [{{name: Chaos, weight: 1}}]
  pluginConfig:
  - name: Chaos
    args: {args}
"#,
        path = path.display()
    )
}

fn build(path: &Path, args: &str) -> (Arc<Scheduler>, config::ConfigFile) {
    let file = config::parse(&config_text(path, args, "")).unwrap();
    let s = config::build(&file, Path::new("."), 7).unwrap_or_else(|e| panic!("{e}"));
    (Arc::new(s), file)
}

fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    for n in [
        NodeB::new("node-a").label("chaos/score", "10"),
        NodeB::new("node-b").label("chaos/score", "90"),
        NodeB::new("node-c")
            .label("chaos/reject", "true")
            .label("chaos/score", "50"),
    ] {
        s.set_node(n.build());
    }
    s
}

fn pod(i: usize) -> Pod {
    PodB::new(&format!("p{i}"))
        .scheduler(SCHED)
        .uid(&format!("uid-{i}"))
        .build()
}

/// Which version a cycle ran: (feasible nodes, weighted score).
type Fingerprint = (usize, Option<i64>);

fn fingerprint(o: &Outcome) -> Fingerprint {
    match o {
        Outcome::Scheduled(p) => (p.feasible_nodes, p.score),
        other => panic!("pod not scheduled: {other:?}"),
    }
}

fn schedule_one(s: &Scheduler, snap: &Snapshot, i: usize) -> Outcome {
    s.profile(SCHED).unwrap().schedule(&pod(i), snap)
}

/// The fingerprints of v1 and v2, from schedulers that run only one.
fn references() -> (Fingerprint, Fingerprint) {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot();
    let mut out = Vec::new();
    for bytes in [v1(), v2()] {
        let p = dir.path().join("ref.wasm");
        std::fs::write(&p, bytes).unwrap();
        let (s, _) = build(&p, "{}");
        out.push(fingerprint(&schedule_one(&s, &snap, 0)));
    }
    let (r1, r2) = (out[0], out[1]);
    assert_eq!(
        r1,
        (2, Some(90)),
        "v1: node-c filtered out, node-b scores 90"
    );
    // Filter and Score of the two versions differ, so a mixed cycle
    // matches neither.
    assert_ne!(r1.0, r2.0);
    assert_ne!(r1.1, r2.1);
    // v2's Filter with v1's Score would pick node-b over node-c (90 > 50).
    assert_ne!(r2.1, Some(90), "v2 Filter + v1 Score would look like v2");
    (r1, r2)
}

fn test_metrics() -> &'static Metrics {
    Box::leak(Box::new(Metrics::new()))
}

fn options(metrics: &'static Metrics) -> Options {
    Options {
        debounce: Duration::from_millis(50),
        cache: None,
        metrics,
        config: None,
    }
}

fn next_event(rx: &mpsc::Receiver<ReloadEvent>) -> ReloadEvent {
    rx.recv_timeout(EVENT_TIMEOUT)
        .expect("a reload event within the timeout")
}

/// A pod's cycle: when it started and ended, and its outcome.
struct Cycle {
    started: Instant,
    ended: Instant,
    outcome: Outcome,
}

/// Schedules pods one after another on a thread until stopped.
struct Stream {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Cycle>>,
}

impl Stream {
    fn start(s: Arc<Scheduler>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let snap = snapshot();
            let mut out = Vec::new();
            let mut i = 0;
            while !flag.load(Ordering::Relaxed) {
                let started = Instant::now();
                let outcome = schedule_one(&s, &snap, i);
                out.push(Cycle {
                    started,
                    ended: Instant::now(),
                    outcome,
                });
                i += 1;
            }
            out
        });
        Self { stop, handle }
    }

    fn finish(self) -> Vec<Cycle> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// Runs `update` (which writes v2) while pods are scheduled; checks that
/// every pod ran one version from start to end, that pods started after
/// the swap ran v2, and that none was lost.
fn rewrite_while_scheduling(initial: impl FnOnce(&Path) -> PathBuf, update: impl FnOnce(&Path)) {
    let (r1, r2) = references();
    let dir = tempfile::tempdir().unwrap();
    let path = initial(dir.path());
    let (scheduler, file) = build(&path, "{}");
    let metrics = test_metrics();
    let reloader = Arc::new(
        Reloader::from_config(scheduler.clone(), &file, Path::new("."), options(metrics)).unwrap(),
    );
    let events = reloader.subscribe();
    let watcher = PluginWatcher::start(reloader.clone()).unwrap();
    let old_digest = reloader.status()[0].digest.clone();

    let stream = Stream::start(scheduler.clone());
    std::thread::sleep(Duration::from_millis(300));
    let written = Instant::now();
    update(dir.path());
    let ev = next_event(&events);
    assert_eq!(ev.result, ReloadResult::Success, "{ev}");
    let active = ev.at;
    // Let later pods run with the new version.
    std::thread::sleep(Duration::from_millis(500));
    let cycles = stream.finish();
    drop(watcher);

    let before = cycles.iter().filter(|c| c.ended < written).count();
    let after = cycles.iter().filter(|c| c.started > active).count();
    assert!(
        before >= 1 && after >= 1,
        "{before} pods before, {after} after"
    );
    for (i, c) in cycles.iter().enumerate() {
        let fp = fingerprint(&c.outcome);
        assert!(
            fp == r1 || fp == r2,
            "pod {i}: {fp:?} is neither v1 {r1:?} nor v2 {r2:?}: its cycle mixed versions"
        );
        if c.ended < written {
            assert_eq!(fp, r1, "pod {i} ran before the update");
        }
        if c.started > active {
            assert_eq!(fp, r2, "pod {i} started after the swap");
        }
    }
    // Nothing dropped: every pod the stream submitted has a placement
    // (fingerprint() panics on anything else).
    let status = &reloader.status()[0];
    assert_eq!(status.version, 2);
    assert_ne!(status.digest, old_digest);
    assert_eq!(metrics.reloads("Chaos", "success"), 1);
    let text = metrics.encode();
    assert!(
        text.contains(&format!(
            "wasmsched_plugin_info{{digest=\"{}\",plugin=\"Chaos\"}} 1",
            status.digest
        )),
        "{text}"
    );
    assert!(!text.contains(&old_digest), "old version retired: {text}");
    eprintln!(
        "reload: {} pods, {before} before the write, {after} after the swap; write -> active {:?}",
        cycles.len(),
        active - written
    );
}

#[test]
fn plain_file_rewritten_in_place_while_scheduling() {
    rewrite_while_scheduling(
        |dir| {
            let p = dir.join("policy.wasm");
            std::fs::write(&p, v1()).unwrap();
            p
        },
        // Truncate and write in place, as `cp` or a careless editor does.
        |dir| std::fs::write(dir.join("policy.wasm"), v2()).unwrap(),
    );
}

/// Writes a ConfigMap volume update as the kubelet does: files in a new
/// timestamped directory, a `..data_tmp` symlink to it renamed over
/// `..data`, the visible names symlinks through `..data`, then the old
/// directory removed.
fn configmap_update(dir: &Path, ts: &str, files: &[(&str, &[u8])]) {
    use std::os::unix::fs::symlink;
    let data = dir.join(format!("..{ts}"));
    std::fs::create_dir(&data).unwrap();
    for (name, bytes) in files {
        std::fs::write(data.join(name), bytes).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    symlink(format!("..{ts}"), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for (name, _) in files {
        let visible = dir.join(name);
        if visible.symlink_metadata().is_err() {
            symlink(format!("..data/{name}"), &visible).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

#[test]
fn configmap_data_symlink_swap_while_scheduling() {
    rewrite_while_scheduling(
        |dir| {
            configmap_update(dir, "2026_11_29_10_00_00.1234", &[("policy.wasm", &v1())]);
            let p = dir.join("policy.wasm");
            assert!(p.symlink_metadata().unwrap().file_type().is_symlink());
            p
        },
        |dir| configmap_update(dir, "2026_11_29_10_05_00.5678", &[("policy.wasm", &v2())]),
    );
}

/// A component of another contract version (its lifecycle interface is
/// `wasmsched:plugin/lifecycle@0.9.0`).
fn wrong_contract() -> Vec<u8> {
    wat::parse_str(
        r#"(component
  (core module $m (func (export "v") (result i32) i32.const 0))
  (core instance $i (instantiate $m))
  (func $v (result u32) (canon lift (core func $i "v")))
  (instance $lc (export "contract-version" (func $v)))
  (export "wasmsched:plugin/lifecycle@0.9.0" (instance $lc))
)"#,
    )
    .unwrap()
}

#[test]
fn bad_versions_are_rejected_and_the_old_policy_keeps_working() {
    let wrong_version = format!(
        "was built against contract wasmsched:plugin@0.9.0, this host implements wasmsched:plugin@{}",
        wasm::CONTRACT_VERSION
    );
    let (r1, _) = references();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.wasm");
    let good = tagged(&v1(), "bad-versions");
    std::fs::write(&path, &good).unwrap();
    // Args that chaos accepts and gpu-topology refuses.
    let (scheduler, file) = build(&path, r#"{"at": "score"}"#);
    let metrics = test_metrics();
    let reloader = Arc::new(
        Reloader::from_config(scheduler.clone(), &file, Path::new("."), options(metrics)).unwrap(),
    );
    let events = reloader.subscribe();
    let _watcher = PluginWatcher::start(reloader.clone()).unwrap();
    let running = reloader.status()[0].digest.clone();
    let snap = snapshot();

    let full = v1();
    let cases: Vec<(&str, Vec<u8>, Stage, &str)> = vec![
        (
            "truncated",
            full[..full.len() / 2].to_vec(),
            Stage::Compile,
            "compilation failed",
        ),
        (
            "not wasm",
            b"#!/bin/sh\necho not a plugin\n".to_vec(),
            Stage::Compile,
            "not a WebAssembly file",
        ),
        (
            "wrong contract",
            wrong_contract(),
            Stage::Compile,
            wrong_version.as_str(),
        ),
        (
            "empty component",
            wat::parse_str("(component)").unwrap(),
            Stage::Compile,
            "does not implement the contract",
        ),
        (
            "refuses its args",
            v2(),
            Stage::Init,
            "profile reload: failed to start: rejected its args",
        ),
    ];
    for (n, (what, bytes, stage, needle)) in cases.into_iter().enumerate() {
        std::fs::write(&path, &bytes).unwrap();
        let ev = next_event(&events);
        assert_eq!(ev.result, ReloadResult::Rejected, "{what}: {ev}");
        assert_eq!(ev.stage, Some(stage), "{what}: {ev}");
        assert!(ev.message.contains(needle), "{what}: {}", ev.message);
        assert_eq!(ev.previous, running);
        let status = &reloader.status()[0];
        assert_eq!(status.digest, running, "{what}: old version still running");
        assert_eq!(status.version, 1);
        assert!(
            status.last_error.as_deref().unwrap().contains(needle),
            "{what}: {status}"
        );
        assert_eq!(metrics.reloads("Chaos", "rejected"), n as u64 + 1);
        assert_eq!(
            fingerprint(&schedule_one(&scheduler, &snap, n)),
            r1,
            "{what}: the old policy keeps working"
        );
        assert!(ev.to_string().contains("rejected at"), "{ev}");
    }

    // Deleted: the last good version keeps running, and says so.
    std::fs::remove_file(&path).unwrap();
    let ev = next_event(&events);
    assert_eq!(ev.result, ReloadResult::Deleted, "{ev}");
    assert!(ev.message.contains("keeping version 1"), "{ev}");
    let status = &reloader.status()[0];
    assert_eq!(status.file, FileState::Missing);
    assert_eq!(status.digest, running);
    assert!(status
        .to_string()
        .contains("missing (the last good version keeps running)"));
    assert_eq!(fingerprint(&schedule_one(&scheduler, &snap, 99)), r1);
    assert_eq!(metrics.reloads("Chaos", "deleted"), 1);

    // Back with the running content: restored, no reload.
    std::fs::write(&path, &good).unwrap();
    let ev = next_event(&events);
    assert_eq!(ev.result, ReloadResult::Restored, "{ev}");
    assert_eq!(reloader.status()[0].file, FileState::Present);
    assert_eq!(reloader.status()[0].version, 1);
}

#[test]
fn unchanged_content_and_repeated_rejections_are_no_ops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.wasm");
    let good = tagged(&v1(), "no-ops");
    std::fs::write(&path, &good).unwrap();
    let (scheduler, file) = build(&path, "{}");
    let metrics = test_metrics();
    let reloader =
        Reloader::from_config(scheduler, &file, Path::new("."), options(metrics)).unwrap();
    // Same bytes written again: nothing to do.
    std::fs::write(&path, &good).unwrap();
    assert!(reloader.check("Chaos").is_none());
    // A bad version is reported once, not on every event.
    std::fs::write(&path, b"junk").unwrap();
    assert_eq!(
        reloader.check("Chaos").map(|e| e.result),
        Some(ReloadResult::Rejected)
    );
    assert!(reloader.check("Chaos").is_none());
    assert_eq!(metrics.reloads("Chaos", "rejected"), 1);
    // The same good version as another digest (a rebuild) reloads.
    std::fs::write(&path, tagged(&good, "rebuilt")).unwrap();
    let ev = reloader.check("Chaos").unwrap();
    assert_eq!(ev.result, ReloadResult::Success, "{ev}");
    assert_eq!(reloader.status()[0].version, 2);
}

#[test]
fn compressed_modules_load_at_start_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.wasm.gz");
    let first = tagged(&v1(), "gzip-1");
    std::fs::write(&path, gzip(&first)).unwrap();
    let (scheduler, file) = build(&path, "{}");
    let metrics = test_metrics();
    let reloader =
        Reloader::from_config(scheduler, &file, Path::new("."), options(metrics)).unwrap();
    assert_eq!(
        reloader.status()[0].size,
        first.len(),
        "decompressed at start"
    );
    // A zstd file under the .gz name: the magic bytes decide.
    let second = tagged(&v1(), "zstd-2");
    let zst = ruzstd::encoding::compress_to_vec(
        second.as_slice(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    assert!(zst.len() < second.len());
    std::fs::write(&path, &zst).unwrap();
    let ev = reloader.check("Chaos").unwrap();
    assert_eq!(ev.result, ReloadResult::Success, "{ev}");
    assert!(ev.message.contains("zstd"), "{ev}");
    let status = &reloader.status()[0];
    assert_eq!(status.size, second.len());
    assert_eq!(
        status.digest,
        hex_sha256(&second),
        "digest of the decompressed component"
    );
    // A corrupt compressed file is a read failure.
    std::fs::write(&path, &zst[..zst.len() / 2]).unwrap();
    let ev = reloader.check("Chaos").unwrap();
    assert_eq!(
        (ev.result, ev.stage),
        (ReloadResult::Rejected, Some(Stage::Read)),
        "{ev}"
    );
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn disk_cache_serves_restarts_and_rebuilds_corrupt_entries() {
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::new(cache_dir.path()).unwrap();
    let bytes = tagged(&v1(), &format!("disk-cache-{}", std::process::id()));
    let digest = hex_sha256(&bytes);

    let (m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Compiled);
    drop(m);
    let entry = cache.entry_path(&digest);
    assert!(entry.exists(), "entry written");
    let name = entry.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(&digest), "keyed by module digest: {name}");
    assert!(
        name.contains(wasm::cache::engine_fingerprint()),
        "and engine: {name}"
    );

    // A "restart": nothing compiled in memory, the entry is loaded.
    let (m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Disk);
    assert_eq!(m.digest, digest);
    // The loaded module works.
    wasm::WasmPlugin::new(
        "cached",
        m.clone(),
        wasm::WasmSettings {
            args: "{}".into(),
            limits: wasm::Limits::default(),
            failure_policy: wasm::FailurePolicy::Fail,
        },
        0,
    )
    .unwrap();
    drop(m);

    // Flip bytes in the middle of the entry: detected, deleted, rebuilt.
    let mut data = std::fs::read(&entry).unwrap();
    let mid = data.len() / 2;
    for b in &mut data[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&entry, &data).unwrap();
    let (m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Compiled);
    let note = report.cache_note.clone().unwrap();
    assert!(note.contains("checksum mismatch"), "{note}");
    drop(m);
    let (m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Disk, "rebuilt entry is used");
    drop(m);

    // Truncated entry.
    std::fs::write(&entry, &data[..20]).unwrap();
    let (m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Compiled);
    assert!(report.cache_note.unwrap().contains("truncated"));
    drop(m);

    // An entry of another module under this one's name.
    let other = tagged(&v1(), &format!("disk-cache-other-{}", std::process::id()));
    let (o, _) = PluginModule::compile_with(&other, Some(&cache)).unwrap();
    std::fs::copy(cache.entry_path(&hex_sha256(&other)), &entry).unwrap();
    drop(o);
    let (_m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Compiled);
    assert!(report.cache_note.unwrap().contains("another module"));
}

#[test]
fn config_plugin_cache_dir_is_used_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.wasm");
    let bytes = tagged(&v1(), &format!("config-cache-{}", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let text = config_text(&path, "{}", "pluginCacheDir: cache");
    let file = config::parse(&text).unwrap();
    let s = config::build(&file, dir.path(), 1).unwrap();
    let cache = DiskCache::new(dir.path().join("cache")).unwrap();
    assert!(cache.entry_path(&hex_sha256(&bytes)).exists());
    drop(s);
    // Restart: served from the cache.
    let (_m, report) = PluginModule::compile_with(&bytes, Some(&cache)).unwrap();
    assert_eq!(report.origin, Origin::Disk);
}

// ------------------------------------------------------------------ CLI

fn wasmsched(args: &[&str], envs: &[(&str, &Path)]) -> common::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmsched"));
    cmd.args(args)
        .env_remove("WASMSCHED_LOG")
        .env_remove("WASMSCHED_PLUGIN_CACHE");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    common::Output {
        success: o.status.success(),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn field<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key}: line in\n{stdout}"))
}

#[test]
fn plugin_check_reads_compressed_files_and_reports_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("chaos.wasm.gz");
    let bytes = v1();
    std::fs::write(&gz, gzip(&bytes)).unwrap();
    let cache = dir.path().join("cache");
    let gz_s = gz.display().to_string();
    let o = wasmsched(
        &["plugin", "check", &gz_s],
        &[("WASMSCHED_PLUGIN_CACHE", &cache)],
    );
    assert!(o.success, "{}{}", o.stdout, o.stderr);
    assert!(field(&o.stdout, "file").contains("(gzip, "), "{}", o.stdout);
    assert_eq!(field(&o.stdout, "size"), format!("{} bytes", bytes.len()));
    assert_eq!(field(&o.stdout, "sha256"), hex_sha256(&bytes));
    assert!(
        field(&o.stdout, "cache").starts_with("miss"),
        "{}",
        o.stdout
    );
    assert!(field(&o.stdout, "init").starts_with("ok"), "{}", o.stdout);
    // A second process finds it in the cache.
    let cache_s = cache.display().to_string();
    let o = wasmsched(&["plugin", "check", &gz_s, "--cache-dir", &cache_s], &[]);
    assert!(o.success, "{}{}", o.stdout, o.stderr);
    assert_eq!(field(&o.stdout, "cache"), "hit");
    assert!(
        field(&o.stdout, "compile").contains("disk cache"),
        "{}",
        o.stdout
    );

    // Failures exit non-zero with the reason.
    let bad = dir.path().join("bad.wasm.zst");
    std::fs::write(&bad, [0x28, 0xb5, 0x2f, 0xfd, 0, 0]).unwrap();
    let o = wasmsched(&["plugin", "check", &bad.display().to_string()], &[]);
    assert!(!o.success);
    assert!(
        o.stderr.contains("zstd decompression failed"),
        "{}",
        o.stderr
    );
    let wrong = dir.path().join("wrong.wasm");
    std::fs::write(&wrong, wrong_contract()).unwrap();
    let o = wasmsched(&["plugin", "check", &wrong.display().to_string()], &[]);
    assert!(!o.success);
    assert!(
        o.stderr
            .contains("was built against contract wasmsched:plugin@0.9.0"),
        "{}",
        o.stderr
    );
}

#[test]
fn plugin_watch_prints_one_line_per_reload_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.wasm");
    let good = tagged(&v1(), "watch-cli");
    std::fs::write(&path, &good).unwrap();
    let cfg = dir.path().join("scheduler.yaml");
    std::fs::write(&cfg, config_text(Path::new("policy.wasm"), "{}", "")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["plugin", "watch", "--config"])
        .arg(&cfg)
        .args(["--debounce", "50ms"])
        .env_remove("WASMSCHED_LOG")
        .env_remove("WASMSCHED_PLUGIN_CACHE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let wait_for = |needle: &str| -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match lines.recv_timeout(EVENT_TIMEOUT) {
                Ok(l) if l.contains(needle) => {
                    seen.push(l);
                    return seen;
                }
                Ok(l) => seen.push(l),
                Err(_) => panic!("no line with {needle:?}; got:\n{}", seen.join("\n")),
            }
        }
    };
    let intro = wait_for("watching");
    assert!(intro.iter().any(|l| l == "plugin Chaos"), "{intro:?}");
    std::fs::write(&path, b"not wasm").unwrap();
    let l = wait_for("Chaos rejected");
    assert!(
        l.last().unwrap().contains("not a WebAssembly file"),
        "{l:?}"
    );
    std::fs::write(&path, tagged(&good, "watch-cli-2")).unwrap();
    let l = wait_for("Chaos success");
    assert!(l.last().unwrap().contains(" -> "), "{l:?}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Lines of a `wasmsched plugin watch` child, with a wait for a line.
struct WatchCli {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl WatchCli {
    fn start(cwd: &Path, config: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .args(["plugin", "watch", "--config", config, "--debounce", "50ms"])
            .current_dir(cwd)
            .env_remove("WASMSCHED_LOG")
            .env_remove("WASMSCHED_PLUGIN_CACHE")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The lines up to the first that contains `needle`.
    fn wait_for(&self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(EVENT_TIMEOUT) {
                Ok(l) if l.contains(needle) => {
                    seen.push(l);
                    return seen;
                }
                Ok(l) => seen.push(l),
                Err(_) => panic!("no line with {needle:?}; got:\n{}", seen.join("\n")),
            }
        }
    }
}

impl Drop for WatchCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn plugin_watch_with_a_relative_config_path_reloads() {
    // `--config config.yaml` from the configuration's directory, the
    // documented form; the plugin path relative to it, in a subdirectory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("plugins")).unwrap();
    let path = dir.path().join("plugins/policy.wasm");
    let good = tagged(&v1(), "relative-1");
    std::fs::write(&path, &good).unwrap();
    let text = config_text(Path::new("plugins/policy.wasm"), "{}", "");
    std::fs::write(dir.path().join("config.yaml"), text).unwrap();
    let cli = WatchCli::start(dir.path(), "config.yaml");
    cli.wait_for("watching");
    std::fs::write(&path, tagged(&good, "relative-2")).unwrap();
    let l = cli.wait_for("Chaos success");
    assert!(l.last().unwrap().contains(" -> "), "{l:?}");

    // A bare file name: the plugin next to the configuration.
    let next = dir.path().join("policy.wasm");
    std::fs::write(&next, tagged(&good, "relative-3")).unwrap();
    let text = config_text(Path::new("policy.wasm"), "{}", "");
    std::fs::write(dir.path().join("bare.yaml"), text).unwrap();
    let cli = WatchCli::start(dir.path(), "bare.yaml");
    cli.wait_for("watching");
    std::fs::write(&next, tagged(&good, "relative-4")).unwrap();
    cli.wait_for("Chaos success");
}

#[test]
fn a_removed_and_recreated_plugin_directory_is_watched_again() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let path = plugins.join("policy.wasm");
    let good = tagged(&v1(), "recreated-1");
    std::fs::write(&path, &good).unwrap();
    let file = config::parse(&config_text(&path, "{}", "")).unwrap();
    let scheduler = Arc::new(config::build(&file, Path::new("."), 7).unwrap());
    let metrics = test_metrics();
    let reloader = Arc::new(
        Reloader::from_config(scheduler, &file, Path::new("."), options(metrics)).unwrap(),
    );
    let events = reloader.subscribe();
    let _watcher = PluginWatcher::start(reloader.clone()).unwrap();

    // Twice: the second round shows the new directory's watch works, and
    // that it is replaced again in turn.
    let mut version = 1;
    for round in 0..2 {
        std::fs::remove_dir_all(&plugins).unwrap();
        let ev = next_event(&events);
        assert_eq!(ev.result, ReloadResult::Deleted, "{ev}");
        // The new directory appears whole (prepared aside, renamed in).
        let aside = dir.path().join("plugins.new");
        std::fs::create_dir(&aside).unwrap();
        std::fs::write(
            aside.join("policy.wasm"),
            tagged(&good, &format!("r{round}")),
        )
        .unwrap();
        std::fs::rename(&aside, &plugins).unwrap();
        let ev = next_event(&events);
        assert_eq!(ev.result, ReloadResult::Success, "{ev}");
        version += 1;
        assert_eq!(reloader.status()[0].version, version);
        // Written again in the new directory: seen through its watch.
        std::fs::write(&path, tagged(&good, &format!("r{round}-b"))).unwrap();
        let ev = next_event(&events);
        assert_eq!(ev.result, ReloadResult::Success, "{ev}");
        version += 1;
    }
}
