//! A group's status as the scheduler reports it (`podgroups/status`):
//! the phase and the counts of scheduled, running, succeeded and failed
//! members, with upstream's phases.

use crate::model::pod_group::{phase, PodGroupStatus};

use super::gang::Group;

impl Group {
    pub fn status(&self) -> PodGroupStatus {
        let min = match &self.spec {
            Some(Ok(g)) => g.min_member.max(1),
            _ => 1,
        };
        let count = |p: &str| self.members.values().filter(|m| m.pod.phase == p).count() as u32;
        let scheduled = self.members.values().filter(|m| m.node.is_some()).count() as u32;
        let (running, succeeded, failed) = (count("Running"), count("Succeeded"), count("Failed"));
        let phase = if succeeded >= min {
            phase::FINISHED
        } else if failed > 0 && failed + running + succeeded >= min {
            phase::FAILED
        } else if running + succeeded >= min {
            phase::RUNNING
        } else if scheduled >= min {
            phase::SCHEDULED
        } else if !self.reserved.is_empty() {
            phase::SCHEDULING
        } else if self.live_members() >= min as usize {
            phase::PRE_SCHEDULING
        } else {
            phase::PENDING
        };
        PodGroupStatus {
            phase: phase.to_string(),
            scheduled,
            running,
            succeeded,
            failed,
            schedule_start_time: None,
        }
    }
}
