//! Plugin hot reload: a running scheduler picks up a new version of a wasm
//! plugin's component when its file (or Kubernetes ConfigMap) changes.
//!
//! [`Reloader`] is the core, with no thread: [`Reloader::check`] reads a
//! plugin's file, compares its digest with the running version, compiles
//! and validates a new version off the scheduling path (contract checks,
//! the extension points each profile uses, `init` with each profile's
//! args) and swaps it into every profile that uses the plugin, between
//! cycles (a cycle keeps the chain it started with; see
//! `Framework::set_profile`). A version that fails any check is rejected
//! and the previous one keeps running; a deleted file keeps the last good
//! version running. Each outcome is logged, counted in
//! `wasmsched_plugin_reloads_total`, kept in [`Reloader::status`] and sent
//! to [`Reloader::subscribe`]rs.
//!
//! [`PluginWatcher`] owns the thread that watches the plugins' directories
//! with `notify`, debounces bursts of events and calls `check`.
//! docs/plugin-lifecycle.md describes the whole lifecycle.
//!
//! A plugin pulled from a registry (`path: oci://...`) has no file: its
//! version is the reference the configuration names. With
//! [`Options::config`], the watch thread follows the configuration file
//! too and, when it changes, [`Reloader::config_changed`] reads it again
//! and reloads each plugin whose `oci://` reference changed: pulled and
//! verified (a refused pull is a rejection like any other, and the
//! previous version keeps running), then checked and swapped as a file's
//! new version is. Other configuration changes still need a restart (they
//! are logged once). A pull that failed for a transient cause (the
//! registry unreachable) is tried again after a backoff.

mod dirs;
mod oci;
mod watch;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::config::{self, ConfigError, ConfigFile, Scheduler};
use crate::framework::{Framework, Profile};
use crate::metrics::Metrics;
use crate::wasm::{
    loader, source, CompileReport, DiskCache, Loader, LoaderError, PluginModule, Source,
};

pub use watch::{PluginWatcher, DEFAULT_DEBOUNCE};

/// The outcome of a reload attempt (the `result` label of
/// `wasmsched_plugin_reloads_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReloadResult {
    /// A new version is running.
    Success,
    /// The new version failed a check; the previous one keeps running.
    Rejected,
    /// The file disappeared; the last good version keeps running.
    Deleted,
    /// The file came back with the running version's content.
    Restored,
}

impl ReloadResult {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Rejected => "rejected",
            Self::Deleted => "deleted",
            Self::Restored => "restored",
        }
    }
}

/// Which check a rejected version failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading or decompressing the file.
    Read,
    /// Pulling and verifying an OCI artifact.
    Pull,
    /// Compiling, or the contract checks (exports, contract version,
    /// imports).
    Compile,
    /// It no longer exports an extension point a profile uses.
    Exports,
    /// Instantiation, `contract-version` or `init` with a profile's args.
    Init,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Pull => "pull",
            Self::Compile => "compile",
            Self::Exports => "exports",
            Self::Init => "init",
        }
    }
}

/// One reload attempt, as logged and sent to subscribers.
#[derive(Debug, Clone)]
pub struct ReloadEvent {
    pub plugin: String,
    /// The file, or the OCI reference, the attempt was about.
    pub source: String,
    pub result: ReloadResult,
    /// The check that failed (rejections only).
    pub stage: Option<Stage>,
    /// What happened, or why the version was rejected.
    pub message: String,
    /// The version running before the attempt.
    pub previous: String,
    /// The digest of the file's content, when it could be read.
    pub digest: Option<String>,
    /// How the new module was compiled (when it got that far).
    pub compile: Option<CompileReport>,
    /// Time from the start of the check to its outcome (read, digest,
    /// compile, init, swap).
    pub took: Duration,
    /// When the outcome was reached.
    pub at: Instant,
    pub time: SystemTime,
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

impl fmt::Display for ReloadEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ts = humantime::format_rfc3339_millis(self.time);
        write!(f, "{ts} {} {}", self.plugin, self.result.as_str())?;
        match self.result {
            ReloadResult::Success => {
                let new = self.digest.as_deref().unwrap_or("?");
                write!(f, ": {} -> {}", short(&self.previous), short(new))?;
                if let Some(c) = &self.compile {
                    write!(
                        f,
                        " ({} in {:.1} ms",
                        c.origin.as_str(),
                        c.elapsed.as_secs_f64() * 1e3
                    )?;
                    if let Some(note) = &c.cache_note {
                        write!(f, "; {note}")?;
                    }
                    write!(f, ")")?;
                }
                write!(f, ", active after {:.1} ms", self.took.as_secs_f64() * 1e3)
            }
            ReloadResult::Rejected => {
                let stage = self.stage.map_or("?", Stage::as_str);
                write!(
                    f,
                    " at {stage}: {}; keeping {}",
                    self.message,
                    short(&self.previous)
                )
            }
            ReloadResult::Deleted | ReloadResult::Restored => {
                write!(f, ": {}", self.message)
            }
        }
    }
}

