//! The extension points, in kube-scheduler's vocabulary. The framework
//! knows plugins only through these traits: a native core plugin and a
//! wasm component (through its adapter in the host crate) look the same
//! here.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::model::Pod;

use super::advisor::PreemptionAdvisor;
use super::context::CycleContext;
use super::cycle_state::CycleState;
use super::explain::PreemptionExplanation;
use super::fit_error::FitError;
use super::node_info::{NodeInfo, Snapshot};
use super::objects::{ApiKind, ObjectEvent, PluginReport, StatusWrite};
use super::plugin::Plugin;
use super::status::{Decision, PluginError, Rejection};

/// PreFilter, with upstream's PreFilterExtensions.
pub trait PreFilterPlugin: Plugin {
    /// Computes what Filter needs once per cycle. A rejection rejects every
    /// node with its reason; `Skip` makes this plugin's Filter pass every
    /// node in this cycle.
    fn pre_filter(&self, ctx: &CycleContext, state: &mut CycleState)
        -> Result<Decision, Rejection>;

    /// How this plugin's PreFilter rejection reads in the FitError:
    /// `false` (the default), as one reason for the pod (`0/3 nodes are
    /// available: <reason>.`); `true`, as upstream's PreFilter status,
    /// which every node gets (`0/3 nodes are available: 3 <reason>.`).
    fn rejection_counts_nodes(&self) -> bool {
        false
    }

    /// Whether the plugin has PreFilterExtensions (AddPod/RemovePod) whose
    /// state preemption reads: when a PreFilter rejection comes before
    /// such a plugin wrote its state, upstream's DefaultPreemption fails on
    /// the missing state (see DefaultPreemption's
    /// `after_pre_filter_rejection`).
    fn has_extensions(&self) -> bool {
        false
    }

    /// Upstream's PreFilterResult, asked after a PreFilter that returned
    /// `Run`: the names of the only nodes worth filtering, or `None` (the
    /// default) for every node. The results of several plugins intersect;
    /// the nodes left out fail, unresolvable, with `node(s) didn't satisfy
    /// plugin(s) [<plugins>]`.
    fn pre_filter_nodes(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
    ) -> Option<BTreeSet<String>> {
        None
    }

    /// AddPod: `pod` is placed on `node` in a what-if evaluation
    /// (preemption's reprieve, nominated pods); update `state` to match.
    fn add_pod(
        &self,
        _ctx: &CycleContext,
        _state: &mut CycleState,
        _pod: &Arc<Pod>,
        _node: &NodeInfo,
    ) -> Result<(), PluginError> {
        Ok(())
    }

    /// RemovePod: `pod` leaves `node` in a what-if evaluation (preemption's
    /// victims).
    fn remove_pod(
        &self,
        _ctx: &CycleContext,
        _state: &mut CycleState,
        _pod: &Arc<Pod>,
        _node: &NodeInfo,
    ) -> Result<(), PluginError> {
        Ok(())
    }
}

/// Where a pod sorts among pods of the same priority: older `time_ms`
/// first, then `group` (so that pods sharing a key are popped together),
/// then FIFO.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SortKey {
    pub time_ms: i64,
    pub group: String,
}

/// QueueSort (upstream's `QueueSortPlugin.Less`), as a key: pods sort by
/// priority, then by this key. One per scheduler (every profile names
/// the same): PrioritySort keeps the pod's creation time; Coscheduling
/// sorts a pod group's members by the group's creation time and name, so
/// a group is not interleaved with other pods.
pub trait QueueSortPlugin: Plugin {
    /// `None`: the pod's own creation time.
    fn sort_key(&self, pod: &Pod) -> Option<SortKey>;
}

/// PreEnqueue (upstream's `PreEnqueuePlugin`): whether a pending pod may
/// enter the active queue. A refusal holds the pod gated
/// (`scheduler_pending_pods{queue="gated"}`): never attempted, no event,
/// until an update of the pod, or the cluster event that
/// [`PreEnqueuePlugin::released_by`] names, lets it through.
pub trait PreEnqueuePlugin: Plugin {
    fn pre_enqueue(&self, pod: &Pod) -> Result<(), String>;

