//! The directories the watch thread follows, and keeping their watches
//! alive.
//!
//! Paths are made absolute first: `notify` reports absolute paths (it
//! joins a relative watch path to the working directory), so a relative
//! plugin path (a configuration loaded as `--config config.yaml`) must be
//! compared in the same form.
//!
//! An inotify watch is on the directory's inode, not its name: once the
//! directory is removed the watch is gone, and a directory created again
//! under the same name is not watched. [`Dirs::refresh`] notices (the
//! directory's identity changed, or an event said it was removed) and
//! watches the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use notify::{RecursiveMode, Watcher};

/// A directory's identity: (device, inode).
type DirId = (u64, u64);

/// What an event in a watched directory may have changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    /// A plugin's file.
    Plugin(String),
    /// The configuration file (or a fragment it includes).
    Config,
}

struct WatchedDir {
    /// What is in it.
    plugins: Vec<Target>,
    /// The directory the watch is on; `None` when it is not watched (the
    /// directory is gone, or was removed while watched).
    watching: Option<DirId>,
}

/// The watched directories and the watcher that follows them.
pub(super) struct Dirs {
    watcher: notify::RecommendedWatcher,
    dirs: BTreeMap<PathBuf, WatchedDir>,
}

impl Dirs {
    /// Watches the directory of every `(target, path)`; fails when one
    /// cannot be watched (it held the file a moment ago).
    pub(super) fn watch_all(
        watcher: notify::RecommendedWatcher,
        plugins: impl IntoIterator<Item = (Target, PathBuf)>,
    ) -> Result<Self, (PathBuf, notify::Error)> {
        let mut dirs: BTreeMap<PathBuf, WatchedDir> = BTreeMap::new();
        for (name, path) in plugins {
            dirs.entry(watch_dir(&path))
                .or_insert_with(|| WatchedDir {
                    plugins: Vec::new(),
                    watching: None,
                })
                .plugins
                .push(name);
        }
        let mut this = Self { watcher, dirs };
        let paths: Vec<PathBuf> = this.dirs.keys().cloned().collect();
        for dir in paths {
            let id = dir_id(&dir);
            this.watcher
                .watch(&dir, RecursiveMode::NonRecursive)
                .map_err(|e| (dir.clone(), e))?;
            this.dirs.get_mut(&dir).expect("listed").watching = id;
        }
        Ok(this)
    }

    /// Every followed target.
    pub(super) fn all_plugins(&self) -> impl Iterator<Item = &Target> {
        self.dirs.values().flat_map(|d| d.plugins.iter())
    }

    /// The plugins an event about `path` concerns: an entry of a watched
    /// directory, or the directory itself.
    pub(super) fn plugins_for<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = &'a Target> {
        self.dirs
            .iter()
            .filter(move |(d, _)| path.parent() == Some(d.as_path()) || path == *d)
            .flat_map(|(_, w)| w.plugins.iter())
    }

    /// Whether `path` is one of the watched directories.
    pub(super) fn is_dir(&self, path: &Path) -> bool {
        self.dirs.contains_key(path)
    }

    /// An event said the directory `path` was removed: its watch is gone
    /// (even if a new directory with the same inode number appears).
    pub(super) fn lost(&mut self, path: &Path) {
        if let Some(d) = self.dirs.get_mut(path) {
            d.watching = None;
        }
    }

    /// Watches again every directory that was replaced, removed or
    /// created since it was watched; returns the plugins in those
    /// directories (their files may have changed unseen).
    pub(super) fn refresh(&mut self) -> Vec<Target> {
        let mut changed = Vec::new();
        for (dir, w) in &mut self.dirs {
            let now = dir_id(dir);
            if now == w.watching {
                continue;
            }
            // The old watch, if any, is on an inode that is no longer
            // this directory.
            let _ = self.watcher.unwatch(dir);
            w.watching = None;
            if now.is_some() {
                match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        tracing::info!(dir = %dir.display(), "plugin directory is back; watching it again");
                        w.watching = now;
                    }
                    Err(e) => {
                        tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the plugin directory; retrying")
                    }
                }
            } else {
                tracing::warn!(dir = %dir.display(), "plugin directory is gone; watching for it to come back");
            }
            changed.extend(w.plugins.iter().cloned());
        }
        changed
    }
}

/// The directory watched for a plugin path, absolute.
pub(super) fn watch_dir(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// The identity of the directory at `path` (`None`: no directory there).
fn dir_id(path: &Path) -> Option<DirId> {
    let m = std::fs::metadata(path).ok().filter(|m| m.is_dir())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        Some((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_directories_are_absolute() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(watch_dir(Path::new("p.wasm")), cwd);
        assert_eq!(watch_dir(Path::new("./p.wasm")), cwd);
        assert_eq!(watch_dir(Path::new("plugins/p.wasm")), cwd.join("plugins"));
        assert_eq!(watch_dir(Path::new("/a/b/p.wasm")), PathBuf::from("/a/b"));
    }
}
