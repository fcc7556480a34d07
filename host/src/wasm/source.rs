//! Reading a plugin's component from disk: follows symlinks (a Kubernetes
//! ConfigMap volume's files are symlinks into a timestamped directory),
//! and decompresses `.wasm.gz` / `.wasm.zst` files (ConfigMaps are limited
//! to 1 MiB).
//!
//! A plugin path is configuration, and under hot reload whatever the path
//! points to at the moment is read: only a regular file is read (see
//! [`crate::input::regular`]), and both the file and its decompressed content are
//! capped at [`MAX_MODULE_SIZE`].

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::input::regular::{self as files, limit_text, FileError};

/// The largest component accepted, as stored and after decompression; a
/// guard against huge files and decompression bombs (the largest real
/// components, Python and JavaScript, are 12-18 MB).
pub const MAX_MODULE_SIZE: u64 = 256 << 20;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// How a component file was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }
}

/// A component read from a file, decompressed.
#[derive(Debug, Clone)]
pub struct ModuleFile {
    /// The component bytes (decompressed).
    pub bytes: Vec<u8>,
    pub compression: Compression,
    /// Size of the file as stored (compressed size when compressed).
    pub file_size: u64,
    /// Where the path's symlinks lead (the real file read).
    pub resolved: PathBuf,
}

/// Why a component file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The file (or the target of its symlink) does not exist.
    #[error("{path}: {cause}")]
    Missing { path: String, cause: String },
    #[error("{path}: {cause}")]
    Io { path: String, cause: String },
    /// A directory, FIFO, device or socket (after following symlinks).
    #[error("{path}: is {kind}, not a regular file; a plugin must be a regular file (or a symlink to one)")]
    NotRegular { path: String, kind: &'static str },
    /// The file as stored is over the limit.
    #[error("{path}: file is larger than the {}", limit_text(MAX_MODULE_SIZE))]
    FileTooLarge { path: String },
    #[error("{path}: {format} decompression failed: {cause}")]
    Decompress {
        path: String,
        format: &'static str,
        cause: String,
    },
    /// The decompressed content is over the limit.
    #[error(
        "{path}: {format} content decompresses to more than the {}",
        limit_text(MAX_MODULE_SIZE)
    )]
    TooLarge { path: String, format: &'static str },
}

impl SourceError {
    pub fn is_missing(&self) -> bool {
        matches!(self, Self::Missing { .. })
    }
}

