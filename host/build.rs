//! Compiles the built-in plugins (and the test plugins) to WebAssembly
//! components as part of the normal build, so the host needs no manual
//! pre-step: the built-ins are embedded in the binary, the test plugins
//! are found by tests through `WASMSCHED_TEST_PLUGIN_DIR`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";
/// (crate name, embedded in the binary)
const PLUGINS: &[(&str, bool)] = &[
    ("gpu-topology", true),
    ("network-locality", true),
    ("deletion-cost", true),
    ("chaos", false),
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for dir in ["plugins", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=WASMSCHED_PLUGIN_TARGET_DIR");

    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let present: Vec<&str> = PLUGINS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| {
            let dir = root.join("plugins").join(name);
            let member = workspace.contains(&format!("\"plugins/{name}\""))
                || workspace.contains("\"plugins/*\"");
            member && dir.join("Cargo.toml").exists() && dir.join("src/lib.rs").exists()
        })
        .collect();

    ensure_target();
    // A target dir of its own: the outer cargo holds the lock on ours.
    let target_dir = env::var_os("WASMSCHED_PLUGIN_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cargo_target_dir(&out).join("wasm-plugins"));
    assert!(
        !present.is_empty(),
        "no plugin crates found under {}",
        root.join("plugins").display()
    );
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--profile",
            "wasm",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(&target_dir);
    for name in &present {
        cmd.args(["-p", name]);
    }
    // Do not leak the outer build's compiler wrappers and flags (clippy,
    // coverage) into the guest build.
    for var in [
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_LLVM_COV",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("running cargo to build the wasm plugins");
    if !present.is_empty() && !status.success() {
        panic!("building the wasm plugins failed (see the cargo output above)");
    }

    let wasm_dir = target_dir.join(TARGET).join("wasm");
    let mut builtin = String::from("/// Built-in plugin components: (crate name, component bytes).\npub const BUILTIN: &[(&str, &[u8])] = &[\n");
    for (name, embedded) in PLUGINS {
        if !present.contains(name) {
            continue;
        }
        let file = wasm_dir.join(format!("{}.wasm", name.replace('-', "_")));
        assert!(file.exists(), "missing {}", file.display());
        if *embedded {
            builtin.push_str(&format!(
                "    ({name:?}, include_bytes!({:?})),\n",
                file.display().to_string()
            ));
        }
    }
    builtin.push_str("];\n");
    std::fs::write(out.join("builtin.rs"), builtin).unwrap();
    println!(
        "cargo:rustc-env=WASMSCHED_TEST_PLUGIN_DIR={}",
        wasm_dir.display()
    );
}

/// `<target>` from `<target>/<profile>/build/<pkg>-<hash>/out`.
fn cargo_target_dir(out: &Path) -> PathBuf {
    out.ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out.join("target"))
}

/// Installs the wasm target when the toolchain lacks it (a toolchain that
/// was already installed ignores `rust-toolchain.toml`'s target list).
fn ensure_target() {
    let sysroot = Command::new(env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string()));
    let installed = sysroot.is_some_and(|s| s.join("lib/rustlib").join(TARGET).exists());
    if !installed {
        let ok = Command::new("rustup")
            .args(["target", "add", TARGET])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            panic!("the {TARGET} target is missing and `rustup target add {TARGET}` failed");
        }
    }
}
