//! Embeds the WIT contract into a macro so that plugin crates can generate
//! their own world's export glue without a path to the `wit/` folder, and
//! reads the contract's version from its `package` line (the one place the
//! version is stated).
//!
//! The contract is `contract/plugin.wit`, a link to the repository's
//! `wit/plugin.wit`: inside the package, so that the crate as published
//! (`cargo package` copies the file the link leads to) carries it.

use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let wit = manifest.join("contract/plugin.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let contract = fs::read_to_string(&wit).expect("reading contract/plugin.wit");
    // Worlds the SDK offers beyond those in the contract (combinations of
    // exports for `export_plugin!`), appended to the contract's package.
    let worlds = manifest.join("wit/worlds.wit");
    println!("cargo:rerun-if-changed={}", worlds.display());
    let extra = fs::read_to_string(&worlds).expect("reading plugins/sdk/wit/worlds.wit");
    let text = format!("{contract}\n{extra}");
    let version = contract
        .lines()
        .find_map(|l| l.trim().strip_prefix("package wasmsched:plugin@"))
        .map(|v| v.trim_end_matches(';').trim().to_string())
        .expect("contract/plugin.wit has a `package wasmsched:plugin@X.Y.Z;` line");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let code = format!(
        "/// The WIT contract this SDK implements, verbatim.\npub const CONTRACT_WIT: &str = r####\"{contract}\"####;\n\n\
         /// The contract version this SDK implements.\npub const CONTRACT_VERSION: &str = \"{version}\";\n\n\
         #[doc(hidden)]\n#[macro_export]\nmacro_rules! __generate_world {{\n    ($world:literal) => {{\n        \
         ::wasmsched_plugin_sdk::__wit_bindgen::generate!({{\n            inline: r####\"{text}\"####,\n            world: $world,\n            \
         runtime_path: \"::wasmsched_plugin_sdk::__wit_bindgen::rt\",\n            with: {{\n                \
         \"wasmsched:plugin/types@{version}\": ::wasmsched_plugin_sdk::types,\n                \
         \"wasmsched:plugin/host@{version}\": ::wasmsched_plugin_sdk::__host,\n            }},\n        }});\n    }};\n}}\n"
    );
    fs::write(out.join("contract.rs"), code).expect("writing contract.rs");
    let bindings = format!(
        "wit_bindgen::generate!({{\n    inline: \"package wasmsched:sdk; world imports {{ import wasmsched:plugin/host@{version}; import wasmsched:plugin/types@{version}; }}\",\n    \
         path: \"contract\",\n    world: \"wasmsched:sdk/imports\",\n    generate_unused_types: true,\n    generate_all,\n}});\n"
    );
    fs::write(out.join("bindings.rs"), bindings).expect("writing bindings.rs");
}
