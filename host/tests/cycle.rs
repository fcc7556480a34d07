//! The scheduling cycle through the library: queue order, reservations
//! seen by later pods, FitError messages, retries after cluster events,
//! the seeded tie-break, percentageOfNodesToScore, unsupported pods,
//! several profiles, and the GPU example with the built-in wasm plugins.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use common::*;
use wasmsched::config::{self, ConfigFile};
use wasmsched::framework::queue::{SchedulingQueue, INITIAL_BACKOFF_MS, MAX_BACKOFF_MS};
use wasmsched::framework::{Outcome, Snapshot};
use wasmsched::manifest;
use wasmsched::model::Pod;
use wasmsched::simulate;

// ---------------------------------------------------------------- queue

fn arc(p: PodB) -> Arc<Pod> {
    Arc::new(p.build())
}

fn names(popped: impl IntoIterator<Item = Arc<Pod>>) -> Vec<String> {
    popped.into_iter().map(|p| p.name.clone()).collect()
}

#[test]
fn queue_pops_by_priority_then_age_then_arrival() {
    let mut q = SchedulingQueue::new();
    q.add(arc(PodB::new("low-old").priority(0).created_at(1)));
    q.add(arc(PodB::new("high-young").priority(100).created_at(50)));
    q.add(arc(PodB::new("mid-young").priority(10).created_at(40)));
    q.add(arc(PodB::new("mid-old").priority(10).created_at(2)));
    q.add(arc(PodB::new("low-young").priority(0).created_at(30)));
    q.add(arc(PodB::new("negative").priority(-5).created_at(0)));
    // Same priority and age: first added first.
    q.add(arc(PodB::new("low-old-twin-b").priority(0).created_at(1)));
    let mut got = Vec::new();
    while let Some(p) = q.pop(0) {
        got.push(p);
    }
    assert_eq!(
        names(got),
        [
            "high-young",
            "mid-old",
            "mid-young",
            "low-old",
            "low-old-twin-b",
            "low-young",
            "negative"
        ]
    );
}

#[test]
fn backoff_doubles_from_one_second_and_caps_at_ten() {
    assert_eq!(INITIAL_BACKOFF_MS, 1_000);
    assert_eq!(MAX_BACKOFF_MS, 10_000);
    let got: Vec<u64> = (1..=7).map(SchedulingQueue::backoff_ms).collect();
    assert_eq!(got, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000]);
    assert_eq!(SchedulingQueue::backoff_ms(0), 1_000);
    assert_eq!(SchedulingQueue::backoff_ms(u32::MAX), 10_000);
}

#[test]
fn unschedulable_pods_return_only_after_a_cluster_event_and_their_backoff() {
    let mut q = SchedulingQueue::new();
    q.add(arc(PodB::new("p")));
    let p = q.pop(0).unwrap();
    assert_eq!(q.attempts(&p.uid), 1);
    q.add_unschedulable(p);
    assert_eq!(q.lengths().unschedulable, 1);
    // No event: the pod stays parked however long we wait.
    assert!(q.pop(1_000_000).is_none());
    assert_eq!(q.next_backoff_ready(), None);

    // Event at t=5000: backoff after 1 attempt is 1 s, counted from then.
    q.on_cluster_event(5_000);
    let l = q.lengths();
    assert_eq!((l.active, l.backoff, l.unschedulable), (0, 1, 0));
    assert_eq!(q.next_backoff_ready(), Some(6_000));
    assert!(q.pop(5_999).is_none());
    let p = q.pop(6_000).expect("back after its backoff");
    assert_eq!(p.name, "p");
    assert_eq!(q.attempts(&p.uid), 2);

    // Second failure: 2 s.
    q.add_unschedulable(p);
    q.on_cluster_event(10_000);
    assert_eq!(q.next_backoff_ready(), Some(12_000));
    assert!(q.pop(11_999).is_none());
    let p = q.pop(12_000).unwrap();
    assert_eq!(q.attempts(&p.uid), 3);

    // Scheduled: forgotten.
    q.done(&p.uid);
    assert_eq!(q.attempts(&p.uid), 0);
    assert_eq!(q.lengths(), Default::default());
}

#[test]
fn backed_off_pods_rejoin_the_active_queue_in_priority_order() {
    let mut q = SchedulingQueue::new();
    for (n, prio) in [("a", 1), ("b", 3), ("c", 2)] {
        q.add(arc(PodB::new(n).priority(prio)));
    }
    let popped: Vec<_> = std::iter::from_fn(|| q.pop(0)).collect();
    for p in popped {
        q.add_unschedulable(p);
    }
    q.add(arc(PodB::new("fresh").priority(0)));
    q.on_cluster_event(0);
    // Before the backoff ends only the fresh pod is available.
    assert_eq!(q.pop(999).unwrap().name, "fresh");
    assert!(q.pop(999).is_none());
    let back: Vec<_> = std::iter::from_fn(|| q.pop(1_000)).collect();
    assert_eq!(names(back), ["b", "c", "a"]);
}

