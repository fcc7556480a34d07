//! kube-scheduler's `-v=2` lines: one per binding and one per failed
//! attempt, with its keys (`pod`, `node`, `err`; docs/running.md,
//! Logging). Unschedulable pods are retried for as long as they exist, so
//! these are not logged at the default level.

use super::events::Report;
use crate::logging;

/// Logs what `report` says at `-v=2` (nothing below).
pub fn log(report: &Report) {
    if !logging::v(2) {
        return;
    }
    match report {
        Report::Scheduled { pod, node, profile } => tracing::info!(
            v = 2,
            pod = %pod.key(),
            node = %node,
            profile = %profile,
            "Successfully bound pod to node"
        ),
        Report::Failed {
            pod,
            message,
            profile,
        } => tracing::info!(
            v = 2,
            pod = %pod.key(),
            profile = %profile,
            err = %message,
            "Unable to schedule pod; no fit; waiting"
        ),
        Report::Waiting { pod, message, .. } => tracing::info!(
            v = 2,
            pod = %pod.key(),
            reason = %message,
            "Pod is waiting at Permit"
        ),
        Report::Deleted { .. } | Report::Scheduler { .. } => {}
    }
}

/// `-v=4`: each plugin that rejected the pod in a failed attempt.
pub fn failure(f: &crate::scheduler::Failure) {
    if !logging::v(4) {
        return;
    }
    if let crate::scheduler::FailureKind::Unschedulable(fit) = &f.kind {
        for plugin in &fit.unschedulable_plugins {
            tracing::debug!(
                v = 4,
                pod = %f.pod.key(),
                plugin = %plugin,
                profile = %f.profile,
                "Plugin rejected the pod"
            );
        }
    }
}
