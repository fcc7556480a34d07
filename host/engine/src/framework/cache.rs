//! The scheduler's cache: the cluster as the watches report it, plus the
//! pods this scheduler placed but whose binding the watch has not shown
//! yet ("assumed", as upstream). The snapshot the framework schedules
//! against is kept here, so it always includes assumed pods and the next
//! cycle cannot hand out the same capacity twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::framework::queue::SchedulingQueue;
use crate::framework::Snapshot;
use crate::model::{Node, Pod};

/// How long an assumed pod whose binding succeeded may wait for the watch
/// to confirm it before the cache forgets it (upstream: 30 s after
/// binding finished). Only a lost watch event makes this matter.
pub const ASSUMED_TTL_MS: u64 = 30_000;

#[derive(Debug, Clone)]
struct Assumed {
    node: String,
    /// When the bind call succeeded; `None` while it is in flight.
    bound_at_ms: Option<u64>,
}

/// What a pod update meant for scheduling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodUpdate {
    /// A pending pod a profile serves joined the queue.
    Queued,
    /// A queued pod's object changed (the queue keeps its place).
    Updated,
    /// A bound pod was added or changed in the snapshot.
    Bound,
    /// The pod left the cache (deleted, terminal, or terminating).
    Removed,
    /// Nothing this scheduler acts on.
    Ignored,
}

/// The cache and the queue, guarded together by one lock so a cycle sees
/// a consistent snapshot.
#[derive(Default)]
pub struct Cache {
    pub snapshot: Snapshot,
    pub queue: SchedulingQueue,
    /// Pending pods a profile serves, latest version, by uid.
    pending: HashMap<String, Arc<Pod>>,
    /// Bound pods by uid, as the API reports them.
    bound: HashMap<String, Arc<Pod>>,
    /// Pods placed by this scheduler, not yet seen bound by the watch.
    assumed: HashMap<String, Assumed>,
    /// Live metrics of nodes by node name (a node-metrics source's), kept
    /// apart from the Node objects so that a watch update of a node keeps
    /// them.
    node_metrics: HashMap<String, Vec<(String, f64)>>,
}

impl Cache {
    /// An empty cache whose pods wait in `queue`.
    pub fn new(queue: SchedulingQueue) -> Self {
        Self {
            queue,
            ..Self::default()
        }
    }

    /// Adds or updates a node. Returns false when nothing that matters for
    /// scheduling changed (a status heartbeat).
    pub fn node_applied(&mut self, node: Node, now_ms: u64) -> bool {
        let existing = self.snapshot.by_name(&node.name).map(|i| i.node.clone());
        if existing.as_deref() == Some(&node) {
            return false;
        }
        let name = node.name.clone();
        let index = self.snapshot.set_node(node);
        if existing.is_none() {
            if let Some(m) = self.node_metrics.get(&name) {
                self.snapshot.set_node_metrics(&name, m.clone());
            }
            // Pods the watch reported bound before their node arrived.
            let pods: Vec<Arc<Pod>> = self
                .bound
                .values()
                .filter(|p| p.node_name.as_deref() == Some(name.as_str()))
                .cloned()
                .collect();
            for p in pods {
                self.snapshot.add_pod(index, p);
            }
        }
        self.queue.on_cluster_event(now_ms);
        true
    }

    /// Replaces the live metrics of every node (`Node::metrics`, each list
    /// sorted by name): nodes absent from `metrics` have none. Only the
    /// nodes whose metrics changed are set again in the snapshot (one
    /// `NodeMetrics` change each, so plugins get deltas of what they read).
    /// No pod is requeued:
    /// metrics change scores, not whether a pod fits. Returns how many
    /// nodes changed.
    pub fn replace_node_metrics(&mut self, metrics: HashMap<String, Vec<(String, f64)>>) -> usize {
        let old = std::mem::replace(&mut self.node_metrics, metrics);
        let mut names: Vec<&String> = old
            .keys()
            .filter(|n| !self.node_metrics.contains_key(*n))
            .chain(self.node_metrics.keys())
            .collect();
        names.sort_unstable();
        let mut changed = 0;
        for name in names {
            let want = self.node_metrics.get(name).cloned().unwrap_or_default();
            let Some(info) = self.snapshot.by_name(name) else {
                continue;
            };
            if info.metrics == want[..] {
                continue;
            }
            self.snapshot.set_node_metrics(name, want);
            changed += 1;
        }
        changed
    }

