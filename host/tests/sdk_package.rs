//! The Rust SDK is publishable: `cargo package` (offline; what `cargo
//! publish` uploads) packs `wasmsched-shared` and `wasmsched-plugin-sdk`,
//! the SDK's package carries the contract (the bytes of `wit/plugin.wit`,
//! so its `CONTRACT_VERSION` is the package line's) and names every
//! dependency by version, none by path. `tests/plugin_new.rs` builds a
//! `plugin new` project against these packages as crates.io would serve
//! them.

mod common;

use common::*;

#[test]
fn the_sdk_and_the_crate_it_needs_package_with_the_contract_inside() {
    let unpacked = package_sdk("sdk-package");
    let version = env!("CARGO_PKG_VERSION");
    let sdk = unpacked.join(format!("wasmsched-plugin-sdk-{version}"));
    let shared = unpacked.join(format!("wasmsched-shared-{version}"));
    // The contract travels in the package, as a file.
    let contract = std::fs::read(sdk.join("contract/plugin.wit")).unwrap();
    assert_eq!(
        contract,
        std::fs::read(repo_root().join("wit/plugin.wit")).unwrap()
    );
    for f in [
        "build.rs",
        "src/lib.rs",
        "wit/worlds.wit",
        "README.md",
        "Cargo.toml",
    ] {
        assert!(sdk.join(f).is_file(), "the SDK package lacks {f}");
    }
    for f in ["src/lib.rs", "src/quantity.rs", "README.md"] {
        assert!(shared.join(f).is_file(), "the shared package lacks {f}");
    }
    // Dependencies by version only: nothing a crates.io user lacks.
    for (krate, dir) in [
        ("wasmsched-plugin-sdk", &sdk),
        ("wasmsched-shared", &shared),
    ] {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let mut section = "";
        for line in manifest.lines() {
            if line.starts_with('[') {
                section = line;
            } else if section.contains("dependencies") && line.starts_with("path = ") {
                panic!("{krate}'s packaged Cargo.toml names a dependency by path ({section}):\n{manifest}");
            }
        }
        assert!(
            !manifest.contains("publish = false"),
            "{krate} is not publishable"
        );
        for field in ["description = ", "license = ", "readme = "] {
            assert!(manifest.contains(field), "{krate}: no {field}");
        }
    }
    let manifest = std::fs::read_to_string(sdk.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "[dependencies.wasmsched-shared]\nversion = \"{version}\""
        )),
        "{manifest}"
    );
}
