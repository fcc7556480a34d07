//! wasmsched: a Kubernetes scheduler whose policies are WebAssembly components.

pub mod config;
pub mod framework;
pub mod manifest;
pub mod model;
pub mod output;
pub mod plugins;
pub mod simulate;
pub mod wasm;
