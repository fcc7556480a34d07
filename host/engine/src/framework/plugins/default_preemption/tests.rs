//! DefaultPreemption through the scheduler: a profile of native Filters,
//! the cache, and the scheduler's turns, as `simulate` and `run` use them.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::framework::explain::Explanation;
use crate::framework::handle::Handle;
use crate::framework::plugins::testutil::{N, P};
use crate::framework::registry;
use crate::framework::{
    Advice, Cache, Candidate, CycleContext, CycleState, Framework, Nomination, Plugin,
    PluginBundle, PluginError, Point, PreemptionAdvisor, Profile,
};
use crate::model::budget::{Budgets, DisruptionBudget};
use crate::model::{Node, Pod};
use crate::scheduler::{Binding, Collected, Failure, Scheduler, Sink};

const FILTERS: [&str; 5] = [
    "NodeUnschedulable",
    "NodePorts",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
];

fn profile(args: Value, advisor: Option<PluginBundle>) -> Profile {
    let handle = Handle::default();
    let mut profile = Profile::new("default-scheduler", None);
    for name in FILTERS {
        let b = registry::native(name).unwrap()(None, &handle).unwrap();
        if b.has(Point::PreFilter) {
            profile.enable(&b, Point::PreFilter, 0);
        }
        profile.enable(&b, Point::Filter, 0);
    }
    let dp = super::new(Some(&args), &handle).unwrap();
    profile.enable(&dp, Point::PostFilter, 0);
    if let Some(a) = advisor {
        profile.members.push(a.plugin.clone());
        profile.attach(&a);
    }
    profile
}

fn bound(node: &str, mut p: Pod) -> Pod {
    p.node_name = Some(node.into());
    p
}

struct Scene {
    scheduler: Scheduler,
    cache: Cache,
}

/// What one turn decided, and its explanation when asked for.
#[derive(Default)]
struct Out {
    c: Collected,
    /// What `preempt` answers: the evictions go on after the cycle.
    hold: bool,
    explain: bool,
    explanation: Option<Explanation>,
}

impl Sink for Out {
    fn bind(&mut self, b: Binding) {
        self.c.bind(b);
    }
    fn failed(&mut self, f: Failure) {
        self.c.failed(f);
    }
    fn preempt(&mut self, pod: &Arc<Pod>, n: &Nomination, profile: &str) -> bool {
        self.c.preempt(pod, n, profile);
        self.hold
    }
    fn explains(&self, _pod: &Pod) -> bool {
        self.explain
    }
    fn explained(&mut self, _: &Arc<Pod>, _: &str, _: Option<&str>, e: Explanation) {
        self.explanation = Some(e);
    }
}

impl Out {
    /// The nomination of a pod that fit nowhere (panics if it fit or
    /// failed otherwise).
    fn nomination(self) -> Option<Nomination> {
        if let Some(b) = self.c.binds.first() {
            panic!("{} fit on {}", b.pod().name, b.node());
        }
        let f = self.c.failures.first().expect("an attempt");
        assert_eq!(f.result(), Some("unschedulable"), "{}", f.message());
        self.c.preemptions.into_iter().next().map(|(_, n)| n)
    }
}

impl Scene {
    fn new(args: Value, nodes: Vec<Node>, placed: Vec<Pod>) -> Self {
        Self::with(profile(args, None), nodes, placed)
    }

    fn with(profile: Profile, nodes: Vec<Node>, placed: Vec<Pod>) -> Self {
        let mut cache = Cache::default();
        cache.snapshot.budgets = Budgets::complete(Vec::new());
        for n in nodes {
            cache.node_applied(n, 0);
        }
        for p in placed {
            cache.pod_applied(p, false, |_| true, 0);
        }
        Self {
            scheduler: Scheduler::new(vec![Framework::new(profile, 2, 1)]),
            cache,
        }
    }

    /// One turn of the scheduler at `now`.
    fn turn(&mut self, now: u64, explain: bool) -> Out {
        let mut out = Out {
            explain,
            ..Out::default()
        };
        assert!(self.scheduler.schedule_one(&mut self.cache, now, &mut out));
        out
    }

    /// Schedules `pod`; the nomination if it preempted (panics if it fit).
    fn preempt(&mut self, pod: Pod) -> Option<Nomination> {
        self.explain(pod, None)
    }