#[test]
fn done_removes_a_pod_from_backoff() {
    let mut q = SchedulingQueue::new();
    q.add(arc(PodB::new("p")));
    let p = q.pop(0).unwrap();
    let uid = p.uid.clone();
    q.add_unschedulable(p);
    q.on_cluster_event(0);
    q.done(&uid);
    assert_eq!(q.next_backoff_ready(), None);
    assert!(q.pop(u64::MAX).is_none());
}

// ------------------------------------------------------- queue in a run

#[test]
fn higher_priority_wins_the_last_slot_even_when_younger() {
    let s = build(&native_config(), 0);
    let nodes = vec![NodeB::new("only").alloc(&[("cpu", "2")]).build()];
    let pods = vec![
        PodB::new("old-low")
            .cpu("2")
            .priority(0)
            .created_at(1)
            .build(),
        PodB::new("young-high")
            .cpu("2")
            .priority(1000)
            .created_at(59)
            .build(),
    ];
    let r = simulate(&s, nodes, pods);
    assert_eq!(scheduled_order(&r), ["default/young-high"]);
    assert_eq!(r.scheduled[0].node, "only");
    assert_eq!(
        failures(&r),
        [(
            "default/old-low".to_string(),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
             1 No preemption victims found for incoming pod."
                .to_string()
        )]
        .into()
    );
}

#[test]
fn equal_priority_the_older_wins_whatever_the_manifest_order() {
    let s = build(&native_config(), 0);
    let nodes = vec![NodeB::new("only").alloc(&[("cpu", "2")]).build()];
    let pods = vec![
        PodB::new("young")
            .cpu("2")
            .priority(5)
            .created("2026-03-01T00:00:00Z")
            .build(),
        PodB::new("old")
            .cpu("2")
            .priority(5)
            .created("2026-02-01T00:00:00Z")
            .build(),
    ];
    let r = simulate(&s, nodes, pods);
    assert_eq!(scheduled_order(&r), ["default/old"]);
    assert_eq!(failures(&r).keys().collect::<Vec<_>>(), ["default/young"]);
}

#[test]
fn unschedulable_pods_are_reported_by_priority_then_age() {
    let s = build(&native_config(), 0);
    let nodes = vec![NodeB::new("only").alloc(&[("cpu", "1")]).build()];
    let pods = vec![
        PodB::new("c").cpu("2").priority(0).created_at(1).build(),
        PodB::new("a").cpu("2").priority(0).created_at(3).build(),
        PodB::new("b").cpu("2").priority(9).created_at(5).build(),
    ];
    let r = simulate(&s, nodes, pods);
    let order: Vec<&str> = r.unschedulable.iter().map(|u| u.pod.as_str()).collect();
    assert_eq!(order, ["b", "c", "a"]);
}

// --------------------------------------------------------- reservations

#[test]
fn each_placement_is_seen_by_the_next_pod() {
    let s = build(&native_config(), 0);
    let nodes = vec![NodeB::new("n1")
        .alloc(&[("cpu", "4"), ("memory", "8Gi")])
        .build()];
    let pods = (1..=3)
        .map(|i| PodB::new(&format!("p{i}")).cpu("2").created_at(i).build())
        .collect();
    let r = simulate(&s, nodes, pods);
    assert_eq!(scheduled_order(&r), ["default/p1", "default/p2"]);
    assert!(
        r.scheduled
            .iter()
            .all(|s| s.node == "n1" && s.score.is_none()),
        "{:?}",
        r.scheduled
    );
    assert_eq!(r.unschedulable.len(), 1);
    assert_eq!(r.unschedulable[0].pod, "p3");
    assert_eq!(
        r.unschedulable[0].message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 No preemption victims found for incoming pod."
    );
    assert_eq!(r.unschedulable[0].profile, SCHED);
}

#[test]
fn bound_pods_use_capacity_and_finished_pods_do_not() {
    let s = build(&native_config(), 0);
    let nodes = vec![NodeB::new("n1").alloc(&[("cpu", "4")]).build()];
    let mut done = PodB::new("finished").cpu("3").bound_to("n1");
    done.0["status"]["phase"] = json!("Succeeded");
    let pods = vec![
        PodB::new("running").cpu("2").bound_to("n1").build(),
        done.build(),
        PodB::new("fits").cpu("2").created_at(1).build(),
        PodB::new("too-much").cpu("1").created_at(2).build(),
    ];
    let r = simulate(&s, nodes, pods);
    assert_eq!(scheduled_order(&r), ["default/fits"]);
    assert_eq!(
        failures(&r)["default/too-much"],
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 No preemption victims found for incoming pod."
    );
}

