//! Unit tests: the queue sort, the directory's counts and activations,
//! and topology planning.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::json;

use super::topology::{plan, Claim, Plan, Request};
use super::*;
use crate::framework::plugins::testutil::{cluster, N, P};
use crate::framework::queue::SchedulingQueue;
use crate::model::pod_group::{PodGroupObject, Topology, TopologyMode, POD_GROUP_LABEL};
use crate::model::{Pod, PodGroup};

fn group(name: &str, created: &str, min: u32) -> PodGroup {
    let obj: PodGroupObject = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"minMember": min}
    }))
    .unwrap();
    PodGroup::from_object(&obj).unwrap()
}

fn member(name: &str, group: &str, gpus: &str) -> Pod {
    P::new(name)
        .labels(&[(POD_GROUP_LABEL, group)])
        .req(&[("nvidia.com/gpu", gpus)])
        .build()
}

fn at(mut p: Pod, ms: i64) -> Pod {
    p.creation_ms = ms;
    p
}

#[test]
fn members_leave_the_queue_together_oldest_group_first() {
    let handle = Handle::default();
    let plugin = new(None, &handle).unwrap();
    let groups = handle.shared::<PodGroups>();
    groups.apply_group("default/late", Ok(group("late", "2026-01-01T00:00:20Z", 2)));
    groups.apply_group(
        "default/early",
        Ok(group("early", "2026-01-01T00:00:10Z", 2)),
    );
    let mut q = SchedulingQueue::with_plugins(plugin.queue_sort.clone(), Default::default());
    // Created interleaved with each other and with an ordinary pod.
    let base = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    q.add(Arc::new(at(member("l1", "late", "1"), base + 30_000)));
    q.add(Arc::new(at(member("e1", "early", "1"), base + 31_000)));
    q.add(Arc::new(at(P::new("plain").build(), base + 15_000)));
    q.add(Arc::new(at(member("l2", "late", "1"), base + 32_000)));
    q.add(Arc::new(at(member("e2", "early", "1"), base + 33_000)));
    let order: Vec<String> = std::iter::from_fn(|| q.pop(0).map(|p| p.name.clone())).collect();
    assert_eq!(order, ["e1", "e2", "plain", "l1", "l2"]);
}

#[test]
fn a_group_reaching_min_member_activates_its_pending_members() {
    let groups = PodGroups::default();
    groups.apply_group("default/g", Ok(group("g", "2026-01-01T00:00:00Z", 3)));
    assert_eq!(groups.take_activations(0).len(), 0, "no members yet");
    groups.apply_pod(&member("a", "g", "1"), false);
    groups.apply_pod(&member("b", "g", "1"), false);
    assert!(groups.take_activations(0).is_empty(), "2 of 3");
    groups.apply_pod(&member("c", "g", "1"), false);
    let want: HashSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    assert_eq!(groups.take_activations(0), want);
    // A member that leaves (deleted, or its label removed) stops counting.
    groups.delete_pod("c");
    let mut relabelled = member("b", "g", "1");
    relabelled.labels.clear();
    groups.apply_pod(&relabelled, false);
    let s = &groups.summaries()[0];
    assert_eq!(s.members.len(), 1);
    assert_eq!(s.status.phase, "Pending");
}

fn gpu_node(name: &str, domain: &str, gpus: &str) -> crate::model::Node {
    N::new(name)
        .labels(&[("nvidia.com/gpu.clique", domain)])
        .alloc(&[("nvidia.com/gpu", gpus), ("cpu", "64"), ("pods", "110")])
        .build()
}

fn pods(n: usize, gpus: &str) -> Vec<Arc<Pod>> {
    (0..n)
        .map(|i| Arc::new(member(&format!("m{i}"), "g", gpus)))
        .collect()
}

fn topo(mode: TopologyMode) -> Topology {
    Topology {
        label: "nvidia.com/gpu.clique".into(),
        mode,
    }
}

fn domains(p: &Plan) -> Vec<&str> {
    p.domains.iter().map(String::as_str).collect()
}

