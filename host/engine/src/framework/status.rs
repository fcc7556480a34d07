//! What plugins answer besides their results: a node's rejection, a
//! plugin's own failure, Skip, failure counters, and the score scale.

use std::collections::BTreeMap;

/// Why a node does not fit (one plugin's Filter verdict). A node can fail
/// for several reasons at once (`Insufficient cpu`, `Insufficient memory`);
/// each is counted in the FitError message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reasons: Vec<String>,
    /// UnschedulableAndUnresolvable: no preemption on this node can help.
    pub unresolvable: bool,
    /// Not a verdict but a failure (upstream's Error status from Filter):
    /// the whole attempt fails with this reason and the pod backs off.
    pub error: bool,
}

impl Rejection {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reasons: vec![reason.into()],
            unresolvable: false,
            error: false,
        }
    }

    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self {
            reasons: vec![reason.into()],
            unresolvable: true,
            error: false,
        }
    }

    /// The plugin failed on this node (not a verdict): the attempt fails.
    pub fn error(reason: impl Into<String>) -> Self {
        Self {
            reasons: vec![reason.into()],
            unresolvable: true,
            error: true,
        }
    }
}

/// A plugin could not do its job (not a verdict about the node).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(pub String);

/// Why an attempt failed for a reason other than fit (upstream's Error
/// status): the pod backs off and is tried again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulingError {
    /// A plugin failed at Score or NormalizeScore.
    #[error("plugin {plugin} failed: {cause}")]
    Score { plugin: String, cause: PluginError },
    /// A plugin's normalized score left 0..=100.
    #[error("plugin {plugin} failed: score {score} is outside 0..={MAX_NODE_SCORE}")]
    ScoreOutOfRange { plugin: String, score: i64 },
    /// A plugin failed at Reserve, Permit, PreBind or Bind.
    #[error("plugin {plugin} {point}: {cause}")]
    Binding {
        plugin: String,
        point: &'static str,
        cause: PluginError,
    },
    /// A Filter plugin failed (upstream's wording).
    #[error("running {plugin:?} filter plugin: {cause}")]
    Filter { plugin: String, cause: String },
    /// The chosen node left the cluster during the attempt.
    #[error("node {0} is gone")]
    NodeGone(String),
}

/// Whether an extension point matters for this pod (upstream's Skip
/// status from PreFilter, PreScore and Score).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Run,
    /// A skipped Filter passes every node; a skipped Score counts for
    /// nothing.
    Skip,
}

/// What a plugin that can fail by itself (a wasm component) reports about
/// its failures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginHealth {
    /// Failures by kind (`timeout`, `memory`, `trap`, ...).
    pub failures: BTreeMap<&'static str, u64>,
    /// Pods for which the plugin was skipped (`failurePolicy: Ignore`).
    pub skips: u64,
    /// Instances started, the first included (each failure replaces one).
    pub instances: u64,
    /// The most recent failure, with its cause.
    pub last_failure: Option<String>,
    /// The most linear memory one instance has had, bytes (0 for a plugin
    /// without instances).
    pub memory_bytes: u64,
}

/// Upstream's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// Upstream's `helper.DefaultNormalizeScore`: scales scores so the highest
/// is `MAX_NODE_SCORE` (optionally reversed).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let mut v = MAX_NODE_SCORE * *s / max;
        if reverse {
            v = MAX_NODE_SCORE - v;
        }
        *s = v;
    }
}