/// Whether the plugin's file is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    Present,
    /// Deleted (or its symlink dangles): the last good version runs.
    Missing,
}

/// One plugin's lifecycle state (`wasmsched plugin watch` prints it).
#[derive(Debug, Clone)]
pub struct PluginStatus {
    pub plugin: String,
    /// The file, or the OCI reference of the running version.
    pub source: String,
    /// sha256 of the running component.
    pub digest: String,
    /// Size of the running component (decompressed), bytes.
    pub size: usize,
    pub exports: String,
    /// 1 for the version the scheduler started with, +1 per reload.
    pub version: u64,
    /// When the running version was swapped in (start time for version 1).
    pub loaded_at: SystemTime,
    pub file: FileState,
    /// The most recent rejection, with its stage and cause.
    pub last_error: Option<String>,
    pub last_error_at: Option<SystemTime>,
    /// Attempts by result.
    pub reloads: BTreeMap<ReloadResult, u64>,
    /// Profiles (scheduler names) that run the plugin.
    pub profiles: Vec<String>,
}

impl fmt::Display for PluginStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "plugin {}", self.plugin)?;
        writeln!(f, "  path:      {}", self.source)?;
        writeln!(
            f,
            "  running:   version {} sha256:{} ({} bytes; {}) since {}",
            self.version,
            short(&self.digest),
            self.size,
            self.exports,
            humantime::format_rfc3339_seconds(self.loaded_at)
        )?;
        writeln!(
            f,
            "  file:      {}",
            match self.file {
                FileState::Present => "present",
                FileState::Missing => "missing (the last good version keeps running)",
            }
        )?;
        let counts: Vec<String> = self
            .reloads
            .iter()
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        writeln!(
            f,
            "  reloads:   {}",
            if counts.is_empty() {
                "none".to_string()
            } else {
                counts.join(", ")
            }
        )?;
        writeln!(
            f,
            "  profiles:  {}",
            if self.profiles.is_empty() {
                "none".to_string()
            } else {
                self.profiles.join(", ")
            }
        )?;
        if let (Some(e), Some(at)) = (&self.last_error, self.last_error_at) {
            writeln!(
                f,
                "  last error: {} ({})",
                e,
                humantime::format_rfc3339_seconds(at)
            )?;
        }
        Ok(())
    }
}

/// A plugin the reloader follows: its file, or the OCI artifact it was
/// started from.
#[derive(Debug, Clone)]
pub struct WatchedPlugin {
    pub name: String,
    pub source: Source,
}

impl WatchedPlugin {
    /// The file, for a plugin read from one.
    pub fn path(&self) -> Option<&Path> {
        match &self.source {
            Source::File(p) => Some(p),
            _ => None,
        }
    }
}

/// How the reloader works.
#[derive(Clone)]
pub struct Options {
    /// Quiet period after the last file event before the plugin is
    /// checked (bursts of events, a ConfigMap update, a slow copy).
    pub debounce: Duration,
    /// Precompiled components on disk.
    pub cache: Option<DiskCache>,
    /// Where outcomes are counted.
    pub metrics: &'static Metrics,
    /// The configuration file the scheduler was built from: followed, so
    /// that a changed `oci://` reference is reloaded (see the module docs).
    pub config: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: DEFAULT_DEBOUNCE,
            cache: None,
            metrics: Metrics::global(),
            config: None,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("debounce", &self.debounce)
            .field("cache", &self.cache)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why the reloader could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("plugin {0:?} is not a wasm plugin of this scheduler")]
    UnknownPlugin(String),
    #[error("watching {path}: {cause}")]
    Watch { path: String, cause: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
}

