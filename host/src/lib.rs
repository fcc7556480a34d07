//! wasmsched: a Kubernetes scheduler whose policies are WebAssembly components.

// The scheduling engine is a crate of its own (host/engine), so that it
// compiles while the rest of the host's dependencies do; its modules keep
// their paths here.
pub use wasmsched_engine::{escape, framework, model, scheduler};

pub mod bench;
pub mod config;
pub mod deletion_cost;
pub mod feature_gates;
pub mod gpu_sharing;
pub mod gpu_sharing_output;
pub mod input;
pub mod logging;
pub mod manifest;
pub mod metrics;
pub mod node_metrics;
pub mod oci;
pub mod output;
pub mod plugin_test;
pub mod prometheus;
pub mod reload;
pub mod runtime;
pub mod scaffold;
pub mod simulate;
pub mod wasm;
