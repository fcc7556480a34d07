//! Reloading plugins pulled from a registry: a new `oci://` reference in
//! the configuration is pulled, verified, checked and swapped in; a pull
//! that fails keeps the running version (see the module docs of
//! [`super`]).

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::config::{self, ConfigFile};
use crate::oci::OciSource;
use crate::wasm::{Loader, LoaderError, Source};

use super::{EventCtx, ReloadEvent, ReloadResult, Reloader, Stage, State};

/// Pause before trying a pull that failed for a transient cause again;
/// doubled after each failure, up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(15);
const MAX_RETRY: Duration = Duration::from_secs(300);

impl Reloader {
    /// The check of a plugin whose configuration names an OCI artifact:
    /// nothing to do while the running version is the one named (a digest
    /// never moves; a tag is resolved when its reference is new), else a
    /// pull and, when it succeeds, the same checks and swap as a file's.
    pub(super) fn check_oci(
        &self,
        ctx: &EventCtx,
        state: &mut State,
        wanted: &OciSource,
    ) -> Option<ReloadEvent> {
        if state.running == state.wanted {
            state.retry = None;
            return None;
        }
        let label = wanted.reference.to_string();
        let now = Instant::now();
        if state.last_rejected.as_deref() == Some(&label)
            && state.retry.is_none_or(|(at, _)| at > now)
        {
            return None;
        }
        let loader = Loader::new(self.options.cache.clone());
        let pulled = match loader.pull(wanted) {
            Ok(p) => p,
            Err(e) => {
                let transient = matches!(&e, LoaderError::Pull(p) if p.transient);
                state.retry = transient.then(|| {
                    let pause = state
                        .retry
                        .map_or(FIRST_RETRY, |(_, p)| (p * 2).min(MAX_RETRY));
                    (now + pause, pause)
                });
                state.last_rejected = Some(label);
                let message = e.to_string();
                return Some(ctx.event(
                    ReloadResult::Rejected,
                    Some(Stage::Pull),
                    message,
                    None,
                    None,
                ));
            }
        };
        state.retry = None;
        let digest = hex::encode(Sha256::digest(&pulled.bytes));
        if digest == state.module.digest {
            // The same component under another manifest: nothing to swap.
            state.running = state.wanted.clone();
            state.last_rejected = None;
            return None;
        }
        let description = format!(", manifest {}", pulled.manifest_digest);
        let event = self.install(ctx, state, &pulled.bytes, &description, digest);
        if event
            .as_ref()
            .is_some_and(|e| e.result == ReloadResult::Rejected)
        {
            state.last_rejected = Some(label);
        }
        event
    }

    /// Reads the followed configuration file again and reloads each
    /// plugin whose `oci://` reference changed; returns those reloads'
    /// events. A configuration that cannot be read, and changes beyond
    /// those references, are logged (once) and change nothing.
    pub fn config_changed(&self) -> Vec<ReloadEvent> {
        let (Some(path), Some((start, base))) = (&self.options.config, &self.config) else {
            return Vec::new();
        };
        let shown = path.display();
        let sources = config::load(path).and_then(|f| {
            let sources = config::plugin_sources(&f, base)?;
            Ok((f, sources))
        });
        let (file, sources) = match sources {
            Ok(s) => s,
            Err(e) => {
                self.note(Some(format!(
                    "configuration {shown} changed and cannot be used: {e}; the running plugins are kept"
                )));
                return Vec::new();
            }
        };
        let mut restart = Vec::new();
        let mut changed = Vec::new();
        {
            // No check runs meanwhile: it would write back its copy of
            // the state over the new reference.
            let _checking = self.checking.lock();
            let mut states = self.states.lock();
            for (p, state) in self.plugins.iter().zip(states.iter_mut()) {
                let new = sources.iter().find(|(n, _)| *n == p.name).map(|(_, s)| s);
                match (new, &state.wanted) {
                    (Some(n), w) if n == w => {}
                    (Some(Source::Oci(n)), Source::Oci(_)) => {
                        state.wanted = Source::Oci(n.clone());
                        state.retry = None;
                        changed.push(p.name.clone());
                    }
                    _ => restart.push(format!("wasmPlugins {}", p.name)),
                }
            }
        }
        if without_oci_paths(&file) != without_oci_paths(start) {
            restart.push("settings other than oci:// plugin paths".into());
        }
        self.note((!restart.is_empty()).then(|| {
            format!(
                "configuration {shown} changed ({}): restart to apply; only oci:// plugin paths are reloaded",
                restart.join(", ")
            )
        }));
        changed.iter().filter_map(|n| self.check(n)).collect()
    }

    /// The plugins whose failed pull is due to be tried again.
    pub fn retries_due(&self) -> Vec<String> {
        let now = Instant::now();
        let states = self.states.lock();
        self.plugins
            .iter()
            .zip(states.iter())
            .filter(|(_, s)| s.retry.is_some_and(|(at, _)| at <= now))
            .map(|(p, _)| p.name.clone())
            .collect()
    }

    /// Logs a configuration note once (until it changes or goes away).
    fn note(&self, note: Option<String>) {
        let mut last = self.config_note.lock();
        if let Some(n) = &note {
            if last.as_ref() != Some(n) {
                tracing::warn!("{n}");
            }
        }
        *last = note;
    }
}

/// The configuration without what reloads apply: `oci://` plugin paths
/// (and their `allowTags`) and how registries are reached.
fn without_oci_paths(file: &ConfigFile) -> ConfigFile {
    let mut f = file.clone();
    for w in &mut f.wasm_plugins {
        if w.path
            .as_ref()
            .and_then(|p| p.to_str())
            .is_some_and(crate::oci::is_oci)
        {
            w.path = None;
            w.allow_tags = None;
        }
    }
    f.plugin_registry = None;
    f
}