#[derive(Clone)]
struct State {
    module: Arc<PluginModule>,
    /// Where the running version came from.
    running: Source,
    /// Where the configuration now says it comes from (differs from
    /// `running` while a new `oci://` reference is not running yet).
    wanted: Source,
    /// When to try a pull that failed for a transient cause again, and
    /// the pause after that.
    retry: Option<(Instant, Duration)>,
    version: u64,
    loaded_at: SystemTime,
    file: FileState,
    last_error: Option<String>,
    last_error_at: Option<SystemTime>,
    /// Digest of the last rejected content (the reference, for a refused
    /// pull): the same bytes are not checked (and reported) again.
    last_rejected: Option<String>,
    reloads: BTreeMap<ReloadResult, u64>,
}

/// The reload core: checks plugin files and swaps new versions in.
pub struct Reloader {
    scheduler: Arc<Scheduler>,
    plugins: Vec<WatchedPlugin>,
    options: Options,
    /// The configuration as the scheduler was built from it, and the
    /// directory its relative paths are relative to (for
    /// `config_changed`).
    config: Option<(ConfigFile, PathBuf)>,
    /// The last configuration problem logged, so it is logged once.
    config_note: Mutex<Option<String>>,
    /// Per plugin (same order as `plugins`); held only briefly, so
    /// `status` answers during a long compile.
    states: Mutex<Vec<State>>,
    /// Serializes checks: two checks never swap profiles concurrently.
    checking: Mutex<()>,
    subscribers: Mutex<Vec<mpsc::Sender<ReloadEvent>>>,
}

