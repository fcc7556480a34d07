//! Contract versioning: a component built against a version of
//! `wasmsched:plugin` this host does not run (an older major/minor than
//! 0.1, a newer one) is refused at load with a message naming both
//! versions, by the library and by `plugin check`; one built against this
//! version loads. (Components built against 0.1.x load and behave the
//! same: `languages.rs` runs the C, Python and JavaScript examples, which
//! are built against 0.1.0; `go_sdk.rs` Go components of 0.2.0;
//! `contract_history.rs` a component of 0.3.0.)

mod common;

use common::*;
use wasmsched::wasm::{LoadError, PluginModule, CONTRACT_VERSION};

/// A component whose lifecycle interface is that of contract `version`
/// (only `contract-version` in it: enough for the export check, which
/// runs before anything else).
fn built_against(version: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
  (core module $m (func (export "v") (result i32) i32.const 0))
  (core instance $i (instantiate $m))
  (func $v (result u32) (canon lift (core func $i "v")))
  (instance $lc (export "contract-version" (func $v)))
  (export "wasmsched:plugin/lifecycle@{version}" (instance $lc))
)"#
    ))
    .unwrap()
}

#[test]
fn older_and_newer_contracts_are_refused_naming_both_versions() {
    for version in ["0.0.9", "0.6.0", "1.0.0"] {
        let err = PluginModule::compile(&built_against(version))
            .err()
            .unwrap_or_else(|| panic!("a {version} component must be refused"));
        assert_eq!(
            err,
            LoadError::Version {
                found: format!("wasmsched:plugin@{version}")
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "was built against contract wasmsched:plugin@{version}, this host implements wasmsched:plugin@{CONTRACT_VERSION} (and runs components of wasmsched:plugin 0.1.x, 0.2.x, 0.3.x and 0.4.x)"
            )
        );
    }
}

#[test]
fn plugin_check_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.wasm");
    std::fs::write(&file, built_against("0.0.9")).unwrap();
    let o = wasmsched(&["plugin", "check", file.to_str().unwrap()]);
    assert_one_line_error(
        &o,
        &[
            "old.wasm",
            "was built against contract wasmsched:plugin@0.0.9",
            &format!("this host implements wasmsched:plugin@{CONTRACT_VERSION}"),
        ],
    );
}

#[test]
fn a_component_of_this_version_loads() {
    let bytes = std::fs::read(chaos_wasm()).unwrap();
    let module =
        PluginModule::compile(&bytes).expect("the chaos plugin is built against this version");
    assert!(module.exports.filter);
    assert_eq!(module.minor(), wasmsched::wasm::exports::Minor::Current);
}
