//! A compiled plugin component: validated once, instantiated many times.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, InstancePre, Linker};

use super::cache::{CompileReport, DiskCache, Lookup, Origin};
use super::engine::engine;
use super::exports::{Exports, Indices, Minor};
use super::state::HostState;

/// The contract version this host implements, as the `package` line of
/// `wit/plugin.wit` states it (read by `host/build.rs`).
pub const CONTRACT_VERSION: &str = env!("WASMSCHED_CONTRACT_VERSION");
/// The earlier minor versions this host still runs (their WIT is kept in
/// `wit/history/`).
pub const OLDER_MINORS: &[&str] = &["0.1", "0.2"];
const PACKAGE: &str = "wasmsched:plugin";

/// Why a file is not a usable plugin component.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LoadError {
    #[error("not a WebAssembly file (no \\0asm header)")]
    NotWasm,
    #[error("is a core WebAssembly module, not a component (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)")]
    CoreModule,
    #[error("compilation failed: {0}")]
    Compile(String),
    #[error("imports something the host does not provide: {0}")]
    Imports(String),
    /// An import a policy may not use (`wasi.rs`).
    #[error("{0}")]
    Forbidden(String),
    #[error(
        "was built against contract {found}, this host implements {PACKAGE}@{CONTRACT_VERSION} (and runs components of {PACKAGE} 0.1.x, 0.2.x, 0.3.x and 0.4.x)"
    )]
    Version { found: String },
    #[error("does not implement the contract: {0}")]
    Contract(String),
}

/// A compiled, contract-checked component.
pub struct PluginModule {
    /// sha256 of the component bytes, hex.
    pub digest: String,
    pub size: usize,
    pub exports: Exports,
    pub compile_time: std::time::Duration,
    pub(crate) pre: InstancePre<HostState>,
    pub(crate) indices: Indices,
}

impl PluginModule {
    /// The contract minor the component was built against.
    pub fn minor(&self) -> Minor {
        self.indices.minor
    }

    /// The component's imports and exports by name
    /// (`wasmsched:plugin/lifecycle@0.2.0`, `wasi:io/streams@0.2.0`, ...),
    /// as an OCI artifact's config lists them.
    pub fn interfaces(&self) -> (Vec<String>, Vec<String>) {
        let ty = self.pre.component().component_type();
        let e = engine();
        let imports = ty.imports(e).map(|(n, _)| n.to_string()).collect();
        let exports = ty.exports(e).map(|(n, _)| n.to_string()).collect();
        (imports, exports)
    }

    /// Compiles and checks a component. Does not run any guest code.
    /// Compiled modules are shared process-wide by content digest, so
    /// several profiles (or reloads of unchanged bytes) compile once.
    pub fn compile(bytes: &[u8]) -> Result<Arc<Self>, LoadError> {
        Self::compile_with(bytes, None).map(|(m, _)| m)
    }

    /// [`compile`](Self::compile) with a precompiled cache on disk: a
    /// module not yet compiled in this process is loaded from `disk` when
    /// an entry for its digest and this engine exists (a corrupt or stale
    /// entry is deleted and rebuilt), else compiled and, once it passed
    /// the contract checks, stored there. Also says where it came from.
    pub fn compile_with(
        bytes: &[u8],
        disk: Option<&DiskCache>,
    ) -> Result<(Arc<Self>, CompileReport), LoadError> {
        static COMPILED: OnceLock<Mutex<HashMap<String, Weak<PluginModule>>>> = OnceLock::new();
        if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
            return Err(LoadError::NotWasm);
        }
        if bytes[4..8] == [1, 0, 0, 0] {
            return Err(LoadError::CoreModule);
        }
        let digest = hex::encode(Sha256::digest(bytes));
        let cache = COMPILED.get_or_init(Default::default);
        if let Some(m) = cache.lock().get(&digest).and_then(Weak::upgrade) {
            let report = CompileReport {
                origin: Origin::Memory,
                elapsed: std::time::Duration::ZERO,
                cache_note: None,
            };
            return Ok((m, report));
        }
        let (module, report) = Self::compile_uncached(bytes, digest.clone(), disk)?;
        let mut cache = cache.lock();
        cache.retain(|_, m| m.strong_count() > 0);
        cache.insert(digest, Arc::downgrade(&module));
        Ok((module, report))
    }

    fn compile_uncached(
        bytes: &[u8],
        digest: String,
        disk: Option<&DiskCache>,
    ) -> Result<(Arc<Self>, CompileReport), LoadError> {
        let started = Instant::now();
        let mut cache_note = None;
        let cached = disk.and_then(|d| match d.load(&digest) {
            Lookup::Hit(c) => Some(c),
            Lookup::Miss => None,
            Lookup::Discarded(why) => {
                cache_note = Some(format!("cache entry discarded: {why}"));
                None
            }
        });
        let origin = if cached.is_some() {
            Origin::Disk
        } else {
            Origin::Compiled
        };
        let component = match cached {
            Some(c) => c,
            None => Component::new(engine(), bytes).map_err(|e| {
                LoadError::Compile(
                    format!("{e:#}")
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                )
            })?,
        };
        let compile_time = started.elapsed();
        let module = Self::from_component(&component, bytes.len(), digest, compile_time)?;
        if let (Origin::Compiled, Some(d)) = (origin, disk) {
            if let Err(e) = d.store(&module.digest, &component) {
                tracing::warn!(dir = %d.dir().display(), error = %e, "could not write the plugin cache entry");
                cache_note = Some(format!("cache write failed: {e}"));
            }
        }
        let report = CompileReport {
            origin,
            elapsed: compile_time,
            cache_note,
        };
        Ok((module, report))
    }

    /// The contract checks, on a compiled component.
    fn from_component(
        component: &Component,
        size: usize,
        digest: String,
        compile_time: std::time::Duration,
    ) -> Result<Arc<Self>, LoadError> {
        let minor = check_version(component)?;
        if let Some(import) = super::wasi::forbidden_import(component) {
            return Err(LoadError::Forbidden(super::wasi::forbidden_message(
                &import,
            )));
        }
        let linker = linker().map_err(|e| LoadError::Imports(format!("{e:#}")))?;
        let pre = linker
            .instantiate_pre(component)
            .map_err(|e| LoadError::Imports(format!("{e:#}")))?;
        let indices = Indices::new(&pre, minor)
            .ok_or_else(|| LoadError::Contract(format!("no usable export {PACKAGE}/lifecycle")))?;
        let exports = indices.exports();
        if !(exports.filter
            || exports.score
            || exports.deletion_cost
            || exports.post_filter
            || exports.reserve
            || exports.permit)
        {
            return Err(LoadError::Contract(
                "exports no extension point (filter, score, post-filter, reserve, permit or deletion-cost)".into(),
            ));
        }
        Ok(Arc::new(Self {
            digest,
            size,
            exports,
            compile_time,
            pre,
            indices,
        }))
    }
}

