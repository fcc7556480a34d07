//! The WebAssembly host: loads plugin components, runs them under a
//! deadline and a memory cap, keeps each instance's copy of the cluster
//! current, and puts them behind the framework's plugin traits
//! ([`adapter`]).

pub mod adapter;
pub mod bindings;
pub mod cache;
pub(crate) mod convert;
pub mod engine;
pub mod error;
pub mod exports;
pub mod instance;
pub mod interests;
pub mod loader;
pub mod module;
pub mod output;
pub mod plugin;
pub mod preemption;
pub mod progress;
pub mod source;
pub mod state;
pub mod wasi;

pub use cache::{CompileReport, DiskCache, Origin};
pub use error::{FailureKind, PluginFailure};
pub use exports::Exports;
pub use instance::Limits;
pub use loader::{Loader, LoaderError, Source};
pub use module::{LoadError, PluginModule, CONTRACT_VERSION};
pub use plugin::{FailurePolicy, WasmPlugin, WasmSettings};

/// The plugins compiled into this binary (crate name, component bytes).
pub mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin.rs"));
}
