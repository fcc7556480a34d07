//! Reading a file that configuration names (a plugin component, a TLS
//! certificate), with bounds: only a regular
//! file (after following symlinks) is opened, and at most a given number
//! of bytes is read. A FIFO would block the reader until a writer comes,
//! `/dev/zero` would grow memory without end, and under hot reload a path
//! may lead anywhere at the moment it is read.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// Why a file could not be read (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The file (or the target of its symlink) does not exist.
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Io(String),
    /// A directory, FIFO, device or socket.
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("file is larger than the {}", limit_text(*limit))]
    TooLarge { limit: u64 },
}

/// A size limit as messages show it: "256 MiB limit (268435456 bytes)".
pub fn limit_text(limit: u64) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB limit ({limit} bytes)", limit >> 20)
    } else {
        format!("{limit}-byte limit")
    }
}

impl FileError {
    fn io(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => Self::Missing(e.to_string()),
            _ => Self::Io(e.to_string()),
        }
    }
}

/// Reads at most `limit` bytes of the regular file `path` leads to.
///
/// The type is checked before opening (opening a device can have effects)
/// and again on the open file (the path may have been swapped meanwhile);
/// the open does not block, so a FIFO swapped in between is refused
/// instead of waiting for a writer. The read stops past `limit` whatever
/// the size said (a file may grow while read).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let meta = std::fs::metadata(path).map_err(FileError::io)?;
    check(&meta, limit)?;
    let file = open_nonblocking(path).map_err(FileError::io)?;
    let meta = file.metadata().map_err(FileError::io)?;
    check(&meta, limit)?;
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut out)
        .map_err(FileError::io)?;
    if out.len() as u64 > limit {
        return Err(FileError::TooLarge { limit });
    }
    Ok(out)
}

fn check(meta: &Metadata, limit: u64) -> Result<(), FileError> {
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind(&meta.file_type())));
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge { limit });
    }
    Ok(())
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// What a file that is not regular is, for the message.
fn kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        // Opening a FIFO for reading would block until a writer comes.
        for (path, kind) in [
            (Path::new("/dev/zero"), "a character device"),
            (link.as_path(), "a character device"),
            (fifo.as_path(), "a FIFO"),
            (dir.path(), "a directory"),
        ] {
            assert_eq!(
                read_regular(path, 1 << 20),
                Err(FileError::NotRegular(kind)),
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn a_file_over_the_limit_is_refused_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        // Sparse: no disk space is used, and nothing is read.
        let f = File::create(&p).unwrap();
        f.set_len((64 << 20) + 1).unwrap();
        let e = read_regular(&p, 64 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "file is larger than the 64 MiB limit (67108864 bytes)"
        );
        f.set_len(64 << 20).unwrap();
        assert_eq!(read_regular(&p, 64 << 20).unwrap().len(), 64 << 20);
        assert_eq!(limit_text(1000), "1000-byte limit");
    }

    #[test]
    fn missing_is_distinguished() {
        assert!(matches!(
            read_regular(Path::new("/nonexistent/x"), 10),
            Err(FileError::Missing(_))
        ));
    }
}
