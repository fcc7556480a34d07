//! Hostile plugin files: `/dev/zero`, a FIFO, a file over the size limit
//! and decompression bombs (gzip and zstd) are refused with one line
//! naming the file and the cause, in bounded time and memory, when a
//! configuration is loaded, by `plugin check`, and under hot reload (a
//! symlink swapped to them), where the running version keeps working.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use wasmsched::config;
use wasmsched::metrics::Metrics;
use wasmsched::reload::{Options, PluginWatcher, ReloadResult, Reloader, Stage};
use wasmsched::wasm::source::MAX_MODULE_SIZE;

/// A bound on a hang (a FIFO read would never return), not a timing.
const HANG: Duration = Duration::from_secs(120);

/// gzip members of 1 MiB of zeros each, concatenated (gunzip reads them as
/// one stream) to more than the limit: about 300 KiB on disk.
fn gzip_bomb() -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; 1 << 20]).unwrap();
    let member = e.finish().unwrap();
    let members = (MAX_MODULE_SIZE >> 20) as usize + 8;
    member.repeat(members)
}

/// One zstd frame of RLE blocks (4 bytes each, 128 KiB of one byte when
/// decoded) to more than the limit: about 8 KiB on disk.
fn zstd_bomb() -> Vec<u8> {
    // Magic, frame header descriptor (no content size, no checksum),
    // window descriptor 2^17.
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    let block = 128 << 10;
    let blocks = (MAX_MODULE_SIZE / block) as usize + 50;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        // Last_Block bit, Block_Type 1 (RLE), Block_Size.
        let header = last | (1 << 1) | ((block as u32) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0);
    }
    out
}

/// The hostile files, made in `dir`: (name, path, what the error says).
fn hostile(dir: &Path) -> Vec<(&'static str, PathBuf, String)> {
    let fifo = dir.join("fifo.wasm");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = dir.join("big.wasm");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_MODULE_SIZE + 1)
        .unwrap();
    let gz = dir.join("bomb.wasm.gz");
    std::fs::write(&gz, gzip_bomb()).unwrap();
    let zst = dir.join("bomb.wasm.zst");
    std::fs::write(&zst, zstd_bomb()).unwrap();
    let limit = "256 MiB limit (268435456 bytes)";
    let not_regular = "not a regular file; a plugin must be a regular file (or a symlink to one)";
    vec![
        (
            "dev-zero",
            PathBuf::from("/dev/zero"),
            format!("/dev/zero: is a character device, {not_regular}"),
        ),
        (
            "fifo",
            fifo.clone(),
            format!("{}: is a FIFO, {not_regular}", fifo.display()),
        ),
        (
            "oversized",
            big.clone(),
            format!("{}: file is larger than the {limit}", big.display()),
        ),
        (
            "gzip-bomb",
            gz.clone(),
            format!(
                "{}: gzip content decompresses to more than the {limit}",
                gz.display()
            ),
        ),
        (
            "zstd-bomb",
            zst.clone(),
            format!(
                "{}: zstd content decompresses to more than the {limit}",
                zst.display()
            ),
        ),
    ]
}

/// Runs `wasmsched ARGS`; kills it and fails if it has not ended within
/// [`HANG`].
fn wasmsched_bounded(args: &[&str]) -> common::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .env_remove("WASMSCHED_LOG")
        .env_remove("WASMSCHED_PLUGIN_CACHE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG {
            let _ = child.kill();
            panic!("wasmsched {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    common::Output {
        success: o.status.success(),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn plugin_check_refuses_hostile_files() {
    let dir = tempfile::tempdir().unwrap();
    for (name, path, message) in hostile(dir.path()) {
        let o = wasmsched_bounded(&["plugin", "check", path.to_str().unwrap()]);
        let line = common::assert_one_line_error(&o, &[&message]);
        eprintln!("{name}: {line}");
    }
}

fn config_text(path: &Path) -> String {
    format!(
        "wasmPlugins:\n- name: Chaos\n  path: {}\nprofiles:\n- schedulerName: hostile\n  plugins:\n    filter:\n      enabled: [{{name: Chaos}}]\n",
        path.display()
    )
}

#[test]
fn loading_a_configuration_refuses_hostile_plugin_files() {
    let dir = tempfile::tempdir().unwrap();
    for (name, path, message) in hostile(dir.path()) {
        let cfg = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&cfg, config_text(&path)).unwrap();
        let o = wasmsched_bounded(&["profiles", "--config", cfg.to_str().unwrap()]);
        let config = format!("config {}", cfg.display());
        common::assert_one_line_error(&o, &[&config, "wasmPlugins[0].path", &message]);
    }
}

/// The plugin path is a symlink (as in a ConfigMap volume) to `target`.
fn point(link: &Path, target: &Path) {
    let tmp = link.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

#[test]
fn hot_reload_rejects_hostile_files_and_keeps_the_running_version() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.wasm");
    std::fs::copy(common::chaos_wasm(), &good).unwrap();
    let link = dir.path().join("policy.wasm");
    point(&link, &good);
    let file = config::parse(&config_text(&link)).unwrap();
    let scheduler = Arc::new(config::build(&file, Path::new("."), 1).unwrap());
    let options = Options {
        debounce: Duration::from_millis(50),
        cache: None,
        metrics: Box::leak(Box::new(Metrics::new())),
        config: None,
    };
    let reloader =
        Arc::new(Reloader::from_config(scheduler, &file, Path::new("."), options).unwrap());
    let running = reloader.status()[0].digest.clone();
    let events = reloader.subscribe();
    let watcher = PluginWatcher::start(reloader.clone()).unwrap();

    // Each swap is seen by the watch thread, which must come back from
    // every one of them (a FIFO would have blocked it for good).
    for (name, path, message) in hostile(dir.path()) {
        point(&link, &path);
        let ev = events
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("{name}: no event"));
        assert_eq!(ev.result, ReloadResult::Rejected, "{name}: {ev}");
        assert_eq!(ev.stage, Some(Stage::Read), "{name}: {ev}");
        let expected = message.replace(&path.display().to_string(), &link.display().to_string());
        assert_eq!(ev.message, expected, "{name}");
        let status = &reloader.status()[0];
        assert_eq!((status.version, &status.digest), (1, &running), "{name}");
    }
    // Back to a real component: the thread still works.
    let next = dir.path().join("next.wasm");
    let mut bytes = std::fs::read(&good).unwrap();
    // A custom section: another digest, same behaviour.
    bytes.extend_from_slice(&[0, 5, 4, b'n', b'e', b'x', b't']);
    std::fs::write(&next, bytes).unwrap();
    point(&link, &next);
    let ev = events
        .recv_timeout(HANG)
        .expect("the reload of a good version");
    assert_eq!(ev.result, ReloadResult::Success, "{ev}");
    drop(watcher);

    // A direct check of a FIFO answers too (in a thread: a regression
    // would hang it, not the test).
    let fifo = dir.path().join("fifo.wasm");
    point(&link, &fifo);
    let (tx, rx) = mpsc::channel();
    let r = reloader.clone();
    std::thread::spawn(move || {
        let _ = tx.send(r.check("Chaos"));
    });
    let ev = rx
        .recv_timeout(HANG)
        .expect("check returned")
        .expect("an event");
    assert_eq!(ev.result, ReloadResult::Rejected, "{ev}");
}
