//! The scheduling queue: activeQ ordered by priority then creation time,
//! backoffQ (1 s doubling to 10 s by default, `podInitialBackoffSeconds`
//! and `podMaxBackoffSeconds` in a configuration), and the unschedulable pool that
//! cluster events flush back. Time is passed in (milliseconds) so that
//! `simulate` can run on a virtual clock and tests are exact.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use crate::model::Pod;

use super::plugins::scheduling_gates::SchedulingGates;
use super::points::{PreEnqueuePlugin, QueueSortPlugin, Release, SortKey};

pub const INITIAL_BACKOFF_MS: u64 = 1_000;
pub const MAX_BACKOFF_MS: u64 = 10_000;

/// How long a pod waits in backoffQ after failed attempts: `initial_ms`
/// doubling per attempt up to `max_ms` (kube-scheduler's
/// `podInitialBackoffSeconds` and `podMaxBackoffSeconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial_ms: u64,
    pub max_ms: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial_ms: INITIAL_BACKOFF_MS,
            max_ms: MAX_BACKOFF_MS,
        }
    }
}

impl Backoff {
    /// The wait after `attempts` failed attempts (upstream's
    /// `calculateBackoffDuration`: the initial duration doubled per
    /// attempt after the first, capped at the maximum).
    pub fn delay_ms(&self, attempts: u32) -> u64 {
        let mut d = self.initial_ms.min(self.max_ms);
        for _ in 1..attempts {
            // d <= max_ms throughout: no overflow, no underflow.
            if d > self.max_ms - d {
                return self.max_ms;
            }
            d += d;
        }
        d
    }
}