#[test]
fn required_picks_the_tightest_domain_that_holds_the_whole_group() {
    // a: 16 GPUs, b: 8, c: 12 (4 used). Four 2-GPU members fit b and c and
    // a; b is the tightest (no GPU left over).
    let busy = P::new("busy").req(&[("nvidia.com/gpu", "4")]).build();
    let snap = cluster(
        vec![
            gpu_node("a1", "a", "8"),
            gpu_node("a2", "a", "8"),
            gpu_node("b1", "b", "8"),
            gpu_node("c1", "c", "8"),
            gpu_node("c2", "c", "8"),
        ],
        vec![("c1", busy)],
    );
    let t = topo(TopologyMode::Required);
    let req = |n, gpus| Request {
        key: "default/g",
        topology: &t,
        pending: pods(n, gpus),
        assigned_nodes: &[],
    };
    let p = plan(req(4, "2"), &snap, &[]).unwrap().unwrap();
    assert_eq!(domains(&p), ["b"]);
    // Six need 12: c (12 free) is tighter than a (16).
    let p = plan(req(6, "2"), &snap, &[]).unwrap().unwrap();
    assert_eq!(domains(&p), ["c"]);
    // Nine 2-GPU members (18) fit no domain: the group waits.
    let e = plan(req(9, "2"), &snap, &[]).unwrap_err();
    assert_eq!(
        e,
        "pod group default/g: no nvidia.com/gpu.clique domain has room for its 9 unplaced member(s) (the roomiest takes 8)"
    );
}

#[test]
fn members_already_placed_fix_the_domain() {
    let snap = cluster(
        vec![gpu_node("a1", "a", "8"), gpu_node("b1", "b", "4")],
        vec![],
    );
    let t = topo(TopologyMode::Required);
    let req = Request {
        key: "default/g",
        topology: &t,
        pending: pods(2, "2"),
        assigned_nodes: &["a1".to_string()],
    };
    assert_eq!(domains(&plan(req, &snap, &[]).unwrap().unwrap()), ["a"]);
}

#[test]
fn preferred_falls_back_to_the_fewest_domains_then_to_no_restriction() {
    let snap = cluster(
        vec![
            gpu_node("a1", "a", "8"),
            gpu_node("b1", "b", "4"),
            gpu_node("c1", "c", "2"),
            gpu_node("d1", "d", "2"),
        ],
        vec![],
    );
    let t = topo(TopologyMode::Preferred);
    let req = |n| Request {
        key: "default/g",
        topology: &t,
        pending: pods(n, "1"),
        assigned_nodes: &[],
    };
    // 12 one-GPU members: a (8) + b (4), not three domains.
    assert_eq!(
        domains(&plan(req(12,), &snap, &[]).unwrap().unwrap()),
        ["a", "b"]
    );
    // 16 do not fit even all together: no restriction.
    assert_eq!(plan(req(17), &snap, &[]).unwrap(), None);
}

#[test]
fn another_groups_claim_keeps_its_domain() {
    let snap = cluster(
        vec![gpu_node("a1", "a", "8"), gpu_node("b1", "b", "8")],
        vec![],
    );
    let t = topo(TopologyMode::Required);
    let claim = Claim {
        plan: Arc::new(Plan {
            label: "nvidia.com/gpu.clique".into(),
            mode: TopologyMode::Required,
            domains: BTreeSet::from(["a".to_string()]),
        }),
        pods: pods(4, "2"),
    };
    let req = Request {
        key: "default/h",
        topology: &t,
        pending: pods(2, "2"),
        assigned_nodes: &[],
    };
    // Without the claim, a and b tie and a (first by name) wins.
    assert_eq!(
        domains(&plan(req, &snap, &[claim]).unwrap().unwrap()),
        ["b"]
    );
}

#[test]
fn planning_respects_taints_cordons_and_node_selectors() {
    let tainted = N::new("a1")
        .labels(&[("nvidia.com/gpu.clique", "a")])
        .alloc(&[("nvidia.com/gpu", "8")])
        .taints(json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]))
        .build();
    let cordoned = N::new("b1")
        .labels(&[("nvidia.com/gpu.clique", "b")])
        .alloc(&[("nvidia.com/gpu", "8")])
        .unschedulable()
        .build();
    let snap = cluster(vec![tainted, cordoned, gpu_node("c1", "c", "2")], vec![]);
    let t = topo(TopologyMode::Required);
    let req = Request {
        key: "default/g",
        topology: &t,
        pending: pods(2, "1"),
        assigned_nodes: &[],
    };
    assert_eq!(domains(&plan(req, &snap, &[]).unwrap().unwrap()), ["c"]);
}