/// `major.minor` of a `major.minor.patch` version.
pub fn major_minor(v: &str) -> String {
    v.splitn(3, '.').take(2).collect::<Vec<_>>().join(".")
}

/// The contract minor of a version this host runs, if it runs it.
pub fn minor_of(version: &str) -> Option<Minor> {
    let mm = major_minor(version);
    if mm == major_minor(CONTRACT_VERSION) {
        Some(Minor::Current)
    } else if mm == "0.1" {
        Some(Minor::V0_1)
    } else if mm == "0.2" {
        Some(Minor::V0_2)
    } else if mm == "0.3" {
        Some(Minor::V0_3)
    } else if mm == "0.4" {
        Some(Minor::V0_4)
    } else {
        None
    }
}

/// Which contract minor a component's `lifecycle` export was built
/// against; names the version when this host does not run it.
fn check_version(component: &Component) -> Result<Minor, LoadError> {
    let ty = component.component_type();
    let prefix = format!("{PACKAGE}/lifecycle@");
    let mut other = None;
    for (name, _) in ty.exports(engine()) {
        if let Some(version) = name.strip_prefix(&prefix) {
            match minor_of(version) {
                Some(minor) => return Ok(minor),
                None => other = Some(version.to_string()),
            }
        } else if let Some(rest) = name.strip_prefix(&format!("{PACKAGE}/")) {
            if let Some((_, version)) = rest.split_once('@') {
                other.get_or_insert(version.to_string());
            }
        }
    }
    match other {
        Some(v) => Err(LoadError::Version {
            found: format!("{PACKAGE}@{v}"),
        }),
        None => Err(LoadError::Contract(format!(
            "no export named {PACKAGE}/lifecycle@{CONTRACT_VERSION}"
        ))),
    }
}

/// WASI as `wasi.rs` allows it, plus the host interface of every contract
/// minor this host runs.
fn linker() -> wasmtime::Result<Linker<HostState>> {
    use wasmtime::component::HasSelf;
    let mut linker = Linker::new(engine());
    super::wasi::add_to_linker(&mut linker)?;
    super::bindings::current::wasmsched::plugin::host::add_to_linker::<
        HostState,
        HasSelf<HostState>,
    >(&mut linker, |s| s)?;
    super::bindings::v0_1::wasmsched::plugin::host::add_to_linker::<HostState, HasSelf<HostState>>(
        &mut linker,
        |s| s,
    )?;
    super::bindings::v0_2::wasmsched::plugin::host::add_to_linker::<HostState, HasSelf<HostState>>(
        &mut linker,
        |s| s,
    )?;
    super::bindings::v0_3::wasmsched::plugin::host::add_to_linker::<HostState, HasSelf<HostState>>(
        &mut linker,
        |s| s,
    )?;
    super::bindings::v0_4::wasmsched::plugin::host::add_to_linker::<HostState, HasSelf<HostState>>(
        &mut linker,
        |s| s,
    )?;
    Ok(linker)
}
