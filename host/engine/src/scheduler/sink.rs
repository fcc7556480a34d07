//! What the scheduler hands to its driver (upstream: the binding cycle's
//! goroutine, the event recorder, the preemption executor): the driver
//! implements [`Sink`] and feeds the outcomes back through
//! [`super::Scheduler::binding_finished`].

use std::sync::Arc;
use std::time::Instant;

use crate::framework::{Assumption, Explanation, FitError, Nomination, SchedulingError};
use crate::model::Pod;

/// An assumed pod on its way to its binding cycle.
#[derive(Debug)]
pub struct Binding {
    pub assumption: Box<Assumption>,
    /// The profile that scheduled it (its `schedulerName`).
    pub profile: String,
    /// When its scheduling attempt started (for the attempt duration).
    pub started: Instant,
}

impl Binding {
    pub fn pod(&self) -> &Arc<Pod> {
        &self.assumption.pod
    }

    pub fn node(&self) -> &str {
        &self.assumption.placement.node
    }
}

/// Why an attempt bound nothing.
#[derive(Debug)]
pub enum FailureKind {
    /// Fits nowhere (the pod waits in the unschedulable pool).
    Unschedulable(FitError),
    /// Something other than fit went wrong; the pod backs off.
    Error(SchedulingError),
    /// Its Permit wait ended in a rejection (a timeout, a plugin).
    Rejected(String),
}

/// An attempt that bound nothing.
#[derive(Debug)]
pub struct Failure {
    pub pod: Arc<Pod>,
    pub profile: String,
    pub kind: FailureKind,
    /// When the attempt started.
    pub started: Instant,
}

impl Failure {
    /// The message of its event and condition (the FitError's text, or
    /// `error: <cause>`, or the rejection).
    pub fn message(&self) -> String {
        match &self.kind {
            FailureKind::Unschedulable(fit) => fit.message(),
            FailureKind::Error(e) => format!("error: {e}"),
            FailureKind::Rejected(r) => r.clone(),
        }
    }

    /// kube-scheduler's `result` label of the attempt, when the attempt
    /// counts as one (a Permit rejection was counted when it was
    /// scheduled).
    pub fn result(&self) -> Option<&'static str> {
        match self.kind {
            FailureKind::Unschedulable(_) => Some("unschedulable"),
            FailureKind::Error(_) => Some("error"),
            FailureKind::Rejected(_) => None,
        }
    }
}

/// Where the scheduler sends what it decided. Called with the cache
/// locked: a sink queues work (a channel, a list) and returns.
pub trait Sink {
    /// Run the binding cycle of an assumed pod: its actions (PreBind
    /// output, then Bind), then report through
    /// [`super::Scheduler::binding_finished`].
    fn bind(&mut self, binding: Binding);

    /// An attempt bound nothing.
    fn failed(&mut self, failure: Failure);

    /// The pod is reserved on `node` and held at Permit; `message` says
    /// why (for its event).
    fn waiting(&mut self, _pod: &Arc<Pod>, _node: &str, _message: &str, _profile: &str) {}

    /// PostFilter nominated `nomination.node` for `pod`: evict the
    /// victims (those not in `nomination.in_memory`) and record the
    /// nomination (`status.nominatedNodeName`). The scheduler has
    /// already recorded it in its cache. Returns true when the evictions
    /// go on after this returns (asynchronous preemption): the pod is
    /// then not attempted again until the driver calls
    /// [`super::Scheduler::preemption_finished`].
    fn preempt(&mut self, _pod: &Arc<Pod>, _nomination: &Nomination, _profile: &str) -> bool {
        false
    }

    /// Whether to record the attempt of `pod` for `--explain`.
    fn explains(&self, _pod: &Pod) -> bool {
        false
    }

    /// The recorded attempt of a pod [`Sink::explains`] named; `node`:
    /// where it was assumed (none when it bound nothing).
    fn explained(
        &mut self,
        _pod: &Arc<Pod>,
        _profile: &str,
        _node: Option<&str>,
        _explanation: Explanation,
    ) {
    }
}

/// A sink that keeps what it is sent, for drivers that act after the
/// turn (`bench`, tests).
#[derive(Debug, Default)]
pub struct Collected {
    pub binds: Vec<Binding>,
    pub failures: Vec<Failure>,
    pub preemptions: Vec<(Arc<Pod>, Nomination)>,
    /// Pods held at Permit: (pod, node).
    pub waiting: Vec<(Arc<Pod>, String)>,
}

impl Sink for Collected {
    fn bind(&mut self, binding: Binding) {
        self.binds.push(binding);
    }

    fn failed(&mut self, failure: Failure) {
        self.failures.push(failure);
    }

    fn waiting(&mut self, pod: &Arc<Pod>, node: &str, _message: &str, _profile: &str) {
        self.waiting.push((pod.clone(), node.to_string()));
    }

    fn preempt(&mut self, pod: &Arc<Pod>, nomination: &Nomination, _profile: &str) -> bool {
        self.preemptions.push((pod.clone(), nomination.clone()));
        false
    }
}
