//! The WASI a policy gets: what it may import (checked when the component
//! is loaded; anything else is refused, naming the import), and a linking
//! that cannot block. A plugin has no preopened directory, no socket, no
//! environment variable and no stdin; its stdout and stderr go to its
//! rate-limited log (`output.rs`). The only way left to block in a host
//! call is to sleep on a clock (`wasi:clocks/monotonic-clock`'s
//! `subscribe-duration` / `subscribe-instant`, then `wasi:io/poll`): those
//! subscriptions are ready at once here, so a plugin that sleeps does not,
//! and every call ends within its deadline (the epoch deadline interrupts
//! wasm code; no host call waits).

use wasmtime::component::{Component, Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::clocks::WasiClocksView;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as MonotonicClock;
use wasmtime_wasi::p2::DynPollable;

use super::engine::engine;
use super::instance::HostState;

/// The interfaces a policy may import (any 0.2.x version of WASI).
pub const ALLOWED: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasmsched:plugin/host",
    "wasmsched:plugin/types",
];

/// The WASI version the host links (its interfaces' `@` suffix).
const WASI_VERSION: &str = "0.2.12";

/// The first import of `component` a policy may not use, if any.
pub fn forbidden_import(component: &Component) -> Option<String> {
    let ty = component.component_type();
    let found = ty
        .imports(engine())
        .map(|(name, _)| name.to_string())
        .find(|name| {
            let bare = name.split('@').next().unwrap_or(name);
            !ALLOWED.contains(&bare)
        });
    found
}

/// The message for a forbidden import.
pub fn forbidden_message(import: &str) -> String {
    format!(
        "imports {import}, which a scheduling policy may not use (allowed: wasi:cli, wasi:clocks, wasi:filesystem without directories, wasi:io, wasi:random, and the wasmsched:plugin host interface)"
    )
}

/// WASI (as above) into `linker`.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    let mut clock = linker.instance(&format!("wasi:clocks/monotonic-clock@{WASI_VERSION}"))?;
    clock.func_wrap("subscribe-duration", |cx, (_d,): (u64,)| ready(cx))?;
    clock.func_wrap("subscribe-instant", |cx, (_t,): (u64,)| ready(cx))?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A clock subscription that is ready at once: sleeping does not block.
fn ready(mut cx: StoreContextMut<'_, HostState>) -> wasmtime::Result<(Resource<DynPollable>,)> {
    let mut clocks = cx.data_mut().clocks();
    clocks.subscribe_duration(0).map(|r| (r,))
}