// ------------------------------------------------------------- FitError

#[test]
fn fit_error_of_a_mixed_cluster_is_sorted_as_strings() {
    let s = build(&native_config(), 0);
    let mut nodes = vec![
        NodeB::new("tainted")
            .label("disk", "ssd")
            .taint("dedicated", "batch", "NoSchedule")
            .build(),
        NodeB::new("cordoned-1")
            .label("disk", "ssd")
            .cordon()
            .build(),
        NodeB::new("cordoned-2")
            .label("disk", "ssd")
            .cordon()
            .build(),
        NodeB::new("hdd").label("disk", "hdd").build(),
    ];
    for i in 0..10 {
        nodes.push(
            NodeB::new(&format!("small-{i}"))
                .label("disk", "ssd")
                .alloc(&[("memory", "1Gi")])
                .build(),
        );
    }
    let pod = PodB::new("picky")
        .req(&[("cpu", "1"), ("memory", "4Gi")])
        .node_selector(&[("disk", "ssd")])
        .build();
    let r = simulate(&s, nodes, vec![pod]);
    assert!(r.scheduled.is_empty());
    // "1 node(s)..." < "10 Insufficient..." < "2 node(s)..." as strings.
    assert_eq!(
        r.unschedulable[0].message,
        "0/14 nodes are available: \
         1 node(s) didn't match Pod's node affinity/selector, \
         1 node(s) had untolerated taint(s), \
         10 Insufficient memory, \
         2 node(s) were unschedulable. \
         preemption: 0/14 nodes are available: \
         14 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_node_short_of_several_resources_counts_each() {
    let s = build(&native_config(), 0);
    let nodes = vec![
        NodeB::new("tiny")
            .alloc(&[("cpu", "1"), ("memory", "1Gi")])
            .build(),
        NodeB::new("no-mem")
            .alloc(&[("cpu", "8"), ("memory", "1Gi")])
            .build(),
    ];
    let pod = PodB::new("big")
        .req(&[("cpu", "2"), ("memory", "2Gi")])
        .build();
    let r = simulate(&s, nodes, vec![pod]);
    assert_eq!(
        r.unschedulable[0].message,
        "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn no_nodes_at_all() {
    let s = build(&native_config(), 0);
    let r = simulate(&s, vec![], vec![PodB::new("p").build()]);
    assert_eq!(
        r.unschedulable[0].message,
        "0/0 nodes are available: no nodes available to schedule pods."
    );
}

/// Required node affinity on `matchFields metadata.name In` terms.
fn to_nodes(terms: serde_json::Value) -> serde_json::Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}})
}

fn named(names: &[&str]) -> serde_json::Value {
    json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]})
}

/// Upstream's PreFilterResult: a pod that names its nodes is filtered on
/// them only; the others fail as NodeAffinity's PreFilter left them out
/// (unresolvable, so preemption does not try them either).
#[test]
fn nodes_named_by_affinity_are_the_only_ones_filtered() {
    let s = build(&native_config(), 0);
    let nodes = vec![
        NodeB::new("n1").alloc(&[("cpu", "3")]).build(),
        NodeB::new("n2").alloc(&[("cpu", "8")]).build(),
        NodeB::new("n3").alloc(&[("cpu", "8")]).build(),
    ];
    let pod = |name: &str, terms: serde_json::Value| {
        PodB::new(name)
            .cpu("2")
            .spec("affinity", to_nodes(terms))
            .build()
    };
    let r = simulate(
        &s,
        nodes,
        vec![
            PodB::new("resident").cpu("2").bound_to("n1").build(),
            pod("on-n1", json!([named(&["n1"])])),
            pod("on-n3-or-missing", json!([named(&["n3", "n9"])])),
            pod("missing", json!([named(&["n9"])])),
            // One term whose two requirements intersect to no name.
            pod(
                "conflict",
                json!([{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                    {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                ]}]),
            ),
        ],
    );
    assert_eq!(
        placements(&r)
            .get("default/on-n3-or-missing")
            .map(String::as_str),
        Some("n3")
    );
    let f = failures(&r);
    assert_eq!(
        f["default/on-n1"],
        "0/3 nodes are available: 1 Insufficient cpu, \
         2 node(s) didn't satisfy plugin(s) [NodeAffinity]. \
         preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
         2 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        f["default/missing"],
        "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeAffinity]. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        f["default/conflict"],
        // PreFilter's own rejection, and DefaultPreemption's `not found`
        // (see its after_pre_filter_rejection).
        "0/3 nodes are available: pod affinity terms conflict. not found"
    );
}