    pub fn node_deleted(&mut self, name: &str, now_ms: u64) -> bool {
        let removed = self.snapshot.remove_node(name).is_some();
        if removed {
            self.queue.on_cluster_event(now_ms);
        }
        removed
    }

    /// Applies a pod as the watch reports it. `served` says whether a
    /// profile serves a `schedulerName`.
    pub fn pod_applied(
        &mut self,
        pod: Pod,
        terminating: bool,
        served: impl Fn(&str) -> bool,
        now_ms: u64,
    ) -> PodUpdate {
        let terminating = terminating || pod.terminating;
        let unscheduled_terminating = terminating && pod.node_name.is_none();
        if unscheduled_terminating || matches!(pod.phase.as_str(), "Succeeded" | "Failed") {
            // Terminal pods free their node's resources (upstream's
            // informer filters them out); a terminating pending pod is
            // not scheduled. A terminating bound pod keeps its resources
            // until it is gone, as upstream's cache counts it (the room
            // preemption makes appears when the victims are deleted).
            return if self.pod_deleted(&pod.uid, now_ms) {
                PodUpdate::Removed
            } else {
                PodUpdate::Ignored
            };
        }
        let mut pod = pod;
        pod.terminating = terminating;
        let uid = pod.uid.clone();
        match pod.node_name.clone() {
            Some(node) => {
                self.pending.remove(&uid);
                self.queue.done(&uid);
                self.assumed.remove(&uid);
                self.snapshot.nominator.remove(&uid);
                let pod = Arc::new(pod);
                let same = self.bound.get(&uid).is_some_and(|old| **old == *pod);
                self.bound.insert(uid.clone(), pod.clone());
                if same {
                    return PodUpdate::Ignored;
                }
                if let Some(index) = self.snapshot.index_of(&node) {
                    self.snapshot.add_pod(index, pod);
                    self.queue.on_cluster_event(now_ms);
                } else {
                    // Counted when its node arrives.
                    self.snapshot.remove_pod(&uid);
                }
                PodUpdate::Bound
            }
            None => {
                if self.assumed.contains_key(&uid) || !served(&pod.scheduler_name) {
                    // An assumed pod's pending view is stale: the binding
                    // is in flight.
                    return PodUpdate::Ignored;
                }
                let pod = Arc::new(pod);
                let old = self.pending.insert(uid, pod.clone());
                self.snapshot.nominator.update(old.as_deref(), pod.clone());
                if old.is_none() || self.queue.update(pod.clone()) {
                    if old.is_none() {
                        self.queue.add(pod);
                    }
                    PodUpdate::Queued
                } else {
                    PodUpdate::Updated
                }
            }
        }
    }

    /// Forgets a pod everywhere. Returns whether it held resources in the
    /// snapshot (so waiting pods may now fit) or was queued.
    pub fn pod_deleted(&mut self, uid: &str, now_ms: u64) -> bool {
        let was_pending = self.pending.remove(uid).is_some();
        self.snapshot.nominator.remove(uid);
        self.queue.done(uid);
        self.assumed.remove(uid);
        self.bound.remove(uid);
        let freed = self.snapshot.remove_pod(uid).is_some();
        if freed {
            self.queue.on_cluster_event(now_ms);
        }
        freed || was_pending
    }

    /// After a relist (watch restarted): drops pods that are gone. Assumed
    /// pods stay; their binding decides.
    pub fn retain_pods(&mut self, seen: &HashSet<String>, now_ms: u64) -> usize {
        let gone: Vec<String> = self
            .pending
            .keys()
            .chain(self.bound.keys())
            .filter(|uid| !seen.contains(*uid) && !self.assumed.contains_key(*uid))
            .cloned()
            .collect();
        for uid in &gone {
            self.pod_deleted(uid, now_ms);
        }
        gone.len()
    }