    fn explain(&mut self, pod: Pod, rec: Option<&mut Explanation>) -> Option<Nomination> {
        self.cache.pod_applied(pod, false, |_| true, 0);
        let mut out = self.turn(0, rec.is_some());
        if let Some(rec) = rec {
            *rec = out.explanation.take().expect("explained");
        }
        out.nomination()
    }
}

fn victims(n: &Nomination) -> Vec<&str> {
    n.victims.iter().map(|p| p.name.as_str()).collect()
}

fn cpu(name: &str, priority: i32, cpu: &str) -> P {
    P::new(name).priority(priority).req(&[("cpu", cpu)])
}

/// Asynchronous preemption (SchedulerAsyncPreemption): while the driver
/// carries out the evictions, no event brings the preemptor back (it
/// would preempt again, maybe elsewhere); once they are done it is
/// retried after its backoff, or at once when an eviction failed.
#[test]
fn a_pod_whose_preemption_is_running_is_not_retried_until_it_finishes() {
    for failed in [false, true] {
        let mut s = Scene::new(
            json!({}),
            vec![N::new("n1").build()],
            vec![bound("n1", cpu("low", 1, "3").build())],
        );
        s.cache
            .pod_applied(cpu("hi", 10, "2").build(), false, |_| true, 0);
        let mut out = Out {
            hold: true,
            ..Out::default()
        };
        assert!(s.scheduler.schedule_one(&mut s.cache, 0, &mut out));
        assert_eq!(out.c.preemptions.len(), 1);
        let uid = out.c.preemptions[0].0.uid.clone();
        assert!(s.cache.queue.is_preempting(&uid));
        // A node where it would fit appears: the pool is flushed, but the
        // preemptor stays held, however long we wait.
        s.cache.node_applied(N::new("n2").build(), 1);
        let mut idle = Out::default();
        assert!(!s.scheduler.schedule_one(&mut s.cache, 60_000, &mut idle));
        assert!(idle.c.binds.is_empty() && idle.c.failures.is_empty());
        s.scheduler
            .preemption_finished(&mut s.cache, &uid, failed, 60_000);
        assert!(!s.cache.queue.is_preempting(&uid));
        // After a failure it comes back at once; else after its backoff.
        let mut next = Out::default();
        let attempted = s.scheduler.schedule_one(&mut s.cache, 60_000, &mut next);
        assert_eq!(attempted, failed, "failed={failed}");
        if !failed {
            assert!(s
                .scheduler
                .schedule_one(&mut s.cache, 60_000 + 10_000, &mut next));
        }
        assert_eq!(next.c.binds.len(), 1, "failed={failed}");
        assert_eq!(next.c.binds[0].node(), "n2");
    }
}

/// Without asynchronous preemption (the sink answers false) nothing is
/// held: the next event retries the preemptor as before.
#[test]
fn a_synchronous_preemption_holds_nothing() {
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build()],
        vec![bound("n1", cpu("low", 1, "3").build())],
    );
    let n = s.preempt(cpu("hi", 10, "2").build()).unwrap();
    assert_eq!(victims(&n), ["low"]);
    assert!(n.in_memory.is_empty());
    s.cache.node_applied(N::new("n2").build(), 1);
    let mut out = Out::default();
    assert!(s.scheduler.schedule_one(&mut s.cache, 60_000, &mut out));
    assert_eq!(out.c.binds[0].node(), "n2");
}

#[test]
fn the_node_with_the_least_important_victims_wins() {
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build(), N::new("n2").build()],
        vec![
            bound("n1", cpu("a", 5, "3").build()),
            bound("n2", cpu("b", 1, "3").build()),
        ],
    );
    let n = s.preempt(cpu("hi", 10, "2").build()).unwrap();
    assert_eq!((n.node.as_str(), victims(&n)), ("n2", vec!["b"]));
    assert_eq!(
        s.cache.snapshot.nominator.node_of("hi"),
        Some("n2"),
        "the framework keeps the nomination"
    );
}

#[test]
fn victims_are_reprieved_most_important_first() {
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build()],
        vec![
            bound("n1", cpu("x", 1, "1").build()),
            bound("n1", cpu("y", 2, "1").build()),
            bound("n1", cpu("z", 3, "2").build()),
            bound("n1", cpu("keep", 20, "0").build()),
        ],
    );
    let n = s.preempt(cpu("hi", 10, "2").build()).unwrap();
    assert_eq!(victims(&n), ["y", "x"]);
}

