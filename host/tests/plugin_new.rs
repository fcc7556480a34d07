//! `wasmsched plugin new NAME --lang L` for each language: the project is
//! built with the toolchains `scripts/build-example-plugins` installs (the
//! same versions, from its tool cache), then `plugin check` and `plugin
//! test` (the project's own `cases.yaml`) pass on the component. The Rust
//! project names the SDK as crates.io would serve it (`--sdk crates.io`),
//! patched to the crates `cargo package` makes of `plugins/shared` and
//! `plugins/sdk`: the published SDK builds a plugin. The Go project's unit
//! test runs too.
//!
//! Like `tests/languages.rs`, these need the example plugins' tools:
//! without `WASMSCHED_EXAMPLE_PLUGINS` (set by `scripts/test` after
//! `scripts/build-example-plugins`) they fail, saying so.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use common::*;

/// The tools' paths (`scripts/build-example-plugins --tools`).
fn tools() -> &'static BTreeMap<String, String> {
    static TOOLS: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        if std::env::var_os("WASMSCHED_EXAMPLE_PLUGINS").is_none() {
            panic!(
                "WASMSCHED_EXAMPLE_PLUGINS is not set: these tests build plugins with the example plugins' tools; run `scripts/build-example-plugins DIR` and set WASMSCHED_EXAMPLE_PLUGINS=DIR (or run scripts/test)"
            );
        }
        let out = Command::new(repo_root().join("scripts/build-example-plugins"))
            .arg("--tools")
            .output()
            .expect("running scripts/build-example-plugins --tools");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

/// Compiled components, kept between runs (a Python or JavaScript
/// component compiles in 10-17 s).
fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-new-cache")
}

/// `plugin new my-policy --lang LANG` into a fresh directory.
fn new_project(lang: &str, extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my-policy");
    let mut args = vec![
        "plugin",
        "new",
        "my-policy",
        "--lang",
        lang,
        "--dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = wasmsched(&args);
    assert!(o.success, "{}", o.stderr);
    assert!(o.stdout.contains("cases.yaml"), "{}", o.stdout);
    (tmp, dir)
}

/// Runs `cmd` in `dir`; returns its wall time.
fn run(dir: &Path, cmd: &mut Command, what: &str) -> f64 {
    let started = Instant::now();
    let out = cmd
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed().as_secs_f64()
}

/// `plugin check` and `plugin test` pass on the project's component.
fn check_and_test(lang: &str, dir: &Path, component: &Path, built_in: f64) {
    let cache = cache();
    let cache = cache.to_str().unwrap();
    let wasm = component.to_str().unwrap();
    let check = wasmsched(&["plugin", "check", wasm, "--cache-dir", cache]);
    assert!(check.success, "{lang}: plugin check: {}", check.stderr);
    let contract = format!(
        "contract:    wasmsched:plugin@{}",
        wasmsched::wasm::CONTRACT_VERSION
    );
    assert!(check.stdout.contains(&contract), "{lang}: {}", check.stdout);
    assert!(
        check
            .stdout
            .contains("exports:     lifecycle, filter, score"),
        "{lang}: {}",
        check.stdout
    );
    let cases = dir.join("cases.yaml");
    let test = wasmsched(&[
        "plugin",
        "test",
        wasm,
        "--cases",
        cases.to_str().unwrap(),
        "--cache-dir",
        cache,
    ]);
    assert!(
        test.success,
        "{lang}: plugin test:\n{}{}",
        test.stdout, test.stderr
    );
    assert!(
        test.stdout.ends_with("1 passed, 0 failed\n"),
        "{lang}: {}",
        test.stdout
    );
    let size = std::fs::metadata(component).unwrap().len();
    eprintln!(
        "plugin new --lang {lang}: built in {built_in:.1} s, {size} bytes; check and test pass"
    );
}

fn build_sh(lang: &str, vars: &[&str]) {
    let (_tmp, dir) = new_project(lang, &[]);
    let mut cmd = Command::new("./build.sh");
    for v in vars {
        cmd.env(v, &tools()[*v]);
    }
    let took = run(&dir, &mut cmd, &format!("{lang}: ./build.sh"));
    check_and_test(lang, &dir, &dir.join("my-policy.wasm"), took);
}

#[test]
fn python() {
    build_sh("python", &["COMPONENTIZE_PY"]);
}

#[test]
fn js() {
    build_sh("js", &["COMPONENTIZE_JS"]);
}

#[test]
fn c() {
    build_sh("c", &["WIT_BINDGEN", "JCO", "CLANG"]);
}

#[test]
fn go() {
    let (_tmp, dir) = new_project("go", &[]);
    let jco = &tools()["WASMSCHED_JCO_DIR"];
    let took = run(
        &dir,
        Command::new("go")
            .args([
                "run",
                "wasmsched.io/plugin-sdk-go/cmd/build-plugin",
                "-o",
                "my-policy.wasm",
                ".",
            ])
            .env("WASMSCHED_JCO_DIR", jco),
        "go: build-plugin",
    );
    run(
        &dir,
        Command::new("go").args(["test", "./..."]),
        "go: go test",
    );
    check_and_test("go", &dir, &dir.join("my-policy.wasm"), took);
}

#[test]
fn rust_against_the_packaged_sdk() {
    let _ = tools();
    let (_tmp, dir) = new_project("rust", &["--sdk", "crates.io"]);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        manifest.contains(&format!("wasmsched-plugin-sdk = \"{version}\"")),
        "{manifest}"
    );
    // crates.io, as it would serve the two packages.
    let unpacked = package_sdk("plugin-new-sdk");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "{manifest}\n[patch.crates-io]\nwasmsched-plugin-sdk = {{ path = {:?} }}\nwasmsched-shared = {{ path = {:?} }}\n",
            unpacked.join(format!("wasmsched-plugin-sdk-{version}")).display().to_string(),
            unpacked.join(format!("wasmsched-shared-{version}")).display().to_string(),
        ),
    )
    .unwrap();
    // The workspace's versions of the other crates (cargo keeps what the
    // project uses), so that the build reuses the target directory.
    std::fs::copy(repo_root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-new-rust");
    let cargo = PathBuf::from(env!("CARGO"));
    let rustc = cargo.with_file_name("rustc");
    let took = run(
        &dir,
        Command::new(&cargo)
            .args([
                "build",
                "--offline",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--target-dir",
            ])
            .arg(&target)
            .env("RUSTC", rustc)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("CARGO_ENCODED_RUSTFLAGS"),
        "rust: cargo build",
    );
    let component = target.join("wasm32-wasip2/release/my_policy.wasm");
    check_and_test("rust", &dir, &component, took);
}
