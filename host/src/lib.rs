//! wasmsched: a Kubernetes scheduler whose policies are WebAssembly components.

pub mod model;
pub mod framework;