    /// What besides the pod's own update can lift this plugin's refusal of
    /// `pod` (upstream's QueueingHints for gated pods). The default: any
    /// cluster event.
    fn released_by(&self, _pod: &Pod) -> Release {
        Release::AnyEvent
    }

    /// `None` when the pod may enter the active queue, else what may
    /// release it: [`PreEnqueuePlugin::pre_enqueue`] then
    /// [`PreEnqueuePlugin::released_by`]; a plugin that finds both in one
    /// walk answers here.
    fn hold(&self, pod: &Pod) -> Option<Release> {
        self.pre_enqueue(pod).err().map(|_| self.released_by(pod))
    }
}

/// What may lift a PreEnqueue refusal besides an update of the pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Release {
    /// Nothing else.
    PodUpdate,
    /// A change of one object: its kind ([`ApiKind::kind`]) and key
    /// ([`crate::framework::objects::object_key`]).
    Object { kind: &'static str, key: String },
    /// Any cluster event.
    AnyEvent,
}

/// A plugin that follows cluster state of its own beside the cache
/// (upstream: the informers a plugin opens through the framework's
/// handle) and may ask the scheduler to move pods to the active queue
/// (upstream's `PodsToActivate`). Not an extension point of its own: it
/// comes with the plugin's membership in a profile.
pub trait InformerPlugin: Plugin {
    /// The kinds it reads beside Nodes and Pods.
    fn kinds(&self) -> &'static [ApiKind] {
        &[]
    }

    /// A change to objects of one of its kinds. Returns whether pods that
    /// did not fit may fit now (the unschedulable ones are retried).
    fn object_event(&self, _kind: &ApiKind, _event: ObjectEvent<'_>) -> bool {
        false
    }

    /// Statuses to write, drained (`run`'s leader writes them).
    fn status_writes(&self) -> Vec<StatusWrite> {
        Vec::new()
    }

    /// What it adds to `simulate`'s report, at the end of the run.
    fn report(&self, _snapshot: &Snapshot) -> Option<PluginReport> {
        None
    }

    /// Forgets what it followed (a new simulation with the same plugins).
    fn reset(&self) {}

    /// A pod as the watch (or a manifest) shows it, every pod whatever
    /// its scheduler; `terminating`: it has a deletion timestamp.
    fn pod_applied(&self, _pod: &Pod, _terminating: bool) {}

    /// A pod was deleted.
    fn pod_deleted(&self, _uid: &str) {}

    /// The pods were listed again: those not in `seen` are gone.
    fn pods_relisted(&self, _seen: &HashSet<String>) {}

    /// Uids of pending pods to move to the active queue at `now_ms`
    /// (asked every turn of the scheduling loop; drained).
    fn pods_to_activate(&self, _now_ms: u64) -> HashSet<String> {
        HashSet::new()
    }
}

/// Filter: whether the pod fits a node. Called in parallel, on batches.
pub trait FilterPlugin: Plugin {
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection>;

    /// Filters a batch: `out[i]` becomes the verdict on `nodes[i]` (`None`:
    /// fits). The default filters node by node.
    fn filter_batch(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        nodes: &[&NodeInfo],
        out: &mut [Option<Rejection>],
    ) {
        for (node, verdict) in nodes.iter().zip(out) {
            *verdict = self.filter(ctx, state, node).err();
        }
    }
}

