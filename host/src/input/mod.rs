//! Reading what a user points the scheduler at (manifests, the
//! configuration, plugin case files) as input that may be hostile: every
//! read is bounded in bytes, directory walks skip special files and
//! notice loops, and YAML is parsed with caps on nesting and on alias
//! expansion. Each cap is an error naming the file and the limit;
//! docs/running.md lists them.

pub mod bounded;
pub mod files;
pub mod regular;
pub mod yaml;

pub use files::{manifest_files, ReadBudget, ReadError};
pub use regular::{read_regular, FileError};

/// The caps on one load (a command's manifests, or one configuration or
/// case file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one file.
    pub file_bytes: u64,
    /// Bytes of every file one command reads as manifests, together.
    pub total_bytes: u64,
    /// Nesting of YAML/JSON collections.
    pub depth: usize,
    /// Alias uses (`*name`) in one file.
    pub aliases: usize,
    /// YAML nodes that aliases replay in one file: what an alias "bomb"
    /// multiplies. (What they replay is also counted in bytes, within
    /// `file_bytes`: see [`bounded`].)
    pub alias_expansion: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        file_bytes: 128 << 20,
        total_bytes: 512 << 20,
        depth: 128,
        aliases: 10_000,
        alias_expansion: 1_000_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A byte count as people read it (`128 MiB`, `4 KiB`, `100 bytes`).
pub fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}
