//! The data of a plugin's store: its WASI context and resource table,
//! its memory limiter and its log, and the host functions the contract
//! imports (`log`).

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{self, types as wit};
use super::output::{Level, PluginLog};

/// Caps a store's linear memories and tables, and remembers whether it had
/// to refuse growth (so the resulting trap is reported as a memory error)
/// and how large the memories are.
pub struct Limiter {
    max_memory: usize,
    pub hit: bool,
    /// Bytes of linear memory the instance has (all its memories).
    pub memory: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.hit = true;
            return Ok(false);
        }
        self.memory = self.memory.saturating_add(desired.saturating_sub(current));
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The data of a plugin's store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    log: Arc<PluginLog>,
}

impl HostState {
    /// A store's data: `wasi` (no preopens, sockets or environment), linear
    /// memory capped at `max_memory` bytes, guest output to `log`.
    pub fn new(wasi: WasiCtx, max_memory: usize, log: Arc<PluginLog>) -> Self {
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory,
                hit: false,
                memory: 0,
            },
            log,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl bindings::current::wasmsched::plugin::types::Host for HostState {}

impl bindings::v0_1::wasmsched::plugin::host::Host for HostState {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        bindings::current::wasmsched::plugin::host::Host::log(self, level, message)
    }
}

impl bindings::v0_2::wasmsched::plugin::host::Host for HostState {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        bindings::current::wasmsched::plugin::host::Host::log(self, level, message)
    }
}

impl bindings::v0_3::wasmsched::plugin::host::Host for HostState {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        bindings::current::wasmsched::plugin::host::Host::log(self, level, message)
    }
}

impl bindings::v0_4::wasmsched::plugin::host::Host for HostState {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        bindings::current::wasmsched::plugin::host::Host::log(self, level, message)
    }
}

impl bindings::current::wasmsched::plugin::host::Host for HostState {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        let level = match level {
            wit::LogLevel::Debug => Level::Debug,
            wit::LogLevel::Info => Level::Info,
            wit::LogLevel::Warn => Level::Warn,
            wit::LogLevel::Error => Level::Error,
        };
        self.log.record(level, &message);
    }
}
