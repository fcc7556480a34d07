//! The watch thread: `notify` events on the plugins' directories, a quiet
//! period, then [`Reloader::check`] of the plugins in those directories.
//!
//! The directory is watched, not the file: an editor or `cp` may replace
//! the file (a new inode the old watch never sees), and a Kubernetes
//! ConfigMap volume updates by swapping its `..data` symlink, so the
//! visible name is a symlink whose target changes without any event on the
//! old target. On any event in the directory the path is resolved again
//! and its content digest compared with the running version. A directory
//! removed (or renamed) and created again is watched again (see
//! [`super::dirs`]).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::EventKind;

use super::dirs::{Dirs, Target};
use super::{ReloadError, Reloader};

/// Quiet period after the last event before a check.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// A burst of events that never goes quiet is still checked after this
/// many quiet periods.
const MAX_WAIT_PERIODS: u32 = 10;

/// How often the watched directories are checked for having been removed
/// or replaced (a stat each).
const REFRESH_PERIOD: Duration = Duration::from_secs(1);

enum Msg {
    /// Paths an event was about (empty: unknown, check everything), and
    /// whether it removed or renamed them.
    Event {
        paths: Vec<PathBuf>,
        gone: bool,
    },
    Stop,
}

/// Watches the plugins' files and reloads them (see the module docs).
/// Dropping it stops the thread.
pub struct PluginWatcher {
    reloader: Arc<Reloader>,
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl PluginWatcher {
    /// Starts watching every plugin of `reloader`, then checks each once
    /// (a change made between the scheduler's start and the watch is not
    /// missed).
    pub fn start(reloader: Arc<Reloader>) -> Result<Self, ReloadError> {
        let debounce = reloader.options().debounce;
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let msg = match res {
                Ok(e) if ignored(&e.kind) => return,
                Ok(e) => Msg::Event {
                    gone: matches!(
                        e.kind,
                        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
                    ),
                    paths: e.paths,
                },
                Err(e) => {
                    tracing::warn!(error = %e, "plugin file watch error; checking every plugin");
                    Msg::Event {
                        paths: Vec::new(),
                        gone: false,
                    }
                }
            };
            let _ = events.send(msg);
        })
        .map_err(|e| ReloadError::Watch {
            path: "(watcher)".into(),
            cause: e.to_string(),
        })?;
        let plugins = reloader
            .plugins()
            .iter()
            .filter_map(|p| Some((Target::Plugin(p.name.clone()), p.path()?.to_path_buf())));
        let config = reloader
            .config_path()
            .map(|c| (Target::Config, c.to_path_buf()));
        let dirs = Dirs::watch_all(watcher, plugins.chain(config)).map_err(|(dir, e)| {
            ReloadError::Watch {
                path: dir.display().to_string(),
                cause: e.to_string(),
            }
        })?;
        let worker = reloader.clone();
        let thread = std::thread::Builder::new()
            .name("plugin-watch".into())
            .spawn(move || run(&worker, rx, dirs, debounce))
            .map_err(|e| ReloadError::Watch {
                path: "(thread)".into(),
                cause: e.to_string(),
            })?;
        reloader.check_all();
        reloader.config_changed();
        Ok(Self {
            reloader,
            tx,
            thread: Some(thread),
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

/// Events that cannot change content: opening and reading (including our
/// own reads of the plugin file). A close after writing counts.
fn ignored(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
        EventKind::Access(_) => true,
        _ => false,
    }
}

/// The plugins waiting for a check, and the burst of events they came in.
#[derive(Default)]
struct Pending {
    dirty: BTreeSet<Target>,
    /// (first event of the burst, last event)
    burst: Option<(Instant, Instant)>,
}

impl Pending {
    fn add(&mut self, names: impl IntoIterator<Item = Target>) {
        let before = self.dirty.len();
        self.dirty.extend(names);
        if self.dirty.len() > before || self.burst.is_some() {
            let now = Instant::now();
            self.burst = Some((self.burst.map_or(now, |(f, _)| f), now));
        }
    }

    /// When the burst is due for a check.
    fn due(&self, debounce: Duration) -> Option<Instant> {
        let (first, last) = self.burst?;
        Some((last + debounce).min(first + debounce * MAX_WAIT_PERIODS))
    }
}

fn run(reloader: &Reloader, rx: mpsc::Receiver<Msg>, mut dirs: Dirs, debounce: Duration) {
    let mut pending = Pending::default();
    let mut next_refresh = Instant::now() + REFRESH_PERIOD;
    loop {
        let wake = pending
            .due(debounce)
            .map_or(next_refresh, |d| d.min(next_refresh));
        match rx.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Msg::Event { paths, gone }) => {
                if paths.is_empty() {
                    let all: Vec<Target> = dirs.all_plugins().cloned().collect();
                    pending.add(all);
                }
                for p in &paths {
                    let names: Vec<Target> = dirs.plugins_for(p).cloned().collect();
                    pending.add(names);
                    if gone && dirs.is_dir(p) {
                        // The directory itself went away: its watch with it.
                        dirs.lost(p);
                        next_refresh = Instant::now();
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if now >= next_refresh {
                    pending.add(dirs.refresh());
                    // Pulls that failed for a transient cause, due again.
                    for name in reloader.retries_due() {
                        reloader.check(&name);
                    }
                    next_refresh = now + REFRESH_PERIOD;
                }
                if pending.due(debounce).is_some_and(|d| d <= now) {
                    pending.burst = None;
                    for target in std::mem::take(&mut pending.dirty) {
                        match target {
                            Target::Plugin(name) => {
                                reloader.check(&name);
                            }
                            Target::Config => {
                                reloader.config_changed();
                            }
                        }
                    }
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
        use notify::event::CreateKind;
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
}
