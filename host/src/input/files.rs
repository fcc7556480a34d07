//! Which files a path stands for, and reads bounded in bytes.

use std::collections::HashSet;
use std::fs::{self, File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::{bytes, Limits};

/// A file or directory that cannot be read (the caller names it).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReadError {
    #[error("{0}")]
    Io(String),
    #[error("larger than the limit of {} on one file", bytes(*.0))]
    FileTooLarge(u64),
    #[error("the input files together are larger than the limit of {}", bytes(*.0))]
    TotalTooLarge(u64),
    #[error("not UTF-8 text (invalid byte at offset {0})")]
    NotUtf8(usize),
}

fn io(e: std::io::Error) -> ReadError {
    ReadError::Io(e.to_string())
}

/// Reads files within [`Limits::file_bytes`] each and
/// [`Limits::total_bytes`] together.
#[derive(Debug, Clone)]
pub struct ReadBudget {
    limits: Limits,
    used: u64,
}

impl ReadBudget {
    pub fn new(limits: Limits) -> Self {
        Self { limits, used: 0 }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The text of `path`, which may be a FIFO (read until its writer
    /// closes it, within the limits), or `-`: stdin, within the same
    /// limits.
    pub fn read(&mut self, path: &Path) -> Result<String, ReadError> {
        if is_stdin(path) {
            return self.read_from(std::io::stdin().lock(), None);
        }
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        self.read_from(file, Some(meta))
    }

    /// The text `reader` gives, within the limits; `meta`, when it is a
    /// file, lets a regular file too large be refused before reading.
    fn read_from(
        &mut self,
        reader: impl Read,
        meta: Option<Metadata>,
    ) -> Result<String, ReadError> {
        let (per_file, total) = (self.limits.file_bytes, self.limits.total_bytes);
        let left = total.saturating_sub(self.used);
        let check = |n: u64| match n {
            n if n > per_file => Err(ReadError::FileTooLarge(per_file)),
            n if n > left => Err(ReadError::TotalTooLarge(total)),
            _ => Ok(()),
        };
        if let Some(meta) = meta.filter(Metadata::is_file) {
            // Before reading: a huge (or sparse) file costs nothing.
            check(meta.len())?;
        }
        let mut buf = Vec::new();
        reader
            .take(per_file.min(left).saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(io)?;
        check(buf.len() as u64)?;
        self.used += buf.len() as u64;
        String::from_utf8(buf).map_err(|e| ReadError::NotUtf8(e.utf8_error().valid_up_to()))
    }
}

/// The path that stands for stdin, as in `kubectl apply -f -`.
pub const STDIN: &str = "-";

/// Whether `path` is `-`, stdin.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// `path` as messages name it (`stdin` for `-`).
pub fn display(path: &Path) -> String {
    if is_stdin(path) {
        "stdin".into()
    } else {
        path.display().to_string()
    }
}

/// Appends the manifest files `path` stands for to `out` (`-`, stdin,
/// stands for itself). A path that is
/// not a directory is itself the file (a FIFO too, as `<(kubectl get
/// ...)` gives). A directory is searched recursively for `.yaml`, `.yml`
/// and `.json` regular files, in name order; a FIFO, socket or device
/// there is skipped with a warning (reading it could block forever), as
/// is a directory reached a second time (a symlink loop, or a second link
/// to it).
pub fn manifest_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, ReadError)> {
    if is_stdin(path) {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let meta = fs::metadata(path).map_err(|e| (path.to_path_buf(), io(e)))?;
    if !meta.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    Walk {
        seen: HashSet::from([id(&meta)]),
        out,
    }
    .dir(path)
}

/// A directory's identity, whatever path reached it.
fn id(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

fn is_manifest_name(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

struct Walk<'a> {
    /// Directories searched so far.
    seen: HashSet<(u64, u64)>,
    out: &'a mut Vec<PathBuf>,
}

impl Walk<'_> {
    fn dir(&mut self, path: &Path) -> Result<(), (PathBuf, ReadError)> {
        let mut entries: Vec<PathBuf> = fs::read_dir(path)
            .map_err(|e| (path.to_path_buf(), io(e)))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            let Ok(meta) = fs::metadata(&p) else {
                // A dangling symlink: reading it reports why.
                if is_manifest_name(&p) {
                    self.out.push(p);
                }
                continue;
            };
            if meta.is_dir() {
                if self.seen.insert(id(&meta)) {
                    self.dir(&p)?;
                } else {
                    tracing::warn!(
                        "{}: skipped: a directory already searched (a symlink loop, or a second link to it)",
                        p.display()
                    );
                }
            } else if is_manifest_name(&p) {
                if meta.is_file() {
                    self.out.push(p);
                } else {
                    tracing::warn!(
                        "{}: skipped: {}, not a regular file",
                        p.display(),
                        kind(&meta)
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// stdin (`-`) is read as a FIFO is: within the same caps, each file's
    /// and all files' together.
    #[test]
    fn a_stream_is_read_within_the_limits() {
        let limits = Limits {
            file_bytes: 10,
            total_bytes: 15,
            ..Limits::DEFAULT
        };
        let mut budget = ReadBudget::new(limits);
        let read = |b: &mut ReadBudget, text: &str| b.read_from(text.as_bytes(), None);
        assert_eq!(read(&mut budget, "kind: Pod").unwrap(), "kind: Pod");
        assert_eq!(
            read(&mut budget, "kind: Node"),
            Err(ReadError::TotalTooLarge(15))
        );
        let mut budget = ReadBudget::new(limits);
        assert_eq!(
            read(&mut budget, "kind: Node\n"),
            Err(ReadError::FileTooLarge(10))
        );
        assert_eq!(
            read(&mut budget, "k\u{0}\u{ff}"),
            Ok("k\u{0}\u{ff}".to_string())
        );
        assert!(is_stdin(Path::new("-")) && !is_stdin(Path::new("./-")));
        assert_eq!(display(Path::new("-")), "stdin");
        let mut files = Vec::new();
        manifest_files(Path::new("-"), &mut files).unwrap();
        assert_eq!(files, [PathBuf::from("-")]);
    }
}