// ------------------------------------------------- retry after an event

fn leader_and_follower() -> (Vec<wasmsched::model::Node>, Vec<Pod>) {
    let nodes = vec![
        NodeB::new("n1").build(),
        NodeB::new("n2").build(),
        NodeB::new("n3").build(),
    ];
    let pods = vec![
        // Goes first (older) and needs the leader, which comes later.
        PodB::new("follower")
            .labels(&[("app", "follower")])
            .created_at(1)
            .requires_affinity("app", "leader", "kubernetes.io/hostname")
            .build(),
        PodB::new("leader")
            .labels(&[("app", "leader")])
            .created_at(2)
            .build(),
    ];
    (nodes, pods)
}

#[test]
fn required_affinity_to_a_later_pod_is_met_on_retry() {
    let (nodes, pods) = leader_and_follower();
    // Alone, the follower fits nowhere.
    let s = build(&native_config(), 0);
    let mut snap = Snapshot::default();
    for n in nodes.clone() {
        snap.set_node(n);
    }
    match s.profiles[0].schedule(&pods[0], &snap) {
        Outcome::Unschedulable(f) => assert_eq!(
            f.message(),
            "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
        ),
        o => panic!("{o:?}"),
    }

    for seed in 0..4 {
        let s = build(&native_config(), seed);
        let r = simulate(&s, nodes.clone(), pods.clone());
        assert!(r.unschedulable.is_empty(), "{:?}", r.unschedulable);
        assert_eq!(scheduled_order(&r), ["default/leader", "default/follower"]);
        let p = placements(&r);
        assert_eq!(p["default/follower"], p["default/leader"], "seed {seed}");
    }
}

