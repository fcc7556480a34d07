//! The loop over plugins of every kind: PreEnqueue holding pods, a
//! QueueSort of a plugin's, an informer's activations, a binding step of a
//! plugin's own, and the end of a binding cycle.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::framework::plugins::testutil::{N, P};
use crate::framework::points::Release;
use crate::framework::{
    BindAction, InformerPlugin, Plugin, PluginBundle, PluginError, Point, PreBindPlugin,
    PreEnqueuePlugin, Profile, QueueSortPlugin, SortKey,
};
use crate::model::Pod;

/// Holds pods labelled `hold=yes` until opened; a cluster event may open
/// it, or, for a pod labelled `claim=NAME`, only a change of the claim
/// `default/NAME`.
/// Counts the pods it is asked about.
#[derive(Default)]
struct Hold {
    open: AtomicBool,
    asked: AtomicUsize,
}

impl Plugin for Hold {
    fn name(&self) -> &str {
        "Hold"
    }
}

impl PreEnqueuePlugin for Hold {
    fn pre_enqueue(&self, pod: &Pod) -> Result<(), String> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let held = pod.labels.get("hold").is_some_and(|v| v == "yes");
        if held && !self.open.load(Ordering::Relaxed) {
            Err("held".into())
        } else {
            Ok(())
        }
    }

    fn released_by(&self, pod: &Pod) -> Release {
        match pod.labels.get("claim") {
            Some(key) => Release::Object {
                kind: "ResourceClaim",
                key: format!("default/{key}"),
            },
            None => Release::AnyEvent,
        }
    }
}

/// Sorts pods by their `order` label, and activates pods on request.
#[derive(Default)]
struct ByLabel {
    activate: Mutex<HashSet<String>>,
}

impl Plugin for ByLabel {
    fn name(&self) -> &str {
        "ByLabel"
    }
}

impl QueueSortPlugin for ByLabel {
    fn sort_key(&self, pod: &Pod) -> Option<SortKey> {
        let order = pod.labels.get("order")?.parse().ok()?;
        Some(SortKey {
            time_ms: order,
            group: String::new(),
        })
    }
}

impl InformerPlugin for ByLabel {
    fn pods_to_activate(&self, _now_ms: u64) -> HashSet<String> {
        std::mem::take(&mut self.activate.lock())
    }
}

/// A binding step of a plugin's own.
#[derive(Debug, Clone, PartialEq)]
struct Stamp(String);

struct Stamper;

impl Plugin for Stamper {
    fn name(&self) -> &str {
        "Stamper"
    }
}

impl PreBindPlugin for Stamper {
    fn pre_bind(
        &self,
        pod: &Pod,
        _state: &CycleState,
        node: &str,
    ) -> Result<Vec<BindAction>, PluginError> {
        Ok(vec![BindAction::plugin(Stamp(format!(
            "{}@{node}",
            pod.name
        )))])
    }
}

struct World {
    scheduler: Scheduler,
    cache: Cache,
    hold: Arc<Hold>,
    sort: Arc<ByLabel>,
}

fn world(nodes: usize) -> World {
    let hold = Arc::new(Hold::default());
    let sort = Arc::new(ByLabel::default());
    let fit = crate::framework::registry::native("NodeResourcesFit").unwrap()(
        None,
        &crate::framework::handle::Handle::default(),
    )
    .unwrap();
    let mut profile = Profile::new("default-scheduler", None);
    profile.enable(&fit, Point::Filter, 0);
    let gates = crate::framework::registry::native("SchedulingGates").unwrap()(
        None,
        &crate::framework::handle::Handle::default(),
    )
    .unwrap();
    profile.enable(&gates, Point::PreEnqueue, 0);
    profile.enable(
        &PluginBundle::new(hold.clone()).with_pre_enqueue(&hold),
        Point::PreEnqueue,
        0,
    );
    let sorting = PluginBundle::new(sort.clone())
        .with_queue_sort(&sort)
        .with_informer(&sort);
    profile.enable(&sorting, Point::QueueSort, 0);
    profile.attach(&sorting);
    let stamper = Arc::new(Stamper);
    profile.enable(
        &PluginBundle::new(stamper.clone()).with_pre_bind(&stamper),
        Point::PreBind,
        0,
    );
    let scheduler = Scheduler::new(vec![Framework::new(profile, 1, 1)]);
    let mut cache = scheduler.new_cache();
    for i in 0..nodes {
        cache.node_applied(N::new(&format!("n{i}")).alloc(&[("cpu", "1")]).build(), 0);
    }
    World {
        scheduler,
        cache,
        hold,
        sort,
    }
}

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    P::new(name).labels(labels).req(&[("cpu", "1")]).build()
}

impl World {
    fn add(&mut self, p: Pod) {
        self.scheduler.pod_applied(&mut self.cache, p, false, 0);
    }