/// Runs the profile's PreFilter extensions and Filter plugins on one
/// node, as a PostFilter plugin needs for its what-if evaluations
/// (upstream's PreemptHandle). Shared by worker threads.
pub trait FilterRunner: Sync {
    /// All Filter plugins on `node` (which may be a modified copy), with
    /// `state` (which the caller may have changed through
    /// [`FilterRunner::add_pod`] / [`FilterRunner::remove_pod`]).
    fn run_filters(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection>;
    /// Every PreFilter plugin's AddPod.
    fn add_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError>;
    /// Every PreFilter plugin's RemovePod.
    fn remove_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError>;

    /// The profile's preemption advisors (upstream's preemption
    /// extenders), in profile order.
    fn advisors(&self) -> &[Arc<dyn PreemptionAdvisor>] {
        &[]
    }

    /// The framework's worker threads, for evaluating nodes in parallel.
    fn pool(&self) -> Option<&rayon::ThreadPool> {
        None
    }

    /// Whether `--explain` records this cycle.
    fn recording(&self) -> bool {
        false
    }

    /// Keeps what preemption considered, for `--explain`.
    fn record(&self, _explanation: PreemptionExplanation) {}
}

/// The per-node verdicts of a failed Filter phase, for PostFilter.
pub struct Filtered<'a> {
    pub fit: &'a FitError,
    /// Nodes that no eviction can make fit (UnschedulableAndUnresolvable).
    pub unresolvable: &'a [u32],
}

/// A nomination: the pod should go to `node` once `victims` are gone.
#[derive(Debug, Clone)]
pub struct Nomination {
    pub node: String,
    pub node_index: u32,
    pub victims: Vec<Arc<Pod>>,
    /// Lower-priority pods nominated to `node` that lose their nomination
    /// (they may no longer fit there).
    pub displaced: Vec<Arc<Pod>>,
    /// Victims preempted in memory (uids): pods held at Permit, rejected
    /// by the scheduler rather than deleted (upstream's
    /// `preemptedInMemory`). Set by the scheduler, not the plugin.
    pub in_memory: Vec<String>,
}

/// What PostFilter did.
#[derive(Debug, Clone)]
pub enum PostFilterResult {
    /// The plugin found a way: evict the victims, nominate the node.
    Nominated(Nomination),
    /// It found none; the message is added to the FitError (upstream's
    /// "preemption: ..." suffix; kube-scheduler 1.20 adds none, so an
    /// empty message adds nothing).
    Unschedulable(String),
}

/// PostFilter: runs when no node passed Filter (preemption).
pub trait PostFilterPlugin: Plugin {
    fn post_filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        filtered: &Filtered,
        runner: &dyn FilterRunner,
    ) -> Result<PostFilterResult, PluginError>;

    /// What the plugin adds to the FitError when PreFilter rejected the
    /// pod (upstream runs PostFilter then too, on no per-node verdicts):
    /// `num_nodes` nodes; `states_complete`: every PreFilter plugin with
    /// extensions had written its state before the rejection.
    fn after_pre_filter_rejection(
        &self,
        _num_nodes: usize,
        _states_complete: bool,
    ) -> Option<String> {
        None
    }
}