#[test]
fn affinity_to_a_pod_that_never_comes_stays_unschedulable() {
    let s = build(&native_config(), 0);
    let nodes = vec![NodeB::new("n1").build(), NodeB::new("n2").build()];
    let pods = vec![
        PodB::new("lonely")
            .created_at(1)
            .requires_affinity("app", "nobody", "kubernetes.io/hostname")
            .build(),
        PodB::new("other").created_at(2).build(),
    ];
    let r = simulate(&s, nodes, pods);
    assert_eq!(scheduled_order(&r), ["default/other"]);
    assert_eq!(
        failures(&r)["default/lonely"],
        "0/2 nodes are available: 2 node(s) didn't match pod affinity rules. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn explain_of_a_retried_pod_names_where_it_went() {
    let (nodes, pods) = leader_and_follower();
    let s = build(&native_config(), 0);
    let opts = simulate::Options {
        all_pods: false,
        explain: Some("default/follower".into()),
        metrics: None,
    };
    let r = simulate::run(&s, manifests(nodes, pods), &opts).unwrap();
    let placed = placements(&r)["default/follower"].clone();
    let e = r.explain.expect("explained");
    assert_eq!(
        e.node.as_deref(),
        Some(placed.as_str()),
        "report says follower is on {placed}"
    );
}

// ------------------------------------------------------------ tie-break

fn tie_run(seed: u64) -> Vec<(String, String)> {
    let s = build(&native_config(), seed);
    let nodes = identical_nodes(8, "4", "8Gi");
    let pods = (0..5)
        .map(|i| PodB::new(&format!("p{i}")).cpu("1").created_at(i).build())
        .collect();
    let r = simulate(&s, nodes, pods);
    assert_eq!(r.scheduled.len(), 5);
    r.scheduled
        .iter()
        .map(|s| (s.pod.clone(), s.node.clone()))
        .collect()
}

#[test]
fn same_seed_same_placements() {
    for seed in [0, 7, 12345] {
        assert_eq!(tie_run(seed), tie_run(seed), "seed {seed}");
    }
}

#[test]
fn another_seed_breaks_ties_differently() {
    let base = tie_run(0);
    let differing: Vec<u64> = (1..=10).filter(|&s| tie_run(s) != base).collect();
    assert!(
        !differing.is_empty(),
        "seeds 1..=10 all placed like seed 0: {base:?}"
    );
    // Ties only: the spread is the same whatever the seed (5 pods on 5
    // distinct empty nodes, LeastAllocated pushing each away from the last).
    for seed in [0, differing[0]] {
        let nodes: BTreeSet<String> = tie_run(seed).into_iter().map(|(_, n)| n).collect();
        assert_eq!(nodes.len(), 5, "seed {seed}");
    }
}

// --------------------------------------------- percentageOfNodesToScore

fn evaluated(file: &ConfigFile, nodes: Vec<wasmsched::model::Node>) -> (usize, usize) {
    let s = build(file, 0);
    let mut snap = Snapshot::default();
    for n in nodes {
        snap.set_node(n);
    }
    let pod = PodB::new("p").cpu("1").build();
    match s.profiles[0].schedule(&pod, &snap) {
        Outcome::Scheduled(p) => (p.evaluated_nodes, p.feasible_nodes),
        o => panic!("{o:?}"),
    }
}

fn with_pct(top: Option<u32>, profile: Option<u32>) -> ConfigFile {
    let mut f = native_config();
    f.percentage_of_nodes_to_score = top;
    f.profiles[0].percentage_of_nodes_to_score = profile;
    f
}

#[test]
fn percentage_of_nodes_to_score_50_of_200_evaluates_100() {
    assert_eq!(
        evaluated(&with_pct(Some(50), None), identical_nodes(200, "4", "8Gi")),
        (100, 100)
    );
}

#[test]
fn adaptive_percentage_of_200_nodes_is_100() {
    // 50 - 200/125 = 49% of 200 = 98, raised to the minimum of 100.
    assert_eq!(
        evaluated(&with_pct(None, None), identical_nodes(200, "4", "8Gi")),
        (100, 100)
    );
    assert_eq!(
        evaluated(&with_pct(Some(0), None), identical_nodes(200, "4", "8Gi")),
        (100, 100)
    );
}

#[test]
fn adaptive_percentage_of_300_nodes_is_144_and_profiles_override_the_file() {
    // 50 - 300/125 = 48% of 300 = 144.
    assert_eq!(
        evaluated(&with_pct(None, None), identical_nodes(300, "4", "8Gi")),
        (144, 144)
    );
    assert_eq!(
        evaluated(&with_pct(Some(50), None), identical_nodes(300, "4", "8Gi")),
        (150, 150)
    );
    assert_eq!(
        evaluated(
            &with_pct(Some(50), Some(70)),
            identical_nodes(300, "4", "8Gi")
        ),
        (210, 210)
    );
    assert_eq!(
        evaluated(&with_pct(Some(100), None), identical_nodes(300, "4", "8Gi")),
        (300, 300)
    );
    // Below 100 nodes every node is evaluated.
    assert_eq!(
        evaluated(&with_pct(Some(10), None), identical_nodes(99, "4", "8Gi")),
        (99, 99)
    );
}

#[test]
fn infeasible_nodes_do_not_count_towards_the_nodes_to_find() {
    // The first 50 nodes are too small: 150 are evaluated to find 100.
    let mut nodes = identical_nodes(50, "500m", "8Gi");
    for n in &mut nodes {
        n.name = format!("small-{}", n.name);
    }
    nodes.extend(identical_nodes(150, "4", "8Gi"));
    assert_eq!(evaluated(&with_pct(Some(50), None), nodes), (150, 100));
}

#[test]
fn percentage_over_100_is_rejected() {
    let e = config::build(&with_pct(Some(101), None), Path::new("."), 0)
        .err()
        .expect("rejected");
    assert_eq!(
        e.to_string(),
        "percentageOfNodesToScore: must be in 0..=100, got 101"
    );
    let e = config::build(&with_pct(None, Some(150)), Path::new("."), 0)
        .err()
        .expect("rejected");
    assert_eq!(
        e.to_string(),
        "profiles[0].percentageOfNodesToScore: must be in 0..=100, got 150"
    );
}

// ------------------------------------------------------ unsupported pods

#[test]
fn a_pod_whose_claim_is_missing_is_unschedulable_as_upstream_says() {
    let s = build(&native_config(), 0);
    let pvc = PodB::new("with-pvc")
        .spec(
            "volumes",
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": "my-claim"}}]),
        )
        .build();
    let scratch = PodB::new("with-emptydir")
        .spec("volumes", json!([{"name": "tmp", "emptyDir": {}}]))
        .build();
    let ephemeral = PodB::new("with-ephemeral")
        .spec(
            "volumes",
            json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]),
        )
        .build();
    let r = simulate(
        &s,
        vec![NodeB::new("n1").build(), NodeB::new("n2").build()],
        vec![pvc, scratch, ephemeral],
    );
    assert_eq!(scheduled_order(&r), ["default/with-emptydir"]);
    // VolumeBinding's PreFilter: the pod's reason, no count; kube-scheduler
    // 1.37's PostFilter then adds "not found" (docs/compatibility.md).
    assert_eq!(
        failures(&r)["default/with-pvc"],
        "0/2 nodes are available: persistentvolumeclaim \"my-claim\" not found. not found"
    );
    assert_eq!(
        failures(&r)["default/with-ephemeral"],
        "0/2 nodes are available: pod uses generic ephemeral volume \"scratch\"; \
         wasmsched does not schedule such pods yet."
    );
}

