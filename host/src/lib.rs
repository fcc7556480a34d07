//! wasmsched: a Kubernetes scheduler whose policies are WebAssembly components.

pub mod bench;
pub mod config;
pub mod deletion_cost;
pub mod escape;
pub mod framework;
pub mod input;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod output;
pub mod plugin_test;
pub mod reload;
pub mod runtime;
pub mod simulate;
pub mod wasm;
