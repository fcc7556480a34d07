//! The one plugin loader: read a component (bounded, decompressed),
//! digest it, compile it once per digest (through the precompiled cache on
//! disk), link it, and start a plugin (instantiate, `init`). Configuration,
//! hot reload, `plugin check`, `plugin test` and the deletion-cost
//! controller all load through here.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::framework::registry::Handle;
use crate::framework::PluginBundle;

use super::cache::{CompileReport, DiskCache};
use super::error::PluginFailure;
use super::module::{LoadError, PluginModule};
use super::plugin::{WasmPlugin, WasmSettings};
use super::source::{self, ModuleFile, SourceError};
use crate::oci::{self, OciError, OciSource};

/// Where a component comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Compiled into the binary from this crate of `plugins/`.
    Builtin(&'static str),
    File(PathBuf),
    /// An OCI artifact in a registry (`oci://...`).
    Oci(OciSource),
}

impl Source {
    /// How messages name it.
    pub fn label(&self) -> String {
        match self {
            Source::Builtin(krate) => format!("built-in {krate}"),
            Source::File(p) => p.display().to_string(),
            Source::Oci(o) => o.reference.to_string(),
        }
    }
}

/// Why a component could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoaderError {
    #[error(transparent)]
    Read(#[from] SourceError),
    /// A pull from a registry failed (the reference and the cause).
    #[error(transparent)]
    Pull(#[from] OciError),
    #[error("{label}: {error}")]
    Load { label: String, error: LoadError },
    #[error("{0}: not compiled into this binary")]
    NoBuiltin(String),
}

/// The component bytes compiled into this binary for crate `krate`.
pub fn builtin(krate: &str) -> Option<&'static [u8]> {
    super::builtin::BUILTIN
        .iter()
        .find(|(c, _)| *c == krate)
        .map(|(_, b)| *b)
}

/// Loads components, with an optional precompiled cache on disk.
#[derive(Debug, Clone, Default)]
pub struct Loader {
    pub cache: Option<DiskCache>,
}

impl Loader {
    pub fn new(cache: Option<DiskCache>) -> Self {
        Self { cache }
    }

    /// Reads a component file (bounded; decompressed).
    pub fn read_file(&self, path: &Path) -> Result<ModuleFile, LoaderError> {
        Ok(source::read(path)?)
    }

    /// The bytes of `source`.
    pub fn bytes(&self, source: &Source) -> Result<Cow<'static, [u8]>, LoaderError> {
        match source {
            Source::Builtin(krate) => builtin(krate)
                .map(Cow::Borrowed)
                .ok_or_else(|| LoaderError::NoBuiltin(krate.to_string())),
            Source::File(p) => Ok(Cow::Owned(self.read_file(p)?.bytes)),
            Source::Oci(o) => Ok(Cow::Owned(self.pull(o)?.bytes)),
        }
    }

    /// Pulls an OCI artifact's component (verified; through the store in
    /// the disk cache's `oci/` directory when there is a disk cache).
    pub fn pull(&self, source: &OciSource) -> Result<oci::Pulled, LoaderError> {
        let store = self.oci_store();
        Ok(oci::pull(
            &source.reference,
            &source.settings,
            store.as_ref(),
        )?)
    }

    /// Pulled artifacts on disk: the disk cache's `oci/` directory.
    pub fn oci_store(&self) -> Option<oci::Store> {
        self.cache
            .as_ref()
            .map(|c| oci::Store::new(c.dir().join("oci")))
    }

    /// Compiles (or finds compiled) the component of plugin `name`; the
    /// compile time is recorded in the process's metrics.
    pub fn compile(
        &self,
        name: &str,
        label: &str,
        bytes: &[u8],
    ) -> Result<(Arc<PluginModule>, CompileReport), LoaderError> {
        let (module, report) = super::progress::while_compiling(label, || {
            PluginModule::compile_with(bytes, self.cache.as_ref())
        })
        .map_err(|error| LoaderError::Load {
            label: label.to_string(),
            error,
        })?;
        crate::metrics::Metrics::global().observe_compile(name, &report);
        Ok((module, report))
    }

    /// Reads and compiles `source`.
    pub fn load(&self, name: &str, source: &Source) -> Result<Arc<PluginModule>, LoaderError> {
        let bytes = self.bytes(source)?;
        self.compile(name, &source.label(), &bytes).map(|(m, _)| m)
    }

    /// Starts plugin `name` of `module` (its first instance runs `init`),
    /// with `workers` worker instances, for a profile with `handle`.
    pub fn start(
        &self,
        name: &str,
        module: Arc<PluginModule>,
        settings: WasmSettings,
        workers: usize,
        handle: Handle,
    ) -> Result<Arc<WasmPlugin>, PluginFailure> {
        WasmPlugin::new(name, module, settings, workers).map(|p| Arc::new(p.with_handle(handle)))
    }
}

/// A started plugin as the framework sees it.
pub fn bundle(plugin: &Arc<WasmPlugin>) -> PluginBundle {
    super::adapter::bundle(plugin.clone())
}