impl Reloader {
    /// Follows `plugins` (each must be a wasm plugin the scheduler
    /// compiled at start, so the running version is known).
    pub fn new(
        scheduler: Arc<Scheduler>,
        plugins: Vec<WatchedPlugin>,
        options: Options,
    ) -> Result<Self, ReloadError> {
        let now = SystemTime::now();
        let mut states = Vec::new();
        for p in &plugins {
            let module = scheduler
                .modules
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, m)| m.clone())
                .ok_or_else(|| ReloadError::UnknownPlugin(p.name.clone()))?;
            options.metrics.register_plugin(&p.name, &module.digest);
            states.push(State {
                module,
                running: p.source.clone(),
                wanted: p.source.clone(),
                retry: None,
                version: 1,
                loaded_at: now,
                file: FileState::Present,
                last_error: None,
                last_error_at: None,
                last_rejected: None,
                reloads: BTreeMap::new(),
            });
        }
        Ok(Self {
            scheduler,
            plugins,
            options,
            config: None,
            config_note: Mutex::default(),
            states: Mutex::new(states),
            checking: Mutex::new(()),
            subscribers: Mutex::default(),
        })
    }

    /// Follows every `wasmPlugins` entry with a `path` (a file or an
    /// `oci://` artifact) of the configuration the scheduler was built
    /// from (`base` resolves relative paths, as in `config::build`), with
    /// its `pluginCacheDir`; and the configuration file itself when
    /// `options.config` names it.
    pub fn from_config(
        scheduler: Arc<Scheduler>,
        file: &ConfigFile,
        base: &Path,
        mut options: Options,
    ) -> Result<Self, ReloadError> {
        if options.cache.is_none() {
            options.cache = config::plugin_cache(file, base)?;
        }
        let plugins = config::plugin_sources(file, base)?
            .into_iter()
            .map(|(name, source)| WatchedPlugin { name, source })
            .collect();
        let mut this = Self::new(scheduler, plugins, options)?;
        this.config = Some((file.clone(), base.to_path_buf()));
        Ok(this)
    }

    /// The configuration file followed, if any.
    pub fn config_path(&self) -> Option<&Path> {
        self.options.config.as_deref()
    }

    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    pub fn plugins(&self) -> &[WatchedPlugin] {
        &self.plugins
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Receives every reload event from now on.
    pub fn subscribe(&self) -> mpsc::Receiver<ReloadEvent> {
        let (tx, rx) = mpsc::channel();
        self.subscribers.lock().push(tx);
        rx
    }

    /// Each followed plugin's state.
    pub fn status(&self) -> Vec<PluginStatus> {
        let states = self.states.lock();
        self.plugins
            .iter()
            .zip(states.iter())
            .map(|(p, s)| PluginStatus {
                plugin: p.name.clone(),
                source: s.running.label(),
                digest: s.module.digest.clone(),
                size: s.module.size,
                exports: s.module.exports.to_string(),
                version: s.version,
                loaded_at: s.loaded_at,
                file: s.file,
                last_error: s.last_error.clone(),
                last_error_at: s.last_error_at,
                reloads: s.reloads.clone(),
                profiles: self
                    .scheduler
                    .profiles
                    .iter()
                    .filter(|fw| fw.profile().members.iter().any(|m| m.name() == p.name))
                    .map(|fw| fw.scheduler_name().to_string())
                    .collect(),
            })
            .collect()
    }

    /// Checks every followed plugin; returns the events.
    pub fn check_all(&self) -> Vec<ReloadEvent> {
        self.plugins
            .iter()
            .filter_map(|p| self.check(&p.name))
            .collect()
    }

    /// Checks one plugin's file now: `None` when there is nothing to do
    /// (the content is the running version, or the same bytes were
    /// already rejected, or the file is still being written), else the
    /// outcome, which has also been applied, logged, counted and sent to
    /// subscribers.
    pub fn check(&self, name: &str) -> Option<ReloadEvent> {
        let index = self.plugins.iter().position(|p| p.name == name)?;
        let _checking = self.checking.lock();
        // Work on a copy: checks are serialized, so nothing else changes
        // the state meanwhile, and `status` is not blocked by a compile.
        let mut state = self.states.lock()[index].clone();
        let outcome = self.check_locked(index, &mut state);
        let mut states = self.states.lock();
        states[index] = state;
        let event = outcome?;
        let state = &mut states[index];
        *state.reloads.entry(event.result).or_insert(0) += 1;
        if event.result == ReloadResult::Rejected {
            state.last_error = Some(format!(
                "{}: {}",
                event.stage.map_or("?", Stage::as_str),
                event.message
            ));
            state.last_error_at = Some(event.time);
        }
        drop(states);
        let metrics = self.options.metrics;
        metrics.reload(name, event.result.as_str());
        match event.result {
            ReloadResult::Success => {
                if let Some(d) = &event.digest {
                    metrics.set_plugin_version(name, d);
                }
                tracing::info!(plugin = name, "{event}");
            }
            ReloadResult::Restored => tracing::info!(plugin = name, "{event}"),
            ReloadResult::Rejected | ReloadResult::Deleted => {
                tracing::warn!(plugin = name, "{event}")
            }
        }
        self.subscribers
            .lock()
            .retain(|tx| tx.send(event.clone()).is_ok());
        Some(event)
    }

    fn check_locked(&self, index: usize, state: &mut State) -> Option<ReloadEvent> {
        let plugin = &self.plugins[index];
        let started = Instant::now();
        let previous = state.module.digest.clone();
        let ctx = EventCtx {
            plugin,
            source: state.wanted.label(),
            previous: previous.clone(),
            started,
        };
        let path = match &state.wanted {
            Source::File(path) => path.clone(),
            Source::Oci(o) => {
                let o = o.clone();
                return self.check_oci(&ctx, state, &o);
            }
            Source::Builtin(_) => return None,
        };
        let event = |result, stage, message: String, digest, compile| {
            ctx.event(result, stage, message, digest, compile)
        };
        let before = file_stamp(&path);
        let file = match source::read(&path) {
            Ok(f) => f,
            Err(e) if e.is_missing() => {
                if state.file == FileState::Missing {
                    return None;
                }
                state.file = FileState::Missing;
                return Some(event(
                    ReloadResult::Deleted,
                    None,
                    format!(
                        "{} is gone; keeping version {} (sha256:{}) running",
                        path.display(),
                        state.version,
                        short(&previous)
                    ),
                    None,
                    None,
                ));
            }
            Err(e) => {
                let message = e.to_string();
                if state.last_error.as_deref() == Some(&format!("read: {message}")) {
                    return None;
                }
                return Some(event(
                    ReloadResult::Rejected,
                    Some(Stage::Read),
                    message,
                    None,
                    None,
                ));
            }
        };
        if before.is_none() || before != file_stamp(&path) {
            // Still being written: the writer's next event brings us back.
            tracing::debug!(plugin = %plugin.name, "file changed while being read; waiting");
            return None;
        }
        let digest = hex::encode(Sha256::digest(&file.bytes));
        let was_missing = state.file == FileState::Missing;
        state.file = FileState::Present;
        if digest == previous {
            state.last_rejected = None;
            return was_missing.then(|| {
                event(
                    ReloadResult::Restored,
                    None,
                    format!(
                        "{} is back with the running version {}",
                        path.display(),
                        short(&previous)
                    ),
                    Some(digest),
                    None,
                )
            });
        }
        if state.last_rejected.as_deref() == Some(&digest) {
            return None;
        }
        let description = match file.compression {
            source::Compression::None => String::new(),
            c => format!(", {} {} bytes on disk", c.as_str(), file.file_size),
        };
        self.install(&ctx, state, &file.bytes, &description, digest)
    }

    /// Compiles a new version, starts it for every profile that runs the
    /// plugin (with that profile's args and limits: `init` runs here, off
    /// the scheduling path), and swaps it in when every check passed.
    fn install(
        &self,
        ctx: &EventCtx,
        state: &mut State,
        bytes: &[u8],
        description: &str,
        digest: String,
    ) -> Option<ReloadEvent> {
        let name = &ctx.plugin.name;
        let rejected = |state: &mut State, stage, message: String, compile| {
            state.last_rejected = Some(digest.clone());
            Some(ctx.event(
                ReloadResult::Rejected,
                Some(stage),
                message,
                Some(digest.clone()),
                compile,
            ))
        };
        let loader = Loader::new(self.options.cache.clone());
        let (module, report) = match loader.compile(name, &ctx.source, bytes) {
            Ok(m) => m,
            Err(LoaderError::Load { error, .. }) => {
                return rejected(state, Stage::Compile, error.to_string(), None)
            }
            Err(e) => return rejected(state, Stage::Compile, e.to_string(), None),
        };
        let swaps = match self.start_everywhere(&loader, name, &module) {
            Ok(s) => s,
            Err((stage, m)) => return rejected(state, stage, m, Some(report)),
        };
        // Every check passed: swap. Each profile's chain is replaced whole;
        // a cycle in flight finishes with the chain it started with.
        for (fw, profile) in swaps {
            fw.set_profile(profile);
        }
        state.module = module;
        state.running = state.wanted.clone();
        state.version += 1;
        state.loaded_at = SystemTime::now();
        state.last_rejected = None;
        let message = format!(
            "version {} ({} bytes{description})",
            state.version,
            bytes.len(),
        );
        let success = ReloadResult::Success;
        Some(ctx.event(success, None, message, Some(digest), Some(report)))
    }

    /// The new version started for each profile that runs plugin `name`,
    /// and that profile with it swapped in; or the failed stage.
    fn start_everywhere(
        &self,
        loader: &Loader,
        name: &str,
        module: &Arc<PluginModule>,
    ) -> Result<Vec<(&Framework, Profile)>, (Stage, String)> {
        let mut swaps = Vec::new();
        for (profile_name, old) in self.scheduler.wasm.iter().filter(|(_, w)| w.name == name) {
            let Some(fw) = self.scheduler.profile(profile_name) else {
                continue;
            };
            let settings = old.settings.clone();
            let workers = self.scheduler.parallelism;
            let new = loader
                .start(name, module.clone(), settings, workers, old.handle.clone())
                .map_err(|f| {
                    (
                        Stage::Init,
                        format!("profile {profile_name}: failed to start: {f}"),
                    )
                })?;
            let profile = fw.profile().replace(&loader::bundle(&new)).map_err(|m| {
                let m = format!("profile {profile_name}: {m} (exports: {})", module.exports);
                (Stage::Exports, m)
            })?;
            swaps.push((fw, profile));
        }
        Ok(swaps)
    }
}

/// What every event of one check shares.
struct EventCtx<'a> {
    plugin: &'a WatchedPlugin,
    /// The file or reference checked.
    source: String,
    previous: String,
    started: Instant,
}

impl EventCtx<'_> {
    fn event(
        &self,
        result: ReloadResult,
        stage: Option<Stage>,
        message: String,
        digest: Option<String>,
        compile: Option<CompileReport>,
    ) -> ReloadEvent {
        ReloadEvent {
            plugin: self.plugin.name.clone(),
            source: self.source.clone(),
            result,
            stage,
            message,
            previous: self.previous.clone(),
            digest,
            compile,
            took: self.started.elapsed(),
            at: Instant::now(),
            time: SystemTime::now(),
        }
    }
}

/// Size and modification time, to notice a file that changes while read.
fn file_stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}
