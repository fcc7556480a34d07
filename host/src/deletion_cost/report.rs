//! What a controller pass did, per pod: printed by `wasmsched
//! deletion-cost` and returned by `reconcile_once`.

use std::collections::BTreeMap;

use comfy_table::{Cell, Table};
use serde::Serialize;

use super::decision::SkipReason;

/// The outcome for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Outcome {
    /// The annotation was patched.
    Written { from: Option<i32>, to: i32 },
    /// Dry run: it would have been patched.
    WouldWrite { from: Option<i32>, to: i32 },
    Skipped {
        reason: SkipReason,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The write failed (`cause` as in the errors metric).
    Failed { cause: String, message: String },
}

/// One managed pod.
#[derive(Debug, Clone, Serialize)]
pub struct PodRow {
    pub namespace: String,
    pub pod: String,
    pub replica_set: String,
    /// The annotation's value before the pass.
    pub current: Option<String>,
    /// The policy's cost (`None`: no opinion, or not computed).
    pub cost: Option<i32>,
    pub outcome: Outcome,
    /// The metric values the policy got.
    pub metrics: BTreeMap<String, f64>,
    /// Metric faults, `metric: cause`.
    pub faults: Vec<String>,
}

/// One pass.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub dry_run: bool,
    pub pods: Vec<PodRow>,
    /// Patches rejected with a conflict and retried after a fresh read.
    pub conflicts_retried: u32,
}

impl Report {
    pub fn written(&self) -> usize {
        self.pods
            .iter()
            .filter(|p| matches!(p.outcome, Outcome::Written { .. }))
            .count()
    }

    pub fn row(&self, namespace: &str, pod: &str) -> Option<&PodRow> {
        self.pods
            .iter()
            .find(|p| p.namespace == namespace && p.pod == pod)
    }

    /// Counts by outcome, e.g. `2 written, 3 skipped (2 unchanged, 1 user-set)`.
    pub fn summary(&self) -> String {
        let mut skipped: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut written, mut would, mut failed) = (0, 0, 0);
        for p in &self.pods {
            match &p.outcome {
                Outcome::Written { .. } => written += 1,
                Outcome::WouldWrite { .. } => would += 1,
                Outcome::Skipped { reason, .. } => {
                    *skipped.entry(reason.as_str()).or_default() += 1
                }
                Outcome::Failed { .. } => failed += 1,
            }
        }
        let mut parts = vec![if self.dry_run {
            format!("{would} would be written (dry run)")
        } else {
            format!("{written} written")
        }];
        let total: usize = skipped.values().sum();
        if total > 0 {
            let detail: Vec<String> = skipped.iter().map(|(r, n)| format!("{n} {r}")).collect();
            parts.push(format!("{total} skipped ({})", detail.join(", ")));
        }
        if failed > 0 {
            parts.push(format!("{failed} failed"));
        }
        format!("{} pod(s): {}", self.pods.len(), parts.join(", "))
    }

    /// A table, one row per pod, then the summary line.
    pub fn table(&self) -> String {
        let mut t = Table::new();
        t.set_header(vec![
            "POD",
            "REPLICASET",
            "CURRENT",
            "COST",
            "ACTION",
            "METRICS",
        ]);
        for p in &self.pods {
            let action = match &p.outcome {
                Outcome::Written { from, to } => format!("set {} -> {to}", show(from)),
                Outcome::WouldWrite { from, to } => format!("would set {} -> {to}", show(from)),
                Outcome::Skipped { reason, detail } => match detail {
                    Some(d) => format!("skip: {} ({d})", reason.as_str()),
                    None => format!("skip: {}", reason.as_str()),
                },
                Outcome::Failed { cause, message } => format!("error: {cause}: {message}"),
            };
            let mut metrics: Vec<String> =
                p.metrics.iter().map(|(k, v)| format!("{k}={v}")).collect();
            metrics.extend(p.faults.iter().map(|f| format!("! {f}")));
            t.add_row(vec![
                Cell::new(format!("{}/{}", p.namespace, p.pod)),
                Cell::new(&p.replica_set),
                Cell::new(p.current.as_deref().unwrap_or("-")),
                Cell::new(p.cost.map_or("-".to_string(), |c| c.to_string())),
                Cell::new(action),
                Cell::new(metrics.join(" ")),
            ]);
        }
        format!("{}\n{}\n", crate::output::plain(t), self.summary())
    }
}

fn show(v: &Option<i32>) -> String {
    v.map_or("(none)".to_string(), |v| v.to_string())
}