fn budget(allowed: i32) -> DisruptionBudget {
    DisruptionBudget::from_k8s(
        &serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        }))
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn budgets_steer_victims_and_nodes() {
    let placed = || {
        vec![
            bound("n1", cpu("db-1", 1, "2").labels(&[("app", "db")]).build()),
            bound("n1", cpu("web-1", 1, "2").build()),
            bound("n2", cpu("db-2", 1, "4").labels(&[("app", "db")]).build()),
        ]
    };
    let nodes = || vec![N::new("n1").build(), N::new("n2").build()];
    // No disruption allowed: on n1 the web pod goes and the db pod is
    // reprieved; n2 could only evict db-2 (a violation), so n1 wins.
    let mut s = Scene::new(json!({}), nodes(), placed());
    s.cache.snapshot.budgets = Budgets::complete(vec![budget(0)]);
    let n = s.preempt(cpu("hi", 10, "2").build()).unwrap();
    assert_eq!((n.node.as_str(), victims(&n)), ("n1", vec!["web-1"]));
    // Needing all of n1 too: both nodes violate once; n1 has more victims.
    let mut s = Scene::new(json!({}), nodes(), placed());
    s.cache.snapshot.budgets = Budgets::complete(vec![budget(0)]);
    let n = s.preempt(cpu("hi", 10, "4").build()).unwrap();
    assert_eq!((n.node.as_str(), victims(&n)), ("n2", vec!["db-2"]));
    // Budgets not read yet: no preemption.
    let mut s = Scene::new(json!({}), nodes(), placed());
    s.cache.snapshot.budgets = Budgets::default();
    assert!(s.preempt(cpu("hi", 10, "2").build()).is_none());
}

/// 1.37 (since 1.29) sorts the victims by importance after the reprieve,
/// so the rule "lowest highest-victim priority" compares the true
/// highest: n1's victims are db-1 (priority 1, violating its budget) and
/// x (5); n2's db-2 (3, violating) and y (2). Both violate once; n2's
/// highest (3) is below n1's (5). 1.20 took the first victim, the
/// violating one, as the highest (1 on n1) and chose n1.
#[test]
fn the_highest_victim_is_the_most_important_after_the_reprieve() {
    let db = |name: &str, prio: i32| cpu(name, prio, "2").labels(&[("app", "db")]).build();
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build(), N::new("n2").build()],
        vec![
            bound("n1", db("db-1", 1)),
            bound("n1", cpu("x", 5, "2").build()),
            bound("n2", db("db-2", 3)),
            bound("n2", cpu("y", 2, "2").build()),
        ],
    );
    s.cache.snapshot.budgets = Budgets::complete(vec![budget(0)]);
    let n = s.preempt(cpu("hi", 10, "4").build()).unwrap();
    assert_eq!((n.node.as_str(), victims(&n)), ("n2", vec!["db-2", "y"]));
}

#[test]
fn never_policy_and_hopeless_pods_do_not_preempt() {
    let nodes = || vec![N::new("n1").build()];
    let placed = || vec![bound("n1", cpu("low", 1, "4").build())];
    let mut s = Scene::new(json!({}), nodes(), placed());
    let never = cpu("hi", 10, "2")
        .spec("preemptionPolicy", json!("Never"))
        .build();
    assert!(s.preempt(never).is_none());
    let mut s = Scene::new(json!({}), nodes(), placed());
    assert!(s.preempt(cpu("huge", 10, "8").build()).is_none());
    // Equal priority is not lower: no victim.
    let mut s = Scene::new(json!({}), nodes(), placed());
    assert!(s.preempt(cpu("same", 1, "2").build()).is_none());
}

fn anti(app: &str) -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": app}}}]}})
}

