//! `wasmsched plugin test`: a unit-test runner for plugins in any
//! language. A YAML case file gives fixture nodes (and pods already placed
//! on them), then cases: a pod to schedule with the Filter verdicts,
//! scores and cycle plan the plugin should give, or a pod whose
//! deletion cost it should compute. [`run`] calls the component exactly
//! as the scheduler does (a fresh instance per case: `init`, the cluster
//! as deltas, `cycle-start`, `filter`, `score` on the nodes that passed,
//! `normalize-score`) and reports every difference.
//!
//! The file format is documented in docs/writing-plugins.md.

mod cases;
mod report;
mod run;

pub use cases::{Case, CaseError, CaseFile, Expect, Input, Verdict};
pub use report::{CaseResult, Diff, Report};
pub use run::run;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};

use crate::input::ReadBudget;
use crate::wasm::{self, Limits};

/// `wasmsched plugin test PLUGIN --cases FILE [--args JSON] [--cache-dir
/// DIR]`: prints the report; the exit code says whether every case
/// passed. A file that cannot be used is an error naming it.
pub fn run_files(
    plugin: &Path,
    cases: &Path,
    args: Option<&str>,
    cache_dir: Option<&Path>,
) -> Result<ExitCode> {
    let text = ReadBudget::new(crate::input::Limits::DEFAULT)
        .read(cases)
        .with_context(|| format!("case file {}", cases.display()))?;
    let file = CaseFile::parse(&text).map_err(|e| anyhow!("{}: {e}", cases.display()))?;
    let cache = cache_dir
        .map(|d| wasm::DiskCache::new(d).with_context(|| format!("cache dir {}", d.display())))
        .transpose()?;
    let loader = wasm::Loader::new(cache);
    let source = wasm::Source::File(plugin.to_path_buf());
    let module = loader.load("test", &source)?;
    let report = run(&module, &file, args, Limits::default())
        .map_err(|e| anyhow!("{}: failed to start: {e}", plugin.display()))?;
    print!("{report}");
    Ok(if report.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