    /// After a relist: drops nodes that are gone.
    pub fn retain_nodes(&mut self, seen: &HashSet<String>, now_ms: u64) -> usize {
        let gone: Vec<String> = self
            .snapshot
            .nodes()
            .map(|n| n.node.name.clone())
            .filter(|n| !seen.contains(n))
            .collect();
        for name in &gone {
            self.node_deleted(name, now_ms);
        }
        gone.len()
    }

    /// The next pod to schedule, in its latest version.
    pub fn pop(&mut self, now_ms: u64) -> Option<Arc<Pod>> {
        while let Some(pod) = self.queue.pop(now_ms) {
            if let Some(latest) = self.pending.get(&pod.uid) {
                return Some(latest.clone());
            }
        }
        None
    }

    /// Places a pod on a node before it is bound, so the next cycle sees
    /// the capacity taken. Returns the bound copy to send to the API.
    pub fn assume(&mut self, pod: &Pod, node: &str) -> Option<Arc<Pod>> {
        let index = self.snapshot.index_of(node)?;
        let mut bound = pod.clone();
        bound.node_name = Some(node.to_string());
        let bound = Arc::new(bound);
        self.pending.remove(&pod.uid);
        self.snapshot.nominator.remove(&pod.uid);
        self.assumed.insert(
            pod.uid.clone(),
            Assumed {
                node: node.to_string(),
                bound_at_ms: None,
            },
        );
        self.snapshot.add_pod(index, bound.clone());
        Some(bound)
    }

    /// Merges `labels` and `annotations` into an assumed pod (PreBind
    /// output), so later cycles and plugin instances see them. Returns the
    /// patched pod.
    pub fn patch_assumed(
        &mut self,
        uid: &str,
        labels: &[(String, String)],
        annotations: &[(String, String)],
    ) -> Option<Arc<Pod>> {
        let node = self.assumed.get(uid)?.node.clone();
        let index = self.snapshot.index_of(&node)?;
        let (_, pod) = self.snapshot.remove_pod(uid)?;
        let mut patched = (*pod).clone();
        patched.labels.extend(labels.iter().cloned());
        patched.annotations.extend(annotations.iter().cloned());
        let patched = Arc::new(patched);
        self.snapshot.add_pod(index, patched.clone());
        Some(patched)
    }

    /// Whether a pod is still assumed on `node` and the node is still
    /// there: the binder checks this right before the bind call.
    pub fn still_assumed(&self, uid: &str, node: &str) -> bool {
        self.assumed.get(uid).is_some_and(|a| a.node == node)
            && self.snapshot.index_of(node).is_some()
    }

    /// The node a pod is assumed on, if it is.
    pub fn assumed_on(&self, uid: &str) -> Option<&str> {
        self.assumed.get(uid).map(|a| a.node.as_str())
    }

    /// The bind call succeeded; the watch will confirm.
    pub fn finish_binding(&mut self, uid: &str, now_ms: u64) {
        if let Some(a) = self.assumed.get_mut(uid) {
            a.bound_at_ms = Some(now_ms);
        }
    }

    /// Undoes an assumption (binding failed or was abandoned): the
    /// reservation is released, and waiting pods may fit again.
    pub fn forget(&mut self, uid: &str, now_ms: u64) -> bool {
        if self.assumed.remove(uid).is_none() {
            return false;
        }
        if !self.bound.contains_key(uid) {
            self.snapshot.remove_pod(uid);
        }
        self.queue.on_cluster_event(now_ms);
        true
    }

    /// Puts a pod whose binding failed back in the queue (after backoff),
    /// unless it was deleted or bound meanwhile.
    pub fn requeue(&mut self, pod: Arc<Pod>, now_ms: u64) {
        if self.bound.contains_key(&pod.uid) || self.assumed.contains_key(&pod.uid) {
            return;
        }
        let mut pending = (*pod).clone();
        pending.node_name = None;
        let pending = Arc::new(pending);
        self.pending.insert(pod.uid.clone(), pending.clone());
        self.queue.add_backoff(pending, now_ms);
    }