/// Which compression a file uses: by magic bytes first (a misnamed file
/// still works), then by extension for a file too short to tell.
pub fn detect(path: &Path, head: &[u8]) -> Compression {
    if head.starts_with(GZIP_MAGIC) {
        return Compression::Gzip;
    }
    if head.starts_with(ZSTD_MAGIC) {
        return Compression::Zstd;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".gz") {
        Compression::Gzip
    } else if name.ends_with(".zst") || name.ends_with(".zstd") {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Reads and decompresses a component file.
pub fn read(path: &Path) -> Result<ModuleFile, SourceError> {
    let shown = path.display().to_string();
    let raw = files::read_regular(path, MAX_MODULE_SIZE).map_err(|e| {
        let path = shown.clone();
        match e {
            FileError::Missing(cause) => SourceError::Missing { path, cause },
            FileError::Io(cause) => SourceError::Io { path, cause },
            FileError::NotRegular(kind) => SourceError::NotRegular { path, kind },
            FileError::TooLarge { .. } => SourceError::FileTooLarge { path },
        }
    })?;
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let file_size = raw.len() as u64;
    let compression = detect(path, &raw);
    let bytes = decompress(&raw, compression).map_err(|cause| match cause {
        DecompressError::TooLarge => SourceError::TooLarge {
            path: shown.clone(),
            format: compression.as_str(),
        },
        DecompressError::Invalid(cause) => SourceError::Decompress {
            path: shown.clone(),
            format: compression.as_str(),
            cause,
        },
    })?;
    Ok(ModuleFile {
        bytes,
        compression,
        file_size,
        resolved,
    })
}

#[derive(Debug)]
enum DecompressError {
    TooLarge,
    Invalid(String),
}

fn decompress(raw: &[u8], compression: Compression) -> Result<Vec<u8>, DecompressError> {
    let limit = MAX_MODULE_SIZE + 1;
    let mut out = Vec::new();
    match compression {
        Compression::None => {
            if raw.len() as u64 > MAX_MODULE_SIZE {
                return Err(DecompressError::TooLarge);
            }
            return Ok(raw.to_vec());
        }
        Compression::Gzip => {
            // Concatenated gzip members decode as one stream, like gunzip.
            flate2::read::MultiGzDecoder::new(raw)
                .take(limit)
                .read_to_end(&mut out)
                .map_err(|e| DecompressError::Invalid(e.to_string()))?;
        }
        Compression::Zstd => {
            // A file may hold several frames (zstd concatenates them).
            let mut src = raw;
            while !src.is_empty() {
                let remaining = limit - out.len() as u64;
                let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut src)
                    .map_err(|e| DecompressError::Invalid(e.to_string()))?;
                (&mut decoder)
                    .take(remaining)
                    .read_to_end(&mut out)
                    .map_err(|e| DecompressError::Invalid(e.to_string()))?;
                if out.len() as u64 > MAX_MODULE_SIZE {
                    break;
                }
                let frame = &decoder.decoder;
                if !frame.is_finished() {
                    return Err(DecompressError::Invalid("truncated frame".into()));
                }
                if let (Some(stored), Some(computed)) = (
                    frame.get_checksum_from_data(),
                    frame.get_calculated_checksum(),
                ) {
                    if stored != computed {
                        return Err(DecompressError::Invalid("content checksum mismatch".into()));
                    }
                }
            }
        }
    }
    if out.len() as u64 > MAX_MODULE_SIZE {
        return Err(DecompressError::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const WASM: &[u8] = b"\0asm\x0d\0\x01\0rest-of-component";

    #[test]
    fn plain_file_is_read_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm");
        std::fs::write(&p, WASM).unwrap();
        let m = read(&p).unwrap();
        assert_eq!(m.bytes, WASM);
        assert_eq!(m.compression, Compression::None);
        assert_eq!(m.file_size, WASM.len() as u64);
    }

    #[test]
    fn gzip_and_zstd_are_decompressed_by_magic() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(WASM).unwrap();
        let gz = gz.finish().unwrap();
        // Named without the extension: the magic bytes decide.
        let p = dir.path().join("p.wasm");
        std::fs::write(&p, &gz).unwrap();
        let m = read(&p).unwrap();
        assert_eq!(
            (m.bytes.as_slice(), m.compression),
            (WASM, Compression::Gzip)
        );

        let zst =
            ruzstd::encoding::compress_to_vec(WASM, ruzstd::encoding::CompressionLevel::Fastest);
        let p = dir.path().join("p.wasm.zst");
        // Two frames in a row decode to the concatenation.
        std::fs::write(&p, [zst.clone(), zst].concat()).unwrap();
        let m = read(&p).unwrap();
        assert_eq!(m.bytes, [WASM, WASM].concat());
        assert_eq!(m.compression, Compression::Zstd);
    }

    #[test]
    fn corrupt_compressed_file_names_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm.gz");
        std::fs::write(&p, [0x1f, 0x8b, 8, 0, 1, 2, 3]).unwrap();
        let e = read(&p).unwrap_err();
        assert!(
            matches!(e, SourceError::Decompress { format: "gzip", .. }),
            "{e}"
        );
    }

    #[test]
    fn special_and_oversized_files_are_refused_with_the_path() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: is a character device, not a regular file; a plugin must be a regular file (or a symlink to one)"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.wasm");
        std::fs::File::create(&p)
            .unwrap()
            .set_len(MAX_MODULE_SIZE + 1)
            .unwrap();
        assert_eq!(
            read(&p).unwrap_err().to_string(),
            format!(
                "{}: file is larger than the 256 MiB limit (268435456 bytes)",
                p.display()
            )
        );
    }

    #[test]
    fn missing_file_is_distinguished() {
        let e = read(Path::new("/nonexistent/x.wasm")).unwrap_err();
        assert!(e.is_missing(), "{e}");
    }
}
