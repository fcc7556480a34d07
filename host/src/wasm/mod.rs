//! The WebAssembly host: compiles plugin components, runs them under a
//! deadline and a memory cap, and keeps each instance's copy of the
//! cluster current.

pub mod bindings;
pub mod cache;
pub(crate) mod convert;
pub mod engine;
pub mod error;
pub mod instance;
pub mod module;
pub mod plugin;
pub mod source;

pub use cache::{CompileReport, DiskCache, Origin};
pub use error::{FailureKind, PluginFailure};
pub use instance::Limits;
pub use module::{Exports, LoadError, PluginModule, CONTRACT_VERSION};
pub use plugin::{FailurePolicy, WasmPlugin, WasmSettings};

/// The plugins compiled into this binary (crate name, component bytes).
pub mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin.rs"));
}
