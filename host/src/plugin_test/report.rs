//! The result of a case file run and its diff-style rendering.

use std::fmt;

/// One difference between what a case expects and what the plugin did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    /// `filter node-1`, `score node-2`, `plan`, `cycle-start`, ...
    pub what: String,
    pub expected: String,
    pub got: String,
}

/// One case's outcome: passed when there is no difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    pub name: String,
    pub diffs: Vec<Diff>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.diffs.is_empty()
    }
}

/// Every case's outcome, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.passed()).count()
    }

    pub fn failed(&self) -> usize {
        self.cases.len() - self.passed()
    }

    pub fn success(&self) -> bool {
        self.failed() == 0
    }
}

/// ```text
/// ok    batch pod prefers spot
/// FAIL  latency-critical pod avoids spot
///       score spot-1
///         - 0
///         + 100
/// 1 passed, 1 failed
/// ```
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.cases {
            if c.passed() {
                writeln!(f, "ok    {}", c.name)?;
                continue;
            }
            writeln!(f, "FAIL  {}", c.name)?;
            for d in &c.diffs {
                writeln!(f, "      {}", d.what)?;
                writeln!(f, "        - {}", d.expected)?;
                writeln!(f, "        + {}", d.got)?;
            }
        }
        writeln!(f, "{} passed, {} failed", self.passed(), self.failed())
    }
}
