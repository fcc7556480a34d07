//! Compiles the built-in plugins (and the test plugins) to WebAssembly
//! components as part of the normal build, so the host needs no manual
//! pre-step: the built-ins are embedded in the binary, the test plugins
//! are found by tests through `WASMSCHED_TEST_PLUGIN_DIR`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// Reads the registry's table (`engine/src/framework/registry_table.rs`, the one
/// place a plugin is named): (kind, plugin name, factory or crate).
macro_rules! registry {
    ($($kind:ident $name:literal => $factory:expr, points: [$($point:ident),*], weight: $w:literal, default: $d:literal;)*) => {
        &[$((stringify!($kind), $name, stringify!($factory))),*]
    };
}
const REGISTRY: &[(&str, &str, &str)] = include!("engine/src/framework/registry_table.rs");

/// Plugin crates built for the tests only (not embedded).
const TEST_PLUGINS: &[&str] = &["chaos", "gang-quota", "compat-0-3"];

/// (crate name, embedded in the binary): the registry's wasm plugins,
/// then the test plugins.
fn plugins() -> Vec<(String, bool)> {
    let builtin = REGISTRY
        .iter()
        .filter(|(kind, _, _)| *kind == "wasm")
        .map(|(_, _, krate)| (krate.trim_matches('"').to_string(), true));
    let tests = TEST_PLUGINS.iter().map(|k| (k.to_string(), false));
    builtin.chain(tests).collect()
}

/// The contract version from `wit/plugin.wit`'s `package` line, for
/// `CONTRACT_VERSION` (the one place the version is stated).
fn contract_version(root: &Path) -> String {
    let wit = std::fs::read_to_string(root.join("wit/plugin.wit")).expect("reading wit/plugin.wit");
    wit.lines()
        .find_map(|l| l.trim().strip_prefix("package wasmsched:plugin@"))
        .map(|v| v.trim_end_matches(';').trim().to_string())
        .expect("wit/plugin.wit has a `package wasmsched:plugin@X.Y.Z;` line")
}

/// `plugin new`'s templates (`plugins/templates/`, but its README) and the
/// contract, embedded: `templates.rs`.
fn templates(root: &Path, out: &Path) {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, files);
            } else {
                files.push(p);
            }
        }
    }
    let dir = root.join("plugins/templates");
    let mut files = Vec::new();
    walk(&dir, &mut files);
    let mut code = String::from(
        "/// `plugin new`'s templates: (path under plugins/templates/, contents).\npub const TEMPLATES: &[(&str, &str)] = &[\n",
    );
    for f in files {
        let rel = f
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "README.md" {
            continue;
        }
        code.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    code.push_str("];\n");
    code.push_str(&format!(
        "/// `wit/plugin.wit`, verbatim.\npub const CONTRACT_WIT: &str = include_str!({:?});\n",
        root.join("wit/plugin.wit").display().to_string()
    ));
    std::fs::write(out.join("templates.rs"), code).unwrap();
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    templates(&root, &out);
    for dir in ["plugins", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=WASMSCHED_PLUGIN_TARGET_DIR");
    println!("cargo:rerun-if-changed=engine/src/framework/registry_table.rs");
    println!(
        "cargo:rustc-env=WASMSCHED_CONTRACT_VERSION={}",
        contract_version(&root)
    );
    let plugin_list = plugins();

    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let present: Vec<&str> = plugin_list
        .iter()
        .map(|(name, _)| name.as_str())
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
    for (name, embedded) in &plugin_list {
        if !present.contains(&name.as_str()) {
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
