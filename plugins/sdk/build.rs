//! Embeds the WIT contract into a macro so that plugin crates can generate
//! their own world's export glue without a path to the `wit/` folder.

use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let wit = manifest.join("../../wit/plugin.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let text = fs::read_to_string(&wit).expect("reading wit/plugin.wit");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("contract.rs");
    let code = format!(
        "/// The WIT contract this SDK implements, verbatim.\npub const CONTRACT_WIT: &str = r####\"{text}\"####;\n\n\
         #[doc(hidden)]\n#[macro_export]\nmacro_rules! __generate_world {{\n    ($world:literal) => {{\n        \
         ::wasmsched_plugin_sdk::__wit_bindgen::generate!({{\n            inline: r####\"{text}\"####,\n            world: $world,\n            \
         runtime_path: \"::wasmsched_plugin_sdk::__wit_bindgen::rt\",\n            with: {{\n                \
         \"wasmsched:plugin/types@0.1.0\": ::wasmsched_plugin_sdk::types,\n                \
         \"wasmsched:plugin/host@0.1.0\": ::wasmsched_plugin_sdk::__host,\n            }},\n        }});\n    }};\n}}\n"
    );
    fs::write(out, code).expect("writing contract.rs");
}
