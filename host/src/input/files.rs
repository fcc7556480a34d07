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
    /// closes it, within the limits).
    pub fn read(&mut self, path: &Path) -> Result<String, ReadError> {
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let (per_file, total) = (self.limits.file_bytes, self.limits.total_bytes);
        let left = total.saturating_sub(self.used);
        let check = |n: u64| match n {
            n if n > per_file => Err(ReadError::FileTooLarge(per_file)),
            n if n > left => Err(ReadError::TotalTooLarge(total)),
            _ => Ok(()),
        };
        if meta.is_file() {
            // Before reading: a huge (or sparse) file costs nothing.
            check(meta.len())?;
        }
        let mut buf = Vec::new();
        file.take(per_file.min(left).saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(io)?;
        check(buf.len() as u64)?;
        self.used += buf.len() as u64;
        String::from_utf8(buf).map_err(|e| ReadError::NotUtf8(e.utf8_error().valid_up_to()))
    }
}

/// Appends the manifest files `path` stands for to `out`. A path that is
/// not a directory is itself the file (a FIFO too, as `<(kubectl get
/// ...)` gives). A directory is searched recursively for `.yaml`, `.yml`
/// and `.json` regular files, in name order; a FIFO, socket or device
/// there is skipped with a warning (reading it could block forever), as
/// is a directory reached a second time (a symlink loop, or a second link
/// to it).
pub fn manifest_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, ReadError)> {
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