    /// Turns until nothing is due; the names of the pods sent to binding.
    fn run(&mut self, now: u64) -> Vec<String> {
        let mut out = Collected::default();
        while self.scheduler.schedule_one(&mut self.cache, now, &mut out) {}
        out.binds.iter().map(|b| b.pod().name.clone()).collect()
    }
}

#[test]
fn pre_enqueue_holds_a_pod_until_a_cluster_event_lets_it_through() {
    let mut w = world(2);
    w.add(pod("held", &[("hold", "yes")]));
    assert!(w.run(0).is_empty(), "held at PreEnqueue");
    assert_eq!(w.cache.queue.lengths().gated, 1);
    w.hold.open.store(true, Ordering::Relaxed);
    assert!(w.run(0).is_empty(), "nothing re-checks it without an event");
    w.cache.queue.on_cluster_event(0);
    assert_eq!(w.run(0), ["held"]);
}

/// A pod held until one object changes is asked again only when that
/// object changes (or its kind is listed again), never on other events;
/// the pods any event may release are asked on every event.
#[test]
fn pods_held_for_one_object_are_asked_again_only_when_it_changes() {
    let mut w = world(2);
    w.add(pod("waits", &[("hold", "yes"), ("claim", "a")]));
    w.add(pod("any", &[("hold", "yes")]));
    assert!(w.run(0).is_empty());
    assert_eq!(w.cache.queue.lengths().gated, 2);
    let asked = || w.hold.asked.load(Ordering::Relaxed);
    let before = asked();
    w.cache
        .queue
        .on_object_event("ResourceClaim", Some("default/b"));
    w.cache
        .queue
        .on_object_event("DeviceClass", Some("default/a"));
    assert_eq!(asked(), before, "other objects do not ask again");
    w.cache.queue.on_cluster_event(0);
    assert_eq!(asked(), before + 1, "a cluster event asks about `any` only");
    w.cache
        .queue
        .on_object_event("ResourceClaim", Some("default/a"));
    assert_eq!(asked(), before + 2, "the claim's change asks about `waits`");
    assert_eq!(w.cache.queue.lengths().gated, 2, "still held: not opened");
    w.hold.open.store(true, Ordering::Relaxed);
    w.cache.queue.on_object_event("ResourceClaim", None);
    assert_eq!(w.run(0), ["waits"], "listing the kind again asks about it");
    w.cache.queue.on_cluster_event(0);
    assert_eq!(w.run(0), ["any"]);
    assert_eq!(w.cache.queue.lengths().gated, 0);
}

#[test]
fn scheduling_gates_wait_for_the_pods_own_update() {
    let mut w = world(1);
    let gated = P::new("gated")
        .spec(
            "schedulingGates",
            serde_json::json!([{"name": "kueue.x-k8s.io/admission"}]),
        )
        .build();
    w.add(gated.clone());
    w.cache.queue.on_cluster_event(0);
    assert!(w.run(0).is_empty(), "a cluster event does not lift a gate");
    let mut ungated = gated;
    ungated.scheduling_gates.clear();
    w.add(ungated);
    assert_eq!(w.run(0), ["gated"]);
}

#[test]
fn the_queue_sorts_by_the_profiles_queue_sort_and_activates_what_informers_ask() {
    let mut w = world(3);
    for (name, order) in [("c", "3"), ("a", "1"), ("b", "2")] {
        w.add(pod(name, &[("order", order)]));
    }
    assert_eq!(w.run(0), ["a", "b", "c"]);
    // A pod that fit nowhere waits in the unschedulable pool until the
    // plugin activates it.
    w.add(pod("late", &[("order", "0")]));
    assert!(w.run(0).is_empty());
    w.scheduler.pod_deleted(&mut w.cache, "a", 0);
    assert!(w.run(0).is_empty(), "still backing off");
    w.sort.activate.lock().insert("late".into());
    assert_eq!(w.run(0), ["late"], "activated now, not after its backoff");
}

#[test]
fn a_plugins_binding_step_travels_with_the_binding_and_a_failed_binding_retries() {
    let mut w = world(1);
    w.add(pod("p", &[]));
    let mut out = Collected::default();
    assert!(w.scheduler.schedule_one(&mut w.cache, 0, &mut out));
    let b = out.binds.pop().expect("bound");
    assert_eq!(
        b.assumption.actions[0].get::<Stamp>(),
        Some(&Stamp("p@n0".into()))
    );
    assert_eq!(b.assumption.actions[1], BindAction::Bind);
    assert_eq!(w.cache.assumed_count(), 1);
    // The binding failed: the capacity is free again and the pod backs off.
    w.scheduler
        .binding_finished(&mut w.cache, &b, BindingResult::Retry, 0);
    assert_eq!(w.cache.assumed_count(), 0);
    assert!(w.run(0).is_empty(), "backing off");
    assert_eq!(w.run(10_000), ["p"]);
}
