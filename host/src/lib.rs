//! wasmsched: a Kubernetes scheduler whose policies are WebAssembly components.

pub mod model;
pub mod framework;
pub mod plugins;
pub mod config;
pub mod manifest;
pub mod output;
pub mod simulate;
pub mod wasm;
