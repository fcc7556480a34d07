//! A compiled plugin component: validated once, instantiated many times.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, InstancePre, Linker};

use super::bindings::{deletion_cost, filter, lifecycle, normalize_score, score};
use super::cache::{CompileReport, DiskCache, Lookup, Origin};
use super::engine::engine;
use super::instance::HostState;

/// The contract version this host implements.
pub const CONTRACT_VERSION: &str = "0.1.0";
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
    #[error(
        "was built against contract {found}, this host implements {PACKAGE}@{CONTRACT_VERSION}"
    )]
    Version { found: String },
    #[error("does not implement the contract: {0}")]
    Contract(String),
}

/// The extension points a component exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exports {
    pub filter: bool,
    pub score: bool,
    pub normalize: bool,
    pub deletion_cost: bool,
}

impl std::fmt::Display for Exports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names = vec!["lifecycle"];
        if self.filter {
            names.push("filter");
        }
        if self.score {
            names.push("score");
        }
        if self.normalize {
            names.push("normalize-score");
        }
        if self.deletion_cost {
            names.push("deletion-cost");
        }
        f.write_str(&names.join(", "))
    }
}

/// Lookup indices of each exported interface, resolved once.
#[derive(Clone)]
pub(crate) struct Indices {
    pub lifecycle: lifecycle::GuestIndices,
    pub filter: Option<filter::GuestIndices>,
    pub score: Option<score::GuestIndices>,
    pub normalize: Option<normalize_score::GuestIndices>,
    pub deletion_cost: Option<deletion_cost::GuestIndices>,
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
        check_version(component)?;
        let linker = linker().map_err(|e| LoadError::Imports(format!("{e:#}")))?;
        let pre = linker
            .instantiate_pre(component)
            .map_err(|e| LoadError::Imports(format!("{e:#}")))?;
        let lifecycle =
            lifecycle::GuestIndices::new(&pre).map_err(|e| LoadError::Contract(e.to_string()))?;
        let indices = Indices {
            lifecycle,
            filter: filter::GuestIndices::new(&pre).ok(),
            score: score::GuestIndices::new(&pre).ok(),
            normalize: normalize_score::GuestIndices::new(&pre).ok(),
            deletion_cost: deletion_cost::GuestIndices::new(&pre).ok(),
        };
        let exports = Exports {
            filter: indices.filter.is_some(),
            score: indices.score.is_some(),
            normalize: indices.normalize.is_some(),
            deletion_cost: indices.deletion_cost.is_some(),
        };
        if !(exports.filter || exports.score || exports.deletion_cost) {
            return Err(LoadError::Contract(
                "exports no extension point (filter, score or deletion-cost)".into(),
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

/// Names the contract version a component was built against when it is not
/// ours, so the error says both versions.
fn check_version(component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let ours = format!("{PACKAGE}/lifecycle@{CONTRACT_VERSION}");
    let mut other = None;
    for (name, _) in ty.exports(engine()) {
        if name == ours {
            return Ok(());
        }
        if let Some(rest) = name.strip_prefix(&format!("{PACKAGE}/")) {
            if let Some((_, version)) = rest.split_once('@') {
                other = Some(version.to_string());
            }
        }
    }
    match other {
        // Same major.minor with another patch level is compatible in
        // principle, but the component model matches names exactly.
        Some(v) => Err(LoadError::Version {
            found: format!("{PACKAGE}@{v}"),
        }),
        None => Err(LoadError::Contract(format!("no export named {ours}"))),
    }
}

/// WASI with an empty context (see `instance.rs`) plus the host interface.
fn linker() -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine());
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    super::bindings::wasmsched::plugin::host::add_to_linker::<
        HostState,
        wasmtime::component::HasSelf<HostState>,
    >(&mut linker, |s| s)?;
    Ok(linker)
}