#[test]
fn anti_affinity_that_only_eviction_satisfies() {
    let node = |n: &str| N::new(n).labels(&[("kubernetes.io/hostname", n)]).build();
    let mut s = Scene::new(
        json!({}),
        vec![node("n1"), node("n2")],
        vec![
            bound("n1", cpu("x-low", 1, "1").labels(&[("app", "x")]).build()),
            bound("n1", cpu("other", 1, "1").build()),
            bound("n2", cpu("x-high", 50, "1").labels(&[("app", "x")]).build()),
        ],
    );
    let pod = cpu("hi", 10, "1").affinity(anti("x")).build();
    let n = s.preempt(pod).unwrap();
    // Only the pod the anti-affinity names goes; the other is reprieved.
    assert_eq!((n.node.as_str(), victims(&n)), ("n1", vec!["x-low"]));
    // Existing pods' anti-affinity towards the preemptor counts too.
    let mut s = Scene::new(
        json!({}),
        vec![node("n1")],
        vec![bound(
            "n1",
            cpu("hater", 1, "1")
                .labels(&[("app", "h")])
                .affinity(anti("me"))
                .build(),
        )],
    );
    let n = s
        .preempt(cpu("hi", 10, "1").labels(&[("app", "me")]).build())
        .unwrap();
    assert_eq!(victims(&n), ["hater"]);
}

#[test]
fn spread_what_ifs_count_victims_leaving_and_returning() {
    let node = |n: &str, z: &str| N::new(n).labels(&[("zone", z)]).build();
    let spread = |skew: i32| {
        json!([{"maxSkew": skew, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "s"}}}])
    };
    let placed = || {
        vec![
            bound("a1", cpu("s1", 1, "1").labels(&[("app", "s")]).build()),
            bound("a1", cpu("s2", 1, "1").labels(&[("app", "s")]).build()),
            bound("b1", cpu("full", 100, "4").build()),
        ]
    };
    for (skew, expect) in [(1, vec!["s1", "s2"]), (2, vec!["s2"])] {
        let mut s = Scene::new(json!({}), vec![node("a1", "a"), node("b1", "b")], placed());
        let pod = cpu("hi", 10, "1")
            .labels(&[("app", "s")])
            .spec("topologySpreadConstraints", spread(skew))
            .build();
        let n = s.preempt(pod).unwrap();
        let mut got = victims(&n);
        got.sort();
        assert_eq!((n.node.as_str(), got), ("a1", expect), "maxSkew {skew}");
    }
}

#[test]
fn nominated_room_is_kept_for_the_preemptor() {
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build()],
        vec![bound("n1", cpu("low", 1, "3").build())],
    );
    let n = s.preempt(cpu("hi", 10, "3").build()).unwrap();
    // The victim goes (as the caller would evict it).
    s.cache.pod_deleted(&n.victims[0].uid, 1);
    // A lower-priority pod that would take the room does not get it...
    s.cache
        .pod_applied(cpu("sneak", 5, "2").build(), false, |_| true, 1);
    let out = s.turn(1, false);
    assert_eq!(out.c.failures[0].pod.name, "sneak");
    assert!(out.nomination().is_none(), "nothing lower than 5 to evict");
    // ...an equal-or-higher one that fits beside it would, and the
    // preemptor goes where it was nominated.
    let out = s.turn(1_000_000, false);
    let b = &out.c.binds[0];
    assert_eq!((b.pod().name.as_str(), b.node()), ("hi", "n1"));
    assert!(
        s.cache.snapshot.nominator.is_empty(),
        "assumed: no longer nominated"
    );
}

#[test]
fn a_higher_priority_preemptor_displaces_a_lower_nomination() {
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build()],
        vec![bound("n1", cpu("low", 1, "3").build())],
    );
    let first = s.preempt(cpu("mid", 5, "3").build()).unwrap();
    assert_eq!(first.node, "n1");
    // Still terminating on n1? No: the victim is not deleted yet, and a
    // pod of higher priority comes; it may preempt the same victim and
    // takes the nomination from the lower one.
    let second = s.preempt(cpu("top", 9, "3").build()).unwrap();
    assert_eq!(second.node, "n1");
    assert_eq!(second.displaced.len(), 1);
    assert_eq!(second.displaced[0].name, "mid");
    assert_eq!(s.cache.snapshot.nominator.node_of("mid"), None);
    assert_eq!(s.cache.snapshot.nominator.node_of("top"), Some("n1"));
    assert_eq!(
        s.cache.pending_pod("mid").unwrap().nominated_node,
        None,
        "its status nomination is cleared"
    );
}

