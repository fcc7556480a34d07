//! The precompiled-component cache on disk, so that a restart does not pay
//! compilation again (seconds for a Python or JavaScript component).
//!
//! An entry is keyed by the sha256 of the component bytes and by the
//! engine's compatibility fingerprint (wasmtime version, compiler target
//! and flags, tunables, wasm features: `Engine::precompile_compatibility_hash`)
//! plus this crate's version and the entry format. Each file carries a
//! header with the module digest and the sha256 of the payload: a
//! truncated, bit-flipped or misnamed entry is detected before wasmtime
//! sees it, deleted, and rebuilt. An entry that passes the checksum but
//! that wasmtime refuses (stale) is deleted and rebuilt too.
//!
//! Entries are written atomically (a temporary file in the same directory,
//! then a rename), so a crash or a concurrent writer never leaves a
//! half-written entry under the final name.
//!
//! Trust: loading an entry maps its machine code as executable. The
//! directory must be writable only by the scheduler (an `emptyDir` or a
//! volume it owns); the checksum guards against corruption, not against
//! someone who can write there.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::engine::engine;

/// Environment variable naming the cache directory when the configuration
/// has no `pluginCacheDir`.
pub const CACHE_ENV: &str = "WASMSCHED_PLUGIN_CACHE";

/// The first bytes of every entry; bumping the digit invalidates all
/// entries written by older formats.
const MAGIC: &[u8; 8] = b"WSCWASM1";
const HEADER: usize = MAGIC.len() + 32 + 32;
/// Extension of entry files.
const EXT: &str = "cwasm";

/// Where a compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Already compiled in this process (same digest).
    Memory,
    /// Deserialized from the disk cache.
    Disk,
    /// Compiled now (no disk cache, a miss, or a discarded entry).
    Compiled,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Disk => "disk-cache",
            Self::Compiled => "compiled",
        }
    }
}

/// How a module was obtained, for `plugin check`, the reload status and
/// the compile-time metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileReport {
    pub origin: Origin,
    /// Time to compile, or to load from the disk cache.
    pub elapsed: std::time::Duration,
    /// A cache entry that was found corrupt or stale and deleted (and
    /// rebuilt), or a failure to write the new entry; with the cause.
    pub cache_note: Option<String>,
}

/// What a lookup found.
pub enum Lookup {
    Hit(Component),
    Miss,
    /// The entry was corrupt or stale and has been deleted; why.
    Discarded(String),
}

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
}

/// The engine's compatibility fingerprint, hex (16 characters).
pub fn engine_fingerprint() -> &'static str {
    static FP: OnceLock<String> = OnceLock::new();
    FP.get_or_init(|| {
        let mut h = ShaHasher(Sha256::new());
        engine().precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        MAGIC.hash(&mut h);
        hex::encode(&h.0.finalize()[..8])
    })
}

/// Feeds `Hash` output into sha256 (std's hashers are not stable across
/// processes; this is).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl DiskCache {
    /// Uses (and creates) `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Self { dir })
    }

    /// The directory `WASMSCHED_PLUGIN_CACHE` names, if set and non-empty.
    pub fn env_dir() -> Option<PathBuf> {
        std::env::var_os(CACHE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry file of a module digest for this engine.
    pub fn entry_path(&self, digest: &str) -> PathBuf {
        self.dir
            .join(format!("{digest}-{}.{EXT}", engine_fingerprint()))
    }

    /// Looks an entry up; deletes it when corrupt or stale.
    pub fn load(&self, digest: &str) -> Lookup {
        let path = self.entry_path(digest);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return self.discard(&path, format!("unreadable: {e}")),
        };
        if let Err(why) = check_entry(&data, digest) {
            return self.discard(&path, why);
        }
        // SAFETY: the payload is what `Component::serialize` wrote for this
        // engine configuration (the fingerprint is in the file name) and
        // its checksum matches; the directory is trusted (module docs).
        #[allow(unsafe_code)]
        match unsafe { Component::deserialize(engine(), &data[HEADER..]) } {
            Ok(c) => Lookup::Hit(c),
            Err(e) => self.discard(&path, format!("stale: {}", first_line(&e))),
        }
    }

    fn discard(&self, path: &Path, why: String) -> Lookup {
        tracing::warn!(entry = %path.display(), %why, "discarding plugin cache entry; recompiling");
        let _ = std::fs::remove_file(path);
        Lookup::Discarded(why)
    }

    /// Writes an entry atomically, and removes entries of the same module
    /// for other engine fingerprints (left by an older version).
    pub fn store(&self, digest: &str, component: &Component) -> std::io::Result<PathBuf> {
        let payload = component
            .serialize()
            .map_err(|e| std::io::Error::other(first_line(&e)))?;
        let digest_raw = hex::decode(digest)
            .ok()
            .filter(|d| d.len() == 32)
            .ok_or_else(|| std::io::Error::other("module digest is not sha256 hex"))?;
        let path = self.entry_path(digest);
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".{digest}.{}.{}.tmp",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&digest_raw)?;
            f.write_all(&Sha256::digest(&payload))?;
            f.write_all(&payload)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let mine = path.file_name().map(|n| n.to_os_string());
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let s = name.to_string_lossy();
                if s.starts_with(&format!("{digest}-"))
                    && s.ends_with(&format!(".{EXT}"))
                    && Some(&name) != mine.as_ref()
                {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(path)
    }
}