// ------------------------------------------------------------- profiles

const TWO_PROFILES: &str = r#"
parallelism: 2
profiles:
- schedulerName: strict
  plugins:
    multiPoint:
      disabled: [{name: GpuTopology}, {name: NetworkLocality}]
- schedulerName: fit-only
  plugins:
    multiPoint:
      disabled: [{name: GpuTopology}, {name: NetworkLocality}]
    filter:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}]
"#;

#[test]
fn two_profiles_route_pods_by_scheduler_name() {
    let file = config::parse(TWO_PROFILES).unwrap();
    let s = build(&file, 0);
    let names: Vec<&str> = s.profiles.iter().map(|f| f.scheduler_name()).collect();
    assert_eq!(names, ["strict", "fit-only"]);
    let profile = s.profile("fit-only").unwrap().profile();
    let filters: Vec<&str> = profile.filter.iter().map(|f| f.name()).collect();
    assert_eq!(filters, ["NodeResourcesFit"]);

    let nodes = vec![
        NodeB::new("tainted")
            .taint("dedicated", "x", "NoSchedule")
            .build(),
        NodeB::new("cordoned").cordon().build(),
    ];
    let pods = vec![
        PodB::new("strict-pod")
            .scheduler("strict")
            .cpu("1")
            .created_at(1)
            .build(),
        PodB::new("loose-pod")
            .scheduler("fit-only")
            .cpu("1")
            .created_at(2)
            .build(),
        PodB::new("loose-big")
            .scheduler("fit-only")
            .cpu("8")
            .created_at(3)
            .build(),
        PodB::new("nobodys")
            .scheduler("default-scheduler")
            .created_at(4)
            .build(),
    ];
    let r = simulate(&s, nodes, pods);
    assert_eq!(r.ignored, 1);
    assert_eq!(r.scheduled.len(), 1);
    assert_eq!(r.scheduled[0].pod, "loose-pod");
    assert_eq!(r.scheduled[0].profile, "fit-only");
    assert!(["tainted", "cordoned"].contains(&r.scheduled[0].node.as_str()));
    let by_pod: std::collections::BTreeMap<&str, (&str, &str)> = r
        .unschedulable
        .iter()
        .map(|u| (u.pod.as_str(), (u.profile.as_str(), u.message.as_str())))
        .collect();
    assert_eq!(
        by_pod["strict-pod"],
        (
            "strict",
            "0/2 nodes are available: 1 node(s) had untolerated taint(s), \
             1 node(s) were unschedulable. preemption: 0/2 nodes are available: \
             2 Preemption is not helpful for scheduling."
        )
    );
    assert_eq!(
        by_pod["loose-big"],
        (
            "fit-only",
            "0/2 nodes are available: 2 Insufficient cpu. preemption: \
             0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
    );
}

#[test]
fn all_pods_uses_the_first_profile_for_everyone() {
    let file = config::parse(TWO_PROFILES).unwrap();
    let s = build(&file, 0);
    let nodes = vec![NodeB::new("tainted")
        .taint("dedicated", "x", "NoSchedule")
        .build()];
    let pods = vec![
        PodB::new("a").scheduler("fit-only").created_at(1).build(),
        PodB::new("b")
            .scheduler("default-scheduler")
            .created_at(2)
            .build(),
    ];
    let opts = simulate::Options {
        all_pods: true,
        explain: None,
        metrics: None,
    };
    let r = simulate::run(&s, manifests(nodes, pods), &opts).unwrap();
    assert_eq!(r.ignored, 0);
    assert!(r.scheduled.is_empty());
    assert_eq!(r.unschedulable.len(), 2);
    assert!(
        r.unschedulable.iter().all(|u| u.profile == "strict"),
        "{:?}",
        r.unschedulable
    );
}

#[test]
fn explain_errors_name_the_pod() {
    let s = build(&native_config(), 0);
    let run = |key: &str| {
        let pods = vec![
            PodB::new("bound").bound_to("n1").build(),
            PodB::new("other").scheduler("elsewhere").build(),
        ];
        let opts = simulate::Options {
            all_pods: false,
            explain: Some(key.into()),
            metrics: None,
        };
        simulate::run(&s, manifests(vec![NodeB::new("n1").build()], pods), &opts)
            .expect_err("an error")
            .to_string()
    };
    assert_eq!(
        run("default/ghost"),
        "--explain default/ghost: no such pod in the manifests"
    );
    assert_eq!(
        run("default/bound"),
        "--explain default/bound: the pod is not pending (it is bound to n1)"
    );
    assert_eq!(
        run("default/other"),
        "--explain default/other: no profile serves schedulerName \"elsewhere\" (use --all-pods)"
    );
}

// --------------------------------------------------------- bad identity

#[test]
fn pods_sharing_a_uid_are_rejected_or_both_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.yaml");
    write_manifest(
        &path,
        &[
            NodeB::new("n1").alloc(&[("cpu", "4")]).0,
            PodB::new("a").uid("copy-pasted").cpu("2").bound_to("n1").0,
            PodB::new("b").uid("copy-pasted").cpu("2").bound_to("n1").0,
            PodB::new("pending").cpu("1").0,
        ],
    );
    match manifest::load(std::slice::from_ref(&path)) {
        Err(e) => assert!(e.to_string().contains("copy-pasted"), "{e}"),
        Ok(m) => {
            let r = simulate::run(&build(&native_config(), 0), m, &Default::default()).unwrap();
            // n1 is full (2 + 2 of 4 cpu): the pending pod cannot fit.
            assert_eq!(
                failures(&r).get("default/pending").map(String::as_str),
                Some("0/1 nodes are available: 1 Insufficient cpu."),
                "placed: {:?}",
                placements(&r)
            );
        }
    }
}

