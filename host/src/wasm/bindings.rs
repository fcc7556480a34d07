//! Host-side bindings for the contract in `wit/plugin.wit`.
wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
});

pub use exports::wasmsched::plugin::{deletion_cost, filter, lifecycle, normalize_score, score};
pub use wasmsched::plugin::types;