/// Checks an entry's header and payload checksum.
fn check_entry(data: &[u8], digest: &str) -> Result<(), String> {
    if data.len() < HEADER {
        return Err(format!("truncated ({} bytes)", data.len()));
    }
    if &data[..MAGIC.len()] != MAGIC {
        return Err("not a cache entry of this format".into());
    }
    let (stored_digest, rest) = data[MAGIC.len()..].split_at(32);
    if hex::encode(stored_digest) != digest {
        return Err("entry belongs to another module".into());
    }
    let (sum, payload) = rest.split_at(32);
    if Sha256::digest(payload).as_slice() != sum {
        return Err("checksum mismatch (corrupt)".into());
    }
    Ok(())
}

fn first_line(e: &wasmtime::Error) -> String {
    format!("{e:#}")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_within_a_process() {
        assert_eq!(engine_fingerprint(), engine_fingerprint());
        assert_eq!(engine_fingerprint().len(), 16);
    }

    #[test]
    fn stale_entry_with_a_valid_checksum_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path().join("c")).unwrap();
        let digest = hex::encode(Sha256::digest(b"module"));
        // What another engine build might have written: intact, but not
        // loadable by this one.
        let payload = b"\x7fELF not really".to_vec();
        let mut data = MAGIC.to_vec();
        data.extend(hex::decode(&digest).unwrap());
        data.extend(Sha256::digest(&payload));
        data.extend(&payload);
        let path = cache.entry_path(&digest);
        std::fs::write(&path, data).unwrap();
        match cache.load(&digest) {
            Lookup::Discarded(why) => assert!(why.starts_with("stale"), "{why}"),
            _ => panic!("expected a discarded entry"),
        }
        assert!(!path.exists(), "deleted");
        assert!(matches!(cache.load(&digest), Lookup::Miss));
    }

    #[test]
    fn entry_checks_reject_truncation_foreign_and_flipped_entries() {
        let payload = b"payload bytes".to_vec();
        let digest = hex::encode(Sha256::digest(b"module"));
        let mut data = MAGIC.to_vec();
        data.extend(hex::decode(&digest).unwrap());
        data.extend(Sha256::digest(&payload));
        data.extend(&payload);
        assert_eq!(check_entry(&data, &digest), Ok(()));
        assert!(check_entry(&data[..10], &digest)
            .unwrap_err()
            .contains("truncated"));
        let other = hex::encode(Sha256::digest(b"other"));
        assert!(check_entry(&data, &other)
            .unwrap_err()
            .contains("another module"));
        let mut flipped = data.clone();
        *flipped.last_mut().unwrap() ^= 0xff;
        assert!(check_entry(&flipped, &digest)
            .unwrap_err()
            .contains("checksum"));
        let mut bad_magic = data;
        bad_magic[0] = b'X';
        assert!(check_entry(&bad_magic, &digest)
            .unwrap_err()
            .contains("format"));
    }
}