// ------------------------------------------------------------------ GPU

#[test]
fn gpu_example_places_pods_by_gpu_model_and_free_gpus() {
    let m = manifest::load(&[gpu_example()]).unwrap();
    let nodes = m.nodes.clone();
    let bound: Vec<Pod> = m
        .pods
        .iter()
        .filter(|p| p.node_name.is_some())
        .cloned()
        .collect();
    let s = config::build(&ConfigFile::default(), Path::new("."), 0).unwrap();
    assert_eq!(s.profiles[0].scheduler_name(), "gpu-scheduler");
    let r = simulate::run(&s, m, &Default::default()).unwrap();
    let p = placements(&r);

    // ml/gpu-pod: an A100 node that had at least 2 free GPUs before it.
    let node = nodes.iter().find(|n| n.name == p["ml/gpu-pod"]).unwrap();
    assert_eq!(node.labels["gpu.nvidia.com/model"], "A100");
    assert!(node.taints.is_empty());
    let used: i64 = bound
        .iter()
        .filter(|b| b.node_name.as_deref() == Some(&node.name))
        .map(|b| b.requests.get("nvidia.com/gpu"))
        .sum();
    assert!(
        node.allocatable.get("nvidia.com/gpu") - used >= 2,
        "{} has {} GPUs, {used} used",
        node.name,
        node.allocatable.get("nvidia.com/gpu")
    );

    let f = failures(&r);
    assert!(
        f["ml/h100-job"].contains("GPU model mismatch"),
        "{}",
        f["ml/h100-job"]
    );
    assert!(
        f["ml/h100-job"].starts_with("0/8 nodes are available: "),
        "{}",
        f["ml/h100-job"]
    );
    assert_eq!(
        f["ml/huge-job"],
        "0/8 nodes are available: 1 node(s) had untolerated taint(s), \
         1 node(s) were unschedulable, 6 Insufficient nvidia.com/gpu. \
         preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling."
    );
    // The tolerating pod gets the dedicated node; T4 pods go to T4 nodes.
    assert_eq!(p["ml/llm-finetune"], "gpu-a100-80g");
    assert_eq!(p["ml/t4-inference-a"], "gpu-t4-1");
    assert_eq!(p["ml/t4-inference-b"], "gpu-t4-1");
    assert_eq!(p["ml/resnet-train"], "gpu-v100-1");
    assert_eq!(r.ignored, 1);
    assert!(!p.contains_key("web/web-frontend"));
    assert!(r.plugin_health.is_empty(), "{:?}", r.plugin_health);
}

// ------------------------------------------------- gates and sidecars

