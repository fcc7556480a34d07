//! One pod group's scheduling state: its PodGroup, its members, which of
//! them are reserved, the current attempt ("round": its topology plan,
//! whether minResources were checked, whether it was allowed) and its
//! backoff after a failed attempt.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{Pod, PodGroup};

use super::topology::Plan;

/// A member pod as last seen.
#[derive(Debug, Clone)]
pub struct Member {
    pub pod: Arc<Pod>,
    /// Its node, once bound (from the watch, or PostBind).
    pub node: Option<String>,
}

impl Member {
    /// Succeeded or Failed: it no longer counts towards `minMember`.
    pub fn terminal(&self) -> bool {
        matches!(self.pod.phase.as_str(), "Succeeded" | "Failed")
    }
}

/// A member reserved (assumed) by this scheduler, not yet seen bound.
#[derive(Debug, Clone)]
pub struct Reservation {
    pub node: String,
    pub at_ms: u64,
    /// How long it may wait at Permit.
    pub timeout_ms: u64,
}

/// What one attempt of the whole group holds; reset when the attempt
/// fails (a member unschedulable, a timeout) or the PodGroup changes.
#[derive(Debug, Default)]
pub struct Round {
    /// The topology plan (`None` with `planned`: no restriction).
    pub plan: Option<Arc<Plan>>,
    pub planned: bool,
    pub resources_checked: bool,
    /// `minMember` were reserved and allowed: a later Unreserve (a failed
    /// binding) does not reject the group.
    pub allowed: bool,
}

/// A failed group waits before its members are tried again.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub until_ms: u64,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Group {
    /// `None`: no PodGroup object seen; `Err`: it cannot be used.
    pub spec: Option<Result<PodGroup, String>>,
    pub members: BTreeMap<String, Member>,
    pub reserved: BTreeMap<String, Reservation>,
    pub round: Round,
    pub backoff: Option<Backoff>,
    /// A member was reserved at some point (scheduling started).
    pub started: bool,
}

impl Group {
    /// `spec.minMember`, or "never" while the PodGroup is unknown.
    pub fn min_member(&self) -> usize {
        match &self.spec {
            Some(Ok(g)) => g.min_member as usize,
            _ => usize::MAX,
        }
    }

    /// Members that count towards `minMember` (not Succeeded or Failed).
    pub fn live_members(&self) -> usize {
        self.members.values().filter(|m| !m.terminal()).count()
    }

    /// Members neither bound nor reserved.
    pub fn pending_members(&self) -> impl Iterator<Item = &Member> {
        self.members
            .iter()
            .filter(|(uid, m)| {
                !m.terminal() && m.node.is_none() && !self.reserved.contains_key(*uid)
            })
            .map(|(_, m)| m)
    }

    /// Members bound or reserved (upstream: assigned in the snapshot).
    pub fn assigned(&self) -> usize {
        let bound_or_reserved = self
            .members
            .iter()
            .filter(|(uid, m)| {
                !m.terminal() && (m.node.is_some() || self.reserved.contains_key(*uid))
            })
            .count();
        let unseen = self
            .reserved
            .keys()
            .filter(|uid| !self.members.contains_key(*uid))
            .count();
        bound_or_reserved + unseen
    }

    /// Nodes of the bound and reserved members.
    pub fn assigned_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.terminal())
            .filter_map(|m| m.node.clone())
            .chain(self.reserved.values().map(|r| r.node.clone()))
            .collect();
        nodes.sort();
        nodes
    }

    /// A group that was allowed and then lost members (deleted, finished)
    /// is a new attempt: later reservations wait for `minMember` again.
    pub fn forget_allowed(&mut self) {
        if self.round.allowed && self.assigned() < self.min_member() {
            self.reset_round();
        }
    }

    pub fn reset_round(&mut self) {
        self.round = Round::default();
    }

    /// Fails the current attempt: the group backs off until `until_ms`.
    pub fn back_off(&mut self, until_ms: u64, reason: String) {
        self.reset_round();
        self.backoff = Some(Backoff { until_ms, reason });
    }

    /// The backoff still in force at `now_ms`.
    pub fn backing_off(&self, now_ms: u64) -> Option<&Backoff> {
        self.backoff.as_ref().filter(|b| b.until_ms > now_ms)
    }

    /// Ends a backoff that is over; returns whether one ended.
    pub fn end_backoff(&mut self, now_ms: u64) -> bool {
        match &self.backoff {
            Some(b) if b.until_ms <= now_ms => {
                self.backoff = None;
                true
            }
            _ => false,
        }
    }

    /// Whether the group's first waiting reservation is past its timeout.
    pub fn timed_out(&self, now_ms: u64) -> bool {
        self.reserved
            .values()
            .any(|r| now_ms >= r.at_ms.saturating_add(r.timeout_ms))
    }
}