struct Entry {
    pod: Arc<Pod>,
    seq: u64,
    /// The sort key ([`QueueSortPlugin`]), fixed when the entry is made.
    key: SortKey,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Max-heap order: higher priority first, then older, then FIFO.
    fn cmp(&self, other: &Self) -> Ordering {
        self.pod
            .priority
            .cmp(&other.pod.priority)
            .then_with(|| other.key.cmp(&self.key))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Queue sizes, as the `scheduler_pending_pods` metric reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueLengths {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    /// Pods held by their `spec.schedulingGates` (upstream's
    /// `queue="gated"`).
    pub gated: usize,
}

/// The PreEnqueue plugins of each profile, by `schedulerName`; a pod of
/// another name (`simulate --all-pods`) gets the first profile's.
#[derive(Clone, Default)]
pub struct PreEnqueue {
    pub profiles: Vec<(String, Vec<Arc<dyn PreEnqueuePlugin>>)>,
}

impl PreEnqueue {
    /// Upstream's default: SchedulingGates for every pod.
    fn gates_only() -> Self {
        Self {
            profiles: vec![(String::new(), vec![Arc::new(SchedulingGates)])],
        }
    }

    /// `None`: the pod may enter the active queue. `Some(release)`: it is
    /// held until its update or `release`.
    fn holds(&self, pod: &Pod) -> Option<Release> {
        let plugins = self
            .profiles
            .iter()
            .find(|(name, _)| *name == pod.scheduler_name)
            .or(self.profiles.first())
            .map(|(_, p)| p.as_slice())
            .unwrap_or_default();
        plugins.iter().find_map(|p| p.hold(pod))
    }
}

/// A pod held at PreEnqueue.
struct Gated {
    pod: Arc<Pod>,
    /// What besides its own update may let it through.
    release: Release,
}

/// kube-scheduler's PriorityQueue, with its gated pods (held at PreEnqueue,
/// such as SchedulingGates' pods with `spec.schedulingGates`: never
/// attempted until an update, or a cluster event that matters, lets them
/// through), minus nominated pods (the cache's nominator keeps those).
pub struct SchedulingQueue {
    active: BinaryHeap<Entry>,
    /// (ready at, entry)
    backoff: Vec<(u64, Entry)>,
    unschedulable: HashMap<String, Entry>,
    /// Pods held at PreEnqueue, by uid.
    gated: HashMap<String, Gated>,
    /// The uids of the gated pods that any cluster event may let through.
    gated_any: HashSet<String>,
    /// The uids of the gated pods waiting for a change of one object, by
    /// (kind, key).
    gated_on: HashMap<(&'static str, String), HashSet<String>>,
    attempts: HashMap<String, u32>,
    /// Pods whose preemption is still being carried out (upstream's
    /// `Executor.preempting`, read by DefaultPreemption's PreEnqueue):
    /// never attempted until [`SchedulingQueue::preemption_finished`].
    preempting: HashSet<String>,
    seq: u64,
    sort: Option<Arc<dyn QueueSortPlugin>>,
    pre_enqueue: PreEnqueue,
    backoff_policy: Backoff,
}

impl Default for SchedulingQueue {
    fn default() -> Self {
        Self {
            active: BinaryHeap::new(),
            backoff: Vec::new(),
            unschedulable: HashMap::new(),
            gated: HashMap::new(),
            gated_any: HashSet::new(),
            gated_on: HashMap::new(),
            attempts: HashMap::new(),
            preempting: HashSet::new(),
            seq: 0,
            sort: None,
            pre_enqueue: PreEnqueue::gates_only(),
            backoff_policy: Backoff::default(),
        }
    }
}

impl SchedulingQueue {
    /// Upstream's defaults: PrioritySort, and SchedulingGates at
    /// PreEnqueue.
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue ordered by `sort` (`None`: priority, then creation time)
    /// that holds pods at the profiles' PreEnqueue plugins.
    pub fn with_plugins(sort: Option<Arc<dyn QueueSortPlugin>>, pre_enqueue: PreEnqueue) -> Self {
        Self {
            sort,
            pre_enqueue,
            ..Self::default()
        }
    }

    /// The same queue with `backoff` instead of the default 1 s to 10 s.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff_policy = backoff;
        self
    }

    fn entry(&mut self, pod: Arc<Pod>) -> Entry {
        self.seq += 1;
        let key = self
            .sort
            .as_ref()
            .and_then(|s| s.sort_key(&pod))
            .unwrap_or_else(|| SortKey {
                time_ms: pod.creation_ms,
                group: String::new(),
            });
        Entry {
            pod,
            seq: self.seq,
            key,
        }
    }

    /// Moves these pods, wherever they wait (backing off, unschedulable,
    /// or active under an old sort key), to activeQ now (upstream's
    /// `Activate`: a pod group that became complete). Returns how many
    /// moved.
    pub fn activate(&mut self, uids: &HashSet<String>) -> usize {
        if uids.is_empty() {
            return 0;
        }
        let mut moved: Vec<Arc<Pod>> = Vec::new();
        let active = std::mem::take(&mut self.active).into_vec();
        for e in active {
            if uids.contains(&e.pod.uid) {
                moved.push(e.pod);
            } else {
                self.active.push(e);
            }
        }
        let mut i = 0;
        while i < self.backoff.len() {
            if uids.contains(&self.backoff[i].1.pod.uid) {
                moved.push(self.backoff.swap_remove(i).1.pod);
            } else {
                i += 1;
            }
        }
        for uid in uids {
            if let Some(e) = self.unschedulable.remove(uid) {
                moved.push(e.pod);
            }
        }
        moved.sort_by(|a, b| a.uid.cmp(&b.uid));
        let n = moved.len();
        for pod in moved {
            let e = self.entry(pod);
            self.active.push(e);
        }
        n
    }

    /// A new pending pod: to activeQ, or held while a PreEnqueue plugin
    /// refuses it.
    pub fn add(&mut self, pod: Arc<Pod>) {
        if let Some(release) = self.pre_enqueue.holds(&pod) {
            self.ungate(&pod.uid);
            match &release {
                Release::PodUpdate => {}
                Release::AnyEvent => {
                    self.gated_any.insert(pod.uid.clone());
                }
                Release::Object { kind, key } => {
                    self.gated_on
                        .entry((kind, key.clone()))
                        .or_default()
                        .insert(pod.uid.clone());
                }
            }
            self.gated.insert(pod.uid.clone(), Gated { pod, release });
            return;
        }
        let e = self.entry(pod);
        self.active.push(e);
    }

    /// A queued pod's new version. A held pod that PreEnqueue now lets
    /// through moves to activeQ (returns true); one still held is kept as
    /// it is now.
    pub fn update(&mut self, pod: Arc<Pod>) -> bool {
        if self.ungate(&pod.uid).is_none() {
            return false;
        }
        let uid = pod.uid.clone();
        self.add(pod);
        !self.gated.contains_key(&uid)
    }

    /// The next pod to schedule, after moving pods whose backoff ended.
    pub fn pop(&mut self, now_ms: u64) -> Option<Arc<Pod>> {
        let mut i = 0;
        while i < self.backoff.len() {
            if self.backoff[i].0 <= now_ms {
                let (_, e) = self.backoff.swap_remove(i);
                self.active.push(e);
            } else {
                i += 1;
            }
        }
        loop {
            let e = self.active.pop()?;
            if self.preempting.contains(&e.pod.uid) {
                // Upstream's PreEnqueue refusal "waiting for the
                // preemption for this pod to be finished": back to the
                // pool, whatever event moved it.
                self.unschedulable.insert(e.pod.uid.clone(), e);
                continue;
            }
            *self.attempts.entry(e.pod.uid.clone()).or_insert(0) += 1;
            return Some(e.pod);
        }
    }

    /// The pod's preemption is being carried out after its cycle
    /// (asynchronous preemption): it is not attempted again until
    /// [`SchedulingQueue::preemption_finished`], so that no event retries
    /// it while its victims are still running and it preempts twice.
    pub fn hold_preempting(&mut self, uid: &str) {
        self.preempting.insert(uid.to_string());
    }

    /// The evictions for the pod are done (`failed`: some failed). The
    /// victims' deletion events may have come while it was held, so it is
    /// retried: after its backoff, or at once when an eviction failed
    /// (upstream `Activate`s it then). Returns whether it was held.
    pub fn preemption_finished(&mut self, uid: &str, failed: bool, now_ms: u64) -> bool {
        if !self.preempting.remove(uid) {
            return false;
        }
        if let Some(e) = self.unschedulable.remove(uid) {
            if failed {
                self.active.push(e);
            } else {
                let attempts = self.attempts.get(uid).copied().unwrap_or(1);
                self.backoff
                    .push((now_ms + self.backoff_policy.delay_ms(attempts), e));
            }
        }
        true
    }

    /// Whether the pod's preemption is still being carried out.
    pub fn is_preempting(&self, uid: &str) -> bool {
        self.preempting.contains(uid)
    }

    /// The default backoff of a pod after `attempts` failed attempts.
    pub fn backoff_ms(attempts: u32) -> u64 {
        Backoff::default().delay_ms(attempts)
    }

    /// A pod whose attempt failed for a reason other than fit (an error,
    /// a failed binding) goes straight to backoffQ.
    pub fn add_backoff(&mut self, pod: Arc<Pod>, now_ms: u64) {
        let attempts = self.attempts.get(&pod.uid).copied().unwrap_or(1);
        let e = self.entry(pod);
        self.backoff
            .push((now_ms + self.backoff_policy.delay_ms(attempts), e));
    }

    /// A pod that did not fit waits in the unschedulable pool until a
    /// cluster event may make it fit.
    pub fn add_unschedulable(&mut self, pod: Arc<Pod>) {
        let uid = pod.uid.clone();
        let e = self.entry(pod);
        self.unschedulable.insert(uid, e);
    }

    /// A cluster change (pod placed or deleted, node added or changed) may
    /// make waiting pods fit: they go to backoffQ, from where they return
    /// once their backoff (counted from `now_ms`) ends.
    /// Held pods that a cluster event may let through are checked again.
    pub fn on_cluster_event(&mut self, now_ms: u64) {
        let preempting = &self.preempting;
        let (held, moved): (HashMap<_, _>, HashMap<_, _>) = std::mem::take(&mut self.unschedulable)
            .into_iter()
            .partition(|(uid, _)| preempting.contains(uid));
        self.unschedulable = held;
        for (uid, e) in moved {
            let attempts = self.attempts.get(&uid).copied().unwrap_or(1);
            self.backoff
                .push((now_ms + self.backoff_policy.delay_ms(attempts), e));
        }
        let recheck: Vec<String> = self.gated_any.iter().cloned().collect();
        self.recheck(recheck);
    }

    /// A change of the object `key` of `kind` (added, changed or deleted):
    /// the pods held until it changes are checked again. `None`: every
    /// object of `kind` may have changed (listed again).
    pub fn on_object_event(&mut self, kind: &'static str, key: Option<&str>) {
        let uids: Vec<String> = match key {
            Some(key) => self
                .gated_on
                .get(&(kind, key.to_string()))
                .map(|u| u.iter().cloned().collect())
                .unwrap_or_default(),
            None => self
                .gated_on
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .flat_map(|(_, u)| u.iter().cloned())
                .collect(),
        };
        self.recheck(uids);
    }

    /// Gated pods through PreEnqueue again, in uid order.
    fn recheck(&mut self, mut uids: Vec<String>) {
        uids.sort_unstable();
        for uid in uids {
            if let Some(g) = self.ungate(&uid) {
                self.add(g.pod);
            }
        }
    }

    /// Takes a pod out of the gated pods.
    fn ungate(&mut self, uid: &str) -> Option<Gated> {
        let g = self.gated.remove(uid)?;
        match &g.release {
            Release::PodUpdate => {}
            Release::AnyEvent => {
                self.gated_any.remove(uid);
            }
            Release::Object { kind, key } => {
                let slot = (*kind, key.clone());
                if let Some(u) = self.gated_on.get_mut(&slot) {
                    u.remove(uid);
                    if u.is_empty() {
                        self.gated_on.remove(&slot);
                    }
                }
            }
        }
        Some(g)
    }

    /// A pod that left the queue for good (scheduled or deleted).
    pub fn done(&mut self, uid: &str) {
        self.attempts.remove(uid);
        self.preempting.remove(uid);
        self.unschedulable.remove(uid);
        self.ungate(uid);
        self.backoff.retain(|(_, e)| e.pod.uid != uid);
    }

    /// When the earliest backoff ends, if any pod is backing off.
    pub fn next_backoff_ready(&self) -> Option<u64> {
        self.backoff.iter().map(|(t, _)| *t).min()
    }

    pub fn lengths(&self) -> QueueLengths {
        QueueLengths {
            active: self.active.len(),
            backoff: self.backoff.len(),
            unschedulable: self.unschedulable.len(),
            gated: self.gated.len(),
        }
    }

    /// Pods still in the unschedulable pool.
    pub fn unschedulable_pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.unschedulable.values().map(|e| &e.pod)
    }

    /// Pods held at PreEnqueue (scheduling gates, ...), in no order.
    pub fn gated_pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.gated.values().map(|g| &g.pod)
    }

    /// Every queued pod (active, backing off, unschedulable; not gated),
    /// in no order.
    pub fn pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.active
            .iter()
            .map(|e| &e.pod)
            .chain(self.backoff.iter().map(|(_, e)| &e.pod))
            .chain(self.unschedulable.values().map(|e| &e.pod))
    }

    /// When each backing-off pod becomes ready, by uid.
    pub fn backoff_pods(&self) -> impl Iterator<Item = (&str, u64)> {
        self.backoff.iter().map(|(t, e)| (e.pod.uid.as_str(), *t))
    }

    /// Attempts made for a pod so far.
    pub fn attempts(&self, uid: &str) -> u32 {
        self.attempts.get(uid).copied().unwrap_or(0)
    }
}
