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

use wasmtime::component::{Component, HasData, Linker, Resource, ResourceTable};
use wasmtime::StoreContextMut;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as MonotonicClock;
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::random::{WasiRandom, WasiRandomCtx};
use wasmtime_wasi::WasiView;

use super::engine::engine;
use super::state::HostState;

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

/// WASI (as above) into `linker`: the allowed interfaces only, one by one
/// (wasmtime-wasi's `add_to_linker_sync` as of 48.0, without the sockets).
/// A socket import is refused at load, so the sockets are neither linked
/// nor compiled into the host.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sync};
    type T = HostState;
    let l = linker;
    sync::io::error::add_to_linker::<T, Io>(l, io_table)?;
    sync::io::poll::add_to_linker::<T, Io>(l, io_table)?;
    sync::io::streams::add_to_linker::<T, Io>(l, io_table)?;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    random::random::add_to_linker::<T, WasiRandom>(l, random_ctx)?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, random_ctx)?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, random_ctx)?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    l.allow_shadowing(true);
    let mut clock = l.instance(&format!("wasi:clocks/monotonic-clock@{WASI_VERSION}"))?;
    clock.func_wrap("subscribe-duration", |cx, (_d,): (u64,)| ready(cx))?;
    clock.func_wrap("subscribe-instant", |cx, (_t,): (u64,)| ready(cx))?;
    l.allow_shadowing(false);
    Ok(())
}

/// `wasi:io`'s view of the store: its resource table.
struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

fn io_table(state: &mut HostState) -> &mut ResourceTable {
    state.ctx().table
}

fn random_ctx(state: &mut HostState) -> &mut WasiRandomCtx {
    state.ctx().ctx.random()
}

/// A clock subscription that is ready at once: sleeping does not block.
fn ready(mut cx: StoreContextMut<'_, HostState>) -> wasmtime::Result<(Resource<DynPollable>,)> {
    let mut clocks = cx.data_mut().clocks();
    clocks.subscribe_duration(0).map(|r| (r,))
}
