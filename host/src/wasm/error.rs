//! Why a plugin failed, classified so that metrics and messages can say
//! "timeout" rather than print a wasm backtrace.

use std::fmt;

/// The class of a plugin failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The call ran past its deadline.
    Timeout,
    /// The instance tried to grow its memory past the cap.
    Memory,
    /// The guest trapped (panic, abort, unreachable, out-of-bounds).
    Trap,
    /// The guest returned something the contract forbids (score out of
    /// range, wrong number of results).
    BadResult,
    /// The plugin reported an error itself (`Err` from score).
    Plugin,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Trap => "trap",
            Self::BadResult => "bad-result",
            Self::Plugin => "plugin-error",
        }
    }
}

/// A failed plugin call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFailure {
    pub kind: FailureKind,
    pub message: String,
}

impl fmt::Display for PluginFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            FailureKind::Timeout => write!(f, "timeout: {}", self.message),
            FailureKind::Memory => write!(f, "memory limit exceeded: {}", self.message),
            FailureKind::Trap => write!(f, "trap: {}", self.message),
            FailureKind::BadResult => write!(f, "bad result: {}", self.message),
            FailureKind::Plugin => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for PluginFailure {}

impl PluginFailure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Classifies a wasmtime error from a call. `memory_hit` says whether
    /// the limiter refused a memory growth during the call.
    pub fn from_wasmtime(
        err: &wasmtime::Error,
        memory_hit: bool,
        deadline: std::time::Duration,
    ) -> Self {
        if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
            if *trap == wasmtime::Trap::Interrupt {
                return Self::new(
                    FailureKind::Timeout,
                    format!("call exceeded its {deadline:?} deadline"),
                );
            }
            if memory_hit {
                return Self::new(
                    FailureKind::Memory,
                    format!("guest trapped after its memory cap was hit ({trap})"),
                );
            }
            return Self::new(FailureKind::Trap, trap.to_string());
        }
        if memory_hit {
            return Self::new(FailureKind::Memory, cause(err));
        }
        // Not a trap: a host function the guest called returned an error
        // (a WASI call refused, a resource limit): name it.
        Self::new(
            FailureKind::Trap,
            format!("a host call failed: {}", cause(err)),
        )
    }
}

/// What went wrong, without wasmtime's "error while executing at wasm
/// backtrace" wrapper: the first message of the chain that is not it.
fn cause(err: &wasmtime::Error) -> String {
    err.chain()
        .map(|e| e.to_string())
        .find(|m| !m.starts_with("error while executing at wasm backtrace"))
        .and_then(|m| m.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown error".into())
}
