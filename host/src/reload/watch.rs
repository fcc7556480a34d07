//! The watch thread: `notify` events on the plugins' directories, a quiet
//! period, then [`Reloader::check`] of the plugins in those directories.
//!
//! The directory is watched, not the file: an editor or `cp` may replace
//! the file (a new inode the old watch never sees), and a Kubernetes
//! ConfigMap volume updates by swapping its `..data` symlink, so the
//! visible name is a symlink whose target changes without any event on the
//! old target. On any event in the directory the path is resolved again
//! and its content digest compared with the running version.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};

use super::{ReloadError, Reloader};

/// Quiet period after the last event before a check.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// A burst of events that never goes quiet is still checked after this
/// many quiet periods.
const MAX_WAIT_PERIODS: u32 = 10;

enum Msg {
    /// Paths an event was about (empty: unknown, check everything).
    Event(Vec<PathBuf>),
    Stop,
}

/// Watches the plugins' files and reloads them (see the module docs).
/// Dropping it stops the thread.
pub struct PluginWatcher {
    reloader: Arc<Reloader>,
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    _watcher: notify::RecommendedWatcher,
}

impl PluginWatcher {
    /// Starts watching every plugin of `reloader`, then checks each once
    /// (a change made between the scheduler's start and the watch is not
    /// missed).
    pub fn start(reloader: Arc<Reloader>) -> Result<Self, ReloadError> {
        let debounce = reloader.options().debounce;
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let msg = match res {
                Ok(e) if ignored(&e.kind) => return,
                Ok(e) => Msg::Event(e.paths),
                Err(e) => {
                    tracing::warn!(error = %e, "plugin file watch error; checking every plugin");
                    Msg::Event(Vec::new())
                }
            };
            let _ = events.send(msg);
        })
        .map_err(|e| ReloadError::Watch {
            path: "(watcher)".into(),
            cause: e.to_string(),
        })?;
        // Directory -> plugins in it.
        let mut dirs: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
        for p in reloader.plugins() {
            dirs.entry(watch_dir(&p.path))
                .or_default()
                .push(p.name.clone());
        }
        for dir in dirs.keys() {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|e| ReloadError::Watch {
                    path: dir.display().to_string(),
                    cause: e.to_string(),
                })?;
        }
        let worker = reloader.clone();
        let thread = std::thread::Builder::new()
            .name("plugin-watch".into())
            .spawn(move || run(&worker, rx, &dirs, debounce))
            .map_err(|e| ReloadError::Watch {
                path: "(thread)".into(),
                cause: e.to_string(),
            })?;
        reloader.check_all();
        Ok(Self {
            reloader,
            tx,
            thread: Some(thread),
            _watcher: watcher,
        })
    }

    pub fn reloader(&self) -> &Arc<Reloader> {
        &self.reloader
    }

    /// Stops the thread (also done on drop).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PluginWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The directory watched for a plugin path.
fn watch_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Events that cannot change content: opening and reading (including our
/// own reads of the plugin file). A close after writing counts.
fn ignored(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
        EventKind::Access(_) => true,
        _ => false,
    }
}

fn run(
    reloader: &Reloader,
    rx: mpsc::Receiver<Msg>,
    dirs: &BTreeMap<PathBuf, Vec<String>>,
    debounce: Duration,
) {
    let mut dirty: BTreeSet<String> = BTreeSet::new();
    // (first event of the burst, last event)
    let mut burst: Option<(Instant, Instant)> = None;
    let every = || dirs.values().flatten().cloned();
    loop {
        let timeout = match burst {
            None => Duration::from_secs(3600),
            Some((first, last)) => {
                let quiet = last + debounce;
                let cap = first + debounce * MAX_WAIT_PERIODS;
                quiet.min(cap).saturating_duration_since(Instant::now())
            }
        };
        match rx.recv_timeout(timeout) {
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Msg::Event(paths)) => {
                let before = dirty.len();
                if paths.is_empty() {
                    dirty.extend(every());
                }
                for p in &paths {
                    // An event names an entry of a watched directory, or
                    // the directory itself.
                    let hit = dirs
                        .iter()
                        .filter(|(d, _)| p.parent() == Some(d.as_path()) || p == *d);
                    for (_, names) in hit {
                        dirty.extend(names.iter().cloned());
                    }
                }
                if dirty.len() > before || burst.is_some() {
                    let now = Instant::now();
                    burst = Some((burst.map_or(now, |(f, _)| f), now));
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                burst = None;
                for name in std::mem::take(&mut dirty) {
                    reloader.check(&name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_ignored_writes_are_not() {
        use notify::event::{CreateKind, ModifyKind};
        assert!(ignored(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(ignored(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!ignored(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(!ignored(&EventKind::Modify(ModifyKind::Any)));
        assert!(!ignored(&EventKind::Create(CreateKind::File)));
    }

    #[test]
    fn a_bare_file_name_is_watched_in_the_current_directory() {
        assert_eq!(watch_dir(Path::new("p.wasm")), PathBuf::from("."));
        assert_eq!(watch_dir(Path::new("/a/b/p.wasm")), PathBuf::from("/a/b"));
    }
}