/// PreScore: computes what Score needs, given the feasible nodes.
pub trait PreScorePlugin: Plugin {
    fn pre_score(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError>;
}

/// Score and NormalizeScore.
pub trait ScorePlugin: Plugin {
    /// The pod on `node`, raw.
    fn score(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError>;

    /// Scores a batch into `out` (same order as `nodes`). `Skip`: the
    /// plugin counts for nothing in this cycle. Called in parallel on
    /// chunks of the feasible nodes. The default scores node by node.
    fn score_batch(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<Decision, PluginError> {
        for (node, score) in nodes.iter().zip(out) {
            *score = self.score(ctx, state, node)?;
        }
        Ok(Decision::Run)
    }

    /// Whether Score may be called on chunks of the feasible nodes from
    /// the worker threads. `false`: one batch with every feasible node, on
    /// the thread that ran PreFilter (a plugin whose per-thread state
    /// holds the cycle, as a wasm instance does, then pays for the cycle
    /// once).
    fn parallel(&self) -> bool {
        true
    }

    /// NormalizeScore: maps the raw scores of all feasible nodes (in the
    /// order the framework gave them) into 0..=100. The default keeps them.
    fn normalize(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
        _nodes: &[&NodeInfo],
        _scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        Ok(Decision::Run)
    }
}

/// Reserve and Unreserve: claim what the pod will use on its node before
/// it is assumed, and give it back when the pod does not bind there.
pub trait ReservePlugin: Plugin {
    fn reserve(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<(), PluginError>;

    /// Called for every Reserve plugin (in reverse order) when the pod's
    /// reservation is undone, possibly long after its cycle.
    fn unreserve(&self, pod: &Pod, state: &CycleState, node: &str);
}

/// Permit's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    Allow,
    /// Keep the pod reserved; reject it when `Duration` passes first.
    Wait(Duration),
    Reject(String),
}

/// Permit: may hold a reserved pod before binding (gangs).
pub trait PermitPlugin: Plugin {
    fn permit(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<Permit, PluginError>;

    /// Why a pod this plugin holds waits, for its event (`None`:
    /// upstream's `Reserved on <node>; waiting at Permit`).
    fn waiting_message(&self, _pod: &Pod, _node: &str) -> Option<String> {
        None
    }
}

/// Something the binding cycle must do against the API (or, in
/// `simulate`, to the model) before or as the binding. The runtime
/// executes them in order; a failure undoes the reservation.
#[derive(Debug, Clone, PartialEq)]
pub enum BindAction {
    /// Merge these labels and annotations into the pod.
    PatchPod {
        labels: Vec<(String, String)>,
        annotations: Vec<(String, String)>,
    },
    /// Set these pod annotations to the current Unix time in seconds (at
    /// the moment of writing, not of scheduling).
    StampPod { annotations: Vec<String> },
    /// Bind the pod to the node (`pods/binding`).
    Bind,
    /// A step of a plugin's own (HAMi's node lock, VolumeBinding's volume
    /// bindings): its type is the plugin's, and the runtime's binder (or
    /// `simulate`) carries it out.
    Plugin(PluginAction),
}

/// A key and its value (a label, an annotation).
pub type Pair = (String, String);

/// A plugin's own binding step, of a type the plugin defines.
#[derive(Clone)]
pub struct PluginAction(Arc<dyn ActionPayload>);

/// What a [`PluginAction`] holds: any plain value.
pub trait ActionPayload: std::fmt::Debug + Send + Sync + 'static {
    fn as_any(&self) -> &dyn std::any::Any;
    fn eq_payload(&self, other: &dyn ActionPayload) -> bool;
}

impl<T: std::fmt::Debug + PartialEq + Send + Sync + 'static> ActionPayload for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn eq_payload(&self, other: &dyn ActionPayload) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

impl PluginAction {
    pub fn new<T: ActionPayload>(payload: T) -> Self {
        Self(Arc::new(payload))
    }

    /// The payload, if it is a `T`.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

impl std::fmt::Debug for PluginAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for PluginAction {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_payload(other.0.as_ref())
    }
}

impl BindAction {
    /// A plugin's own step.
    pub fn plugin<T: ActionPayload>(payload: T) -> Self {
        Self::Plugin(PluginAction::new(payload))
    }

    /// The payload of a plugin's step, if this is one of type `T`.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        match self {
            Self::Plugin(a) => a.get(),
            _ => None,
        }
    }

    /// The labels and annotations of a [`BindAction::PatchPod`].
    pub fn pod_patch(&self) -> Option<(&[Pair], &[Pair])> {
        match self {
            BindAction::PatchPod {
                labels,
                annotations,
            } => Some((labels, annotations)),
            _ => None,
        }
    }
}

/// PreBind: what to write before the pod is bound.
pub trait PreBindPlugin: Plugin {
    fn pre_bind(
        &self,
        pod: &Pod,
        state: &CycleState,
        node: &str,
    ) -> Result<Vec<BindAction>, PluginError>;

    /// Where there is no API server (`simulate`): applies to `snapshot`
    /// what this plugin's steps among `actions` would have done (volume
    /// bindings completed as the PV controller would).
    fn simulate(&self, _actions: &[BindAction], _snapshot: &Snapshot) {}
}

/// Bind: how the pod is bound. `None` passes to the next Bind plugin.
pub trait BindPlugin: Plugin {
    fn bind(
        &self,
        pod: &Pod,
        state: &CycleState,
        node: &str,
    ) -> Result<Option<Vec<BindAction>>, PluginError>;
}

/// PostBind: told that the pod was bound (informational).
pub trait PostBindPlugin: Plugin {
    fn post_bind(&self, pod: &Pod, state: &CycleState, node: &str);
}