    /// Puts a pod that was refused after it was assumed (a Permit
    /// rejection) in the unschedulable pool, unless it was deleted or
    /// bound meanwhile.
    pub fn requeue_unschedulable(&mut self, pod: Arc<Pod>) {
        if self.bound.contains_key(&pod.uid) || self.assumed.contains_key(&pod.uid) {
            return;
        }
        let mut pending = (*pod).clone();
        pending.node_name = None;
        let pending = Arc::new(pending);
        self.pending.insert(pod.uid.clone(), pending.clone());
        self.queue.add_unschedulable(pending);
    }

    /// Forgets assumed pods whose binding succeeded long ago but never
    /// showed up in the watch. Returns their uids.
    pub fn expire_assumed(&mut self, now_ms: u64) -> Vec<String> {
        let expired: Vec<String> = self
            .assumed
            .iter()
            .filter(|(_, a)| a.bound_at_ms.is_some_and(|t| now_ms >= t + ASSUMED_TTL_MS))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in &expired {
            self.forget(uid, now_ms);
        }
        expired
    }

    /// PostFilter nominated `pod` to `node` (upstream's
    /// `AddNominatedPod`), and `displaced` lost their nominations there.
    /// The pending copies show it as their `status.nominatedNodeName`
    /// will once written.
    pub fn nominate(&mut self, pod: &Pod, node: &str, displaced: &[Arc<Pod>]) {
        let with = |p: &Pod, node: Option<&str>| {
            let mut p = p.clone();
            p.nominated_node = node.map(str::to_string);
            Arc::new(p)
        };
        if let Some(p) = self.pending.get(&pod.uid).map(|p| with(p, Some(node))) {
            self.pending.insert(pod.uid.clone(), p.clone());
            self.snapshot.nominator.add(p, Some(node));
        }
        for d in displaced {
            self.snapshot.nominator.remove(&d.uid);
            if let Some(p) = self.pending.get(&d.uid).map(|p| with(p, None)) {
                self.pending.insert(d.uid.clone(), p);
            }
        }
    }

    /// Ends `uid`'s nomination (its nominated node can no longer take it).
    pub fn clear_nomination(&mut self, uid: &str) -> bool {
        let had = self.snapshot.nominator.remove(uid).is_some();
        if let Some(p) = self.pending.get(uid) {
            let mut p = (**p).clone();
            p.nominated_node = None;
            self.pending.insert(uid.to_string(), Arc::new(p));
        }
        had
    }

    /// The pending pod `uid`, in its latest version.
    pub fn pending_pod(&self, uid: &str) -> Option<&Arc<Pod>> {
        self.pending.get(uid)
    }

    pub fn is_pending(&self, uid: &str) -> bool {
        self.pending.contains_key(uid)
    }

