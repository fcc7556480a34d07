//! kube-scheduler's `-v=2` lines: one per binding and one per failed
//! attempt, with its keys (`pod`, `node`, `err`; docs/running.md,
//! Logging), written by [`crate::logging`] for `run` and `simulate` alike.
//! Unschedulable pods are retried for as long as they exist, so these are
//! not logged at the default level.

use super::events::Report;
use crate::logging;

/// Logs what `report` says at `-v=2` (nothing below).
pub fn log(report: &Report) {
    if !logging::v(2) {
        return;
    }
    match report {
        Report::Scheduled { pod, node, profile } => logging::bound(&pod.key(), node, profile),
        Report::Failed {
            pod,
            message,
            profile,
        } => logging::unschedulable(&pod.key(), profile, message),
        Report::Waiting { pod, message, .. } => logging::waiting(&pod.key(), message),
        Report::Deleted { .. } | Report::Scheduler { .. } | Report::Normal { .. } => {}
    }
}

/// `-v=4`: each plugin that rejected the pod in a failed attempt.
pub fn failure(f: &crate::scheduler::Failure) {
    logging::rejected(f);
}