/// A pod gated by Kueue is held, listed as gated and never attempted;
/// the same pod without its gate is scheduled (upstream's
/// SchedulingGates PreEnqueue plugin).
#[test]
fn gated_pods_are_listed_as_gated_not_unschedulable() {
    let nodes = vec![NodeB::new("n1")
        .alloc(&[("cpu", "4"), ("pods", "10")])
        .build()];
    let gated = PodB::new("gated")
        .cpu("1")
        .spec(
            "schedulingGates",
            json!([{"name": "kueue.x-k8s.io/admission"}]),
        )
        .build();
    let free = PodB::new("free").cpu("1").build();
    let s = build(&native_config(), 0);
    let r = simulate::run(&s, manifests(nodes, vec![gated, free]), &Default::default()).unwrap();
    assert_eq!(placements(&r).keys().collect::<Vec<_>>(), ["default/free"]);
    assert!(r.unschedulable.is_empty(), "{:?}", r.unschedulable);
    assert_eq!(r.gated.len(), 1);
    assert_eq!(r.gated[0].pod, "gated");
    assert_eq!(r.gated[0].gates, ["kueue.x-k8s.io/admission"]);
    let text = wasmsched::output::table(&r);
    assert!(
        text.contains("Gated 1 pod(s)") && text.contains("default/gated: kueue.x-k8s.io/admission"),
        "{text}"
    );
}

/// A native sidecar's requests count (the issue's case: a 1500m app and
/// a 600m sidecar do not fit a 2-cpu node, and fit a 3-cpu one).
#[test]
fn native_sidecars_count_towards_the_pods_requests() {
    let nodes = vec![
        NodeB::new("small")
            .alloc(&[("cpu", "2"), ("pods", "10")])
            .build(),
        NodeB::new("big")
            .alloc(&[("cpu", "3"), ("pods", "10")])
            .build(),
    ];
    let pod = PodB::new("app")
        .cpu("1500m")
        .spec(
            "initContainers",
            json!([{"name": "proxy", "image": "x", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "600m"}}}]),
        )
        .build();
    let s = build(&native_config(), 0);
    let r = simulate::run(
        &s,
        manifests(nodes.clone(), vec![pod.clone()]),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(placements(&r)["default/app"], "big");
    let r = simulate::run(
        &s,
        manifests(vec![nodes[0].clone()], vec![pod]),
        &Default::default(),
    )
    .unwrap();
    let message = &r.unschedulable[0].message;
    assert!(
        message.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{message}"
    );
}

/// Namespaces in the manifests give affinity terms' `namespaceSelector`
/// their labels; a pod's namespace that no manifest lists still has the
/// `kubernetes.io/metadata.name` label the API server gives every
/// namespace.
#[test]
fn namespace_selectors_read_the_namespaces_in_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.yaml");
    let namespace = |name: &str, team: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": name, "labels": {"team": team}}})
    };
    let avoid = |name: &str, selector: serde_json::Value| {
        PodB::new(name)
            .cpu("100m")
            .spec(
                "affinity",
                json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": selector,
                    "topologyKey": "kubernetes.io/hostname"}]}}),
            )
            .0
    };
    write_manifest(
        &path,
        &[
            namespace("payments", "money"),
            NodeB::new("n1").alloc(&[("cpu", "4"), ("pods", "10")]).0,
            NodeB::new("n2").alloc(&[("cpu", "4"), ("pods", "10")]).0,
            PodB::new("db")
                .ns("payments")
                .labels(&[("app", "db")])
                .cpu("1")
                .bound_to("n1")
                .0,
            PodB::new("db")
                .ns("unlisted")
                .labels(&[("app", "db")])
                .cpu("1")
                .bound_to("n2")
                .0,
            // Avoids the db of team money: n2 only.
            avoid("by-team", json!({"matchLabels": {"team": "money"}})),
            // Avoids the db of the unlisted namespace, by its name label.
            avoid(
                "by-name",
                json!({"matchLabels": {"kubernetes.io/metadata.name": "unlisted"}}),
            ),
            // Avoids every db: nowhere.
            avoid("everywhere", json!({})),
        ],
    );
    let m = manifest::load(std::slice::from_ref(&path)).unwrap();
    assert_eq!(m.namespaces.labels("payments")["team"], "money");
    let r = simulate::run(&build(&native_config(), 0), m, &Default::default()).unwrap();
    let p = placements(&r);
    assert_eq!(p["default/by-team"], "n2");
    assert_eq!(p["default/by-name"], "n1");
    assert_eq!(
        failures(&r).get("default/everywhere").map(String::as_str),
        Some(
            "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. \
             preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        )
    );
}

#[test]
fn a_namespace_without_a_name_or_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ns.yaml");
    let ns =
        |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    write_manifest(&path, &[ns("")]);
    let e = manifest::load(std::slice::from_ref(&path))
        .unwrap_err()
        .to_string();
    assert!(e.contains("metadata.name: must not be empty"), "{e}");
    write_manifest(&path, &[ns("a"), ns("a")]);
    let e = manifest::load(std::slice::from_ref(&path))
        .unwrap_err()
        .to_string();
    assert!(e.contains("duplicate Namespace a"), "{e}");
}