    pub fn assumed_count(&self) -> usize {
        self.assumed.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::framework::plugins::testutil::{N, P};

    use super::*;

    fn served(name: &str) -> bool {
        name == "default-scheduler"
    }

    fn cache_with_node() -> Cache {
        let mut c = Cache::default();
        c.node_applied(
            N::new("n1").alloc(&[("cpu", "4"), ("pods", "10")]).build(),
            0,
        );
        c
    }

    #[test]
    fn assumed_capacity_is_visible_until_forgotten() {
        let mut c = cache_with_node();
        let pod = P::new("p").req(&[("cpu", "3")]).build();
        assert_eq!(
            c.pod_applied(pod.clone(), false, served, 0),
            PodUpdate::Queued
        );
        let popped = c.pop(0).unwrap();
        c.assume(&popped, "n1").unwrap();
        assert_eq!(c.snapshot.by_name("n1").unwrap().pods.len(), 1);
        assert!(c.still_assumed(&pod.uid, "n1"));
        // The stale pending view from the watch does not requeue it.
        assert_eq!(
            c.pod_applied(pod.clone(), false, served, 0),
            PodUpdate::Ignored
        );
        assert!(c.pop(0).is_none());
        assert!(c.forget(&pod.uid, 10));
        assert!(c.snapshot.by_name("n1").unwrap().pods.is_empty());
    }

    /// Live metrics reach the snapshot as node changes (only for nodes
    /// whose metrics changed), survive a watch update of the node, and
    /// go when the source no longer has them.
    #[test]
    fn node_metrics_are_kept_across_node_updates() {
        let mut c = cache_with_node();
        let util = |v: f64| vec![("DCGM_FI_DEV_GPU_UTIL".to_string(), v)];
        let generation = c.snapshot.generation();
        let n1_at = |v: f64| HashMap::from([("n1".to_string(), util(v))]);
        assert_eq!(c.replace_node_metrics(n1_at(40.0)), 1);
        assert_eq!(c.snapshot.generation(), generation + 1);
        assert_eq!(
            c.snapshot.by_name("n1").unwrap().metrics.to_vec(),
            util(40.0)
        );
        // Unchanged: no change logged. Unknown nodes are kept for later.
        let mut same = n1_at(40.0);
        same.insert("n2".into(), util(5.0));
        assert_eq!(c.replace_node_metrics(same), 0);
        assert_eq!(c.snapshot.generation(), generation + 1);
        // The watch's node carries no metrics; the cache's stay.
        let n1 = N::new("n1").alloc(&[("cpu", "4"), ("pods", "10")]).build();
        assert!(!c.node_applied(n1, 0));
        c.node_applied(N::new("n2").alloc(&[("cpu", "1")]).build(), 0);
        assert_eq!(
            c.snapshot.by_name("n2").unwrap().metrics.to_vec(),
            util(5.0)
        );
        assert_eq!(c.replace_node_metrics(HashMap::new()), 2);
        assert!(c.snapshot.by_name("n1").unwrap().metrics.is_empty());
    }

    /// Upstream's SchedulingGates: a gated pod is held, never popped,
    /// counted as gated; an update that keeps a gate keeps it held; the
    /// update that removes the last one queues it (once).
    #[test]
    fn gated_pods_wait_for_their_last_gate() {
        let mut c = cache_with_node();
        let mut pod = P::new("p").req(&[("cpu", "1")]).build();
        pod.scheduling_gates = vec!["kueue.x-k8s.io/admission".into(), "example.com/b".into()];
        assert_eq!(
            c.pod_applied(pod.clone(), false, served, 0),
            PodUpdate::Queued
        );
        assert!(c.pop(0).is_none(), "a gated pod is not attempted");
        assert_eq!(c.queue.lengths().gated, 1);
        assert_eq!(c.queue.gated_pods().count(), 1);
        assert_eq!(c.queue.pods().count(), 0);
        // A cluster event does not release it.
        c.queue.on_cluster_event(0);
        assert!(c.pop(10_000).is_none());
        pod.scheduling_gates.remove(0);
        assert_eq!(
            c.pod_applied(pod.clone(), false, served, 0),
            PodUpdate::Updated
        );
        assert!(c.pop(0).is_none(), "one gate left");
        pod.scheduling_gates.clear();
        assert_eq!(
            c.pod_applied(pod.clone(), false, served, 0),
            PodUpdate::Queued
        );
        assert_eq!(c.queue.lengths().gated, 0);
        assert_eq!(c.pop(0).unwrap().uid, pod.uid);
        assert_eq!(c.queue.attempts(&pod.uid), 1, "gated time made no attempts");
        // A later update of the now-queued pod does not queue it twice.
        assert_eq!(
            c.pod_applied(pod.clone(), false, served, 0),
            PodUpdate::Updated
        );
        assert!(c.pop(0).is_none());
        // Deleting a gated pod forgets it.
        let mut other = P::new("q").build();
        other.scheduling_gates = vec!["g".into()];
        c.pod_applied(other.clone(), false, served, 0);
        c.pod_deleted(&other.uid, 0);
        assert_eq!(c.queue.lengths().gated, 0);
    }

    #[test]
    fn watch_confirmation_replaces_the_assumption() {
        let mut c = cache_with_node();
        let pod = P::new("p").req(&[("cpu", "1")]).build();
        c.pod_applied(pod.clone(), false, served, 0);
        let popped = c.pop(0).unwrap();
        c.assume(&popped, "n1").unwrap();
        c.finish_binding(&pod.uid, 5);
        let mut bound = pod.clone();
        bound.node_name = Some("n1".into());
        assert_eq!(c.pod_applied(bound, false, served, 6), PodUpdate::Bound);
        assert_eq!(c.assumed_count(), 0);
        // A late forget (e.g. a TTL) does not drop a confirmed pod.
        assert!(!c.forget(&pod.uid, 7));
        assert_eq!(c.snapshot.by_name("n1").unwrap().pods.len(), 1);
        assert!(c.expire_assumed(1_000_000).is_empty());
    }

    #[test]
    fn unconfirmed_bindings_expire() {
        let mut c = cache_with_node();
        let pod = P::new("p").req(&[("cpu", "1")]).build();
        c.pod_applied(pod.clone(), false, served, 0);
        let popped = c.pop(0).unwrap();
        c.assume(&popped, "n1").unwrap();
        c.finish_binding(&pod.uid, 100);
        assert!(c.expire_assumed(100 + ASSUMED_TTL_MS - 1).is_empty());
        assert_eq!(
            c.expire_assumed(100 + ASSUMED_TTL_MS),
            vec![pod.uid.clone()]
        );
        assert!(c.snapshot.by_name("n1").unwrap().pods.is_empty());
    }

    #[test]
    fn other_schedulers_and_terminal_pods_are_ignored() {
        let mut c = cache_with_node();
        let mut other = P::new("o").build();
        other.scheduler_name = "someone-else".into();
        assert_eq!(c.pod_applied(other, false, served, 0), PodUpdate::Ignored);
        let mut done = P::new("d").build();
        done.node_name = Some("n1".into());
        assert_eq!(
            c.pod_applied(done.clone(), false, served, 0),
            PodUpdate::Bound
        );
        done.phase = "Succeeded".into();
        assert_eq!(c.pod_applied(done, false, served, 0), PodUpdate::Removed);
        assert!(c.snapshot.by_name("n1").unwrap().pods.is_empty());
        let p = P::new("t").build();
        assert_eq!(c.pod_applied(p, true, served, 0), PodUpdate::Ignored);
        assert!(c.pop(0).is_none());
    }

    #[test]
    fn pods_bound_before_their_node_count_when_it_arrives() {
        let mut c = Cache::default();
        let mut p = P::new("early").req(&[("cpu", "1")]).build();
        p.node_name = Some("n1".into());
        c.pod_applied(p, false, served, 0);
        c.node_applied(
            N::new("n1").alloc(&[("cpu", "4"), ("pods", "10")]).build(),
            1,
        );
        assert_eq!(c.snapshot.by_name("n1").unwrap().pods.len(), 1);
        // A heartbeat (same node) changes nothing.
        assert!(!c.node_applied(
            N::new("n1").alloc(&[("cpu", "4"), ("pods", "10")]).build(),
            2
        ));
    }

    #[test]
    fn relist_drops_what_is_gone_but_keeps_assumed_pods() {
        let mut c = cache_with_node();
        let a = P::new("a").req(&[("cpu", "1")]).build();
        let b = P::new("b").req(&[("cpu", "1")]).build();
        c.pod_applied(a.clone(), false, served, 0);
        c.pod_applied(b.clone(), false, served, 0);
        let first = c.pop(0).unwrap();
        c.assume(&first, "n1").unwrap();
        let removed = c.retain_pods(&HashSet::new(), 1);
        assert_eq!(removed, 1, "only the queued pod is dropped");
        assert!(c.still_assumed(&first.uid, "n1"));
        assert!(c.pop(1).is_none());
        assert_eq!(c.retain_nodes(&HashSet::new(), 2), 1);
        assert!(!c.still_assumed(&first.uid, "n1"), "its node is gone");
    }

    #[test]
    fn failed_binding_requeues_with_backoff() {
        let mut c = cache_with_node();
        let pod = P::new("p").req(&[("cpu", "1")]).build();
        c.pod_applied(pod.clone(), false, served, 0);
        let popped = c.pop(0).unwrap();
        let bound = c.assume(&popped, "n1").unwrap();
        c.forget(&pod.uid, 10);
        c.requeue(bound, 10);
        assert!(c.pop(10).is_none(), "backing off");
        let again = c.pop(10 + 1_000).unwrap();
        assert_eq!(again.node_name, None);
    }
}