#[test]
fn a_preemptor_waits_while_its_victims_terminate() {
    let mut s = Scene::new(
        json!({}),
        vec![N::new("n1").build(), N::new("n2").build()],
        vec![
            bound("n1", cpu("low1", 1, "3").build()),
            bound("n2", cpu("low2", 2, "3").build()),
        ],
    );
    let n = s.preempt(cpu("hi", 10, "3").build()).unwrap();
    assert_eq!(n.node, "n1");
    // The eviction is graceful: the victim is terminating, still there.
    let mut terminating = (*n.victims[0]).clone();
    terminating.terminating = true;
    s.cache.pod_applied(terminating, false, |_| true, 1);
    assert_eq!(s.cache.snapshot.by_name("n1").unwrap().pods.len(), 1);
    let out = s.turn(1_000_000, false);
    assert_eq!(out.c.failures[0].pod.name, "hi");
    assert!(out.nomination().is_none(), "no second preemption (of low2)");
}

struct Veto(&'static str);

impl Plugin for Veto {
    fn name(&self) -> &str {
        "Veto"
    }
}

impl PreemptionAdvisor for Veto {
    fn advise(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
        candidates: &[Candidate],
    ) -> Result<Option<Advice>, PluginError> {
        assert_eq!(candidates.len(), 2, "every candidate, ranked");
        Ok(Some(Advice {
            vetoed: vec![self.0.to_string()],
            ranking: vec![],
        }))
    }
}

#[test]
fn advisors_veto_and_the_explanation_says_why() {
    let veto = Arc::new(Veto("b"));
    let bundle = PluginBundle::new(veto.clone()).with_preemption_advisor(&veto);
    let mut s = Scene::with(
        profile(json!({}), Some(bundle)),
        vec![N::new("n1").build(), N::new("n2").build()],
        vec![
            bound("n1", cpu("a", 5, "3").build()),
            bound("n2", cpu("b", 1, "3").build()),
        ],
    );
    let mut e = Explanation::default();
    let n = s.explain(cpu("hi", 10, "2").build(), Some(&mut e)).unwrap();
    assert_eq!(victims(&n), ["a"], "b was vetoed");
    let p = e.preemption.unwrap();
    assert_eq!(p.nominated.as_deref(), Some("n1"));
    assert_eq!(p.candidates.len(), 1);
    assert!(
        p.summary.contains("Veto dropped 1 candidate(s)"),
        "{}",
        p.summary
    );
}

#[test]
fn deletion_cost_breaks_ties_when_asked() {
    // Upstream's rules tie; the cheaper victim is on n2, then on n1.
    let placed = |n1_cost, n2_cost| {
        vec![
            bound("n1", cpu("v1", 1, "3").build_with_cost(n1_cost)),
            bound("n2", cpu("v2", 1, "3").build_with_cost(n2_cost)),
        ]
    };
    let nodes = || vec![N::new("n1").build(), N::new("n2").build()];
    let chosen = |args: Value, costs: (i32, i32)| {
        let mut s = Scene::new(args, nodes(), placed(costs.0, costs.1));
        let mut e = Explanation::default();
        let n = s.explain(cpu("hi", 10, "2").build(), Some(&mut e)).unwrap();
        (n.node, e.preemption.unwrap().candidates)
    };
    // Off: the first found wins, whatever the costs.
    let (a, why) = chosen(json!({}), (100, -5));
    let (b, _) = chosen(json!({}), (-5, 100));
    assert_eq!(a, b);
    assert!(why[1]
        .behind_because
        .as_deref()
        .unwrap()
        .starts_with("found later"));
    // On: the cheaper victim's node.
    let (a, why) = chosen(json!({"preferLowerDeletionCost": true}), (100, -5));
    assert_eq!(a, "n2");
    assert_eq!(
        why[1].behind_because.as_deref(),
        Some("a higher summed pod-deletion-cost")
    );
    let (b, _) = chosen(json!({"preferLowerDeletionCost": true}), (-5, 100));
    assert_eq!(b, "n1");
}

trait WithCost {
    fn build_with_cost(self, cost: i32) -> Pod;
}

impl WithCost for P {
    fn build_with_cost(self, cost: i32) -> Pod {
        let mut p = self.build();
        p.annotations.insert(
            crate::model::priority::DELETION_COST.into(),
            cost.to_string(),
        );
        p
    }
}
