//! Pulled content on disk, by digest (`DIR/sha256/<hex>`): manifests and
//! components that were pulled and verified once, so a restart with a
//! digest-pinned reference needs no registry (and survives its outage).
//! Every read is verified again (sha256 of the content against its name):
//! an entry that does not match is deleted and pulled again. Writes go to
//! a temporary file renamed into place. The directory is the
//! `pluginCacheDir`'s `oci/` (docs/plugin-lifecycle.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::artifact::digest_of;

#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.dir.join("sha256").join(hex))
    }

    /// The content of `digest`, when stored, intact and at most `limit`
    /// bytes.
    pub fn get(&self, digest: &str, limit: u64) -> Option<Vec<u8>> {
        let path = self.path(digest)?;
        let bytes = crate::input::regular::read_regular(&path, limit).ok()?;
        if digest_of(&bytes) == digest {
            return Some(bytes);
        }
        tracing::warn!(entry = %path.display(), "stored OCI content does not match its digest; deleting it");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Stores `bytes` (which must have digest `digest`). Failures are
    /// logged: the store is a cache.
    pub fn put(&self, digest: &str, bytes: &[u8]) {
        let Some(path) = self.path(digest) else {
            return;
        };
        if path.exists() {
            return;
        }
        if let Err(e) = write_atomic(&path, bytes) {
            tracing::warn!(entry = %path.display(), error = %e, "cannot store pulled OCI content");
        }
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_verified_on_every_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let d = digest_of(b"component");
        assert_eq!(store.get(&d, 100), None);
        store.put(&d, b"component");
        assert_eq!(store.get(&d, 100).as_deref(), Some(&b"component"[..]));
        assert_eq!(store.get(&d, 3), None, "over the limit");
        // Tampered on disk: refused and deleted.
        let path = dir.path().join("sha256").join(&d["sha256:".len()..]);
        std::fs::write(&path, b"c0mponent").unwrap();
        assert_eq!(store.get(&d, 100), None);
        assert!(!path.exists());
        assert_eq!(store.get("sha256:../../etc", 100), None);
    }
}
