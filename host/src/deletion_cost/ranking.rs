//! The ReplicaSet controller's scale-down order (upstream
//! `ActivePodsWithRanks.Less`, pkg/controller/controller_utils.go), with the
//! rule that decided each comparison.
//!
//! The first of eight rules that tells two pods apart decides; the pod that
//! sorts first is deleted first:
//!
//! 1. unassigned before assigned;
//! 2. Pending < Unknown < Running;
//! 3. not ready before ready;
//! 4. lower pod-deletion-cost first;
//! 5. more active related pods on the same node first ("doubled up");
//! 6. (both ready) ready for a shorter time first;
//! 7. more container restarts first (sidecars break a tie);
//! 8. newer first.
//!
//! Times in 6 and 8 compare on a log2 scale of their age (the
//! LogarithmicScaleDown feature, on by default since 1.22): pods whose ages
//! fall in the same power-of-two bucket are ordered by UID.

use std::cmp::Ordering;
use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;

use super::facts::PodFacts;

/// One of the eight ordering rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    Unassigned,
    Phase,
    NotReady,
    DeletionCost,
    DoubledUp,
    ReadyTime,
    Restarts,
    CreationTime,
}

impl Rule {
    pub const ALL: [Rule; 8] = [
        Rule::Unassigned,
        Rule::Phase,
        Rule::NotReady,
        Rule::DeletionCost,
        Rule::DoubledUp,
        Rule::ReadyTime,
        Rule::Restarts,
        Rule::CreationTime,
    ];

    /// 1..=8, as the rules are numbered upstream and in FIELD-NOTES.md.
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    pub fn name(self) -> &'static str {
        match self {
            Rule::Unassigned => "unassigned first",
            Rule::Phase => "Pending < Unknown < Running",
            Rule::NotReady => "not ready first",
            Rule::DeletionCost => "lower deletion cost first",
            Rule::DoubledUp => "doubled up first",
            Rule::ReadyTime => "ready for less time first",
            Rule::Restarts => "more restarts first",
            Rule::CreationTime => "newer first",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rule {} ({})", self.number(), self.name())
    }
}

/// Why one pod sorts before another.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// `None`: every rule ties (upstream leaves the order to the sort).
    pub rule: Option<Rule>,
    /// The values compared, e.g. `deletion cost -50 < 0`.
    pub detail: String,
}

/// A pod with its upstream rank: the number of active pods of the
/// workload's ReplicaSets (the pod included) on its node.
#[derive(Debug, Clone, Copy)]
pub struct Ranked<'a> {
    pub pod: &'a PodFacts,
    pub colocated: usize,
}

/// Upstream `getPodsRankedByRelatedPodsOnSameNode`: counts the active
/// `related` pods per node (unassigned pods share one key, as upstream).
pub fn rank<'a>(pods: &[&'a PodFacts], related: &[&PodFacts]) -> Vec<Ranked<'a>> {
    let mut on_node: HashMap<Option<&str>, usize> = HashMap::new();
    for p in related.iter().filter(|p| p.active()) {
        *on_node.entry(p.node.as_deref()).or_default() += 1;
    }
    pods.iter()
        .map(|p| Ranked {
            pod: p,
            colocated: on_node.get(&p.node.as_deref()).copied().unwrap_or(0),
        })
        .collect()
}

/// Upstream `logarithmicRankDiff`'s bucket: floor(log2(age in ns)), -1
/// for a time not in the past.
fn log2_bucket(t: Timestamp, now: Timestamp) -> i64 {
    let d = now.as_nanosecond() - t.as_nanosecond();
    if d > 0 {
        (d as f64).log2() as i64
    } else {
        -1
    }
}

/// A compact age: `45s`, `12m`, `3h20m`, `5d`.
pub fn age(t: Timestamp, now: Timestamp) -> String {
    let s = now.as_second() - t.as_second();
    match s {
        s if s < 0 => format!("in {}s", -s),
        s if s < 120 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 172_800 => match (s / 3600, s % 3600 / 60) {
            (h, 0) => format!("{h}h"),
            (h, m) => format!("{h}h{m}m"),
        },
        s => format!("{}d", s / 86_400),
    }
}

fn decided(rule: Rule, a_first: bool, detail: String) -> (Ordering, Decision) {
    let ord = if a_first {
        Ordering::Less
    } else {
        Ordering::Greater
    };
    (
        ord,
        Decision {
            rule: Some(rule),
            detail,
        },
    )
}

/// Rules 6 and 8: the more recent time first, on the log2 scale, UID
/// breaking a tie within a bucket; a missing time sorts first (upstream
/// `afterOrZero`). `None` when the times are equal.
fn compare_times(
    rule: Rule,
    what: &str,
    (a, ta): (&PodFacts, Option<Timestamp>),
    (b, tb): (&PodFacts, Option<Timestamp>),
    now: Timestamp,
) -> Option<(Ordering, Decision)> {
    if ta == tb {
        return None;
    }
    let (ta, tb) = match (ta, tb) {
        (None, Some(tb)) => {
            return Some(decided(
                rule,
                true,
                format!(
                    "{} has no {what} time, {} {what} {} ago",
                    a.name,
                    b.name,
                    age(tb, now)
                ),
            ))
        }
        (Some(ta), None) => {
            return Some(decided(
                rule,
                false,
                format!(
                    "{} has no {what} time, {} {what} {} ago",
                    b.name,
                    a.name,
                    age(ta, now)
                ),
            ))
        }
        (Some(ta), Some(tb)) => (ta, tb),
        (None, None) => return None,
    };
    let (ba, bb) = (log2_bucket(ta, now), log2_bucket(tb, now));
    if ba == bb {
        let (ua, ub) = (&a.uid, &b.uid);
        let detail = format!(
            "{what} {} and {} ago, same log2 bucket: lower UID first ({} < {})",
            age(ta, now),
            age(tb, now),
            ua.min(ub),
            ua.max(ub)
        );
        return match ua.cmp(ub) {
            Ordering::Equal => Some((
                Ordering::Equal,
                Decision {
                    rule: Some(rule),
                    detail,
                },
            )),
            o => Some(decided(rule, o == Ordering::Less, detail)),
        };
    }
    Some(decided(
        rule,
        ba < bb,
        format!(
            "{what} {} ago vs {} ago (log2 buckets {ba} vs {bb})",
            age(ta, now),
            age(tb, now)
        ),
    ))
}

fn node(p: &PodFacts) -> &str {
    p.node.as_deref().unwrap_or("<none>")
}

/// Compares two pods as the ReplicaSet controller does at `now`:
/// `Less` means `a` is deleted before `b`.
pub fn compare(a: &Ranked, b: &Ranked, now: Timestamp) -> (Ordering, Decision) {
    let (pa, pb) = (a.pod, b.pod);
    // 1. Unassigned < assigned.
    if pa.node != pb.node && (pa.node.is_none() || pb.node.is_none()) {
        let a_first = pa.node.is_none();
        let (un, on) = if a_first { (pa, pb) } else { (pb, pa) };
        return decided(
            Rule::Unassigned,
            a_first,
            format!("{} has no node, {} is on {}", un.name, on.name, node(on)),
        );
    }
    // 2. Pending < Unknown < Running.
    if pa.phase.ordinal() != pb.phase.ordinal() {
        let show = |p: &PodFacts| match p.phase.as_str() {
            "" => "without a phase".to_string(),
            s => s.to_string(),
        };
        return decided(
            Rule::Phase,
            pa.phase.ordinal() < pb.phase.ordinal(),
            format!("{} vs {}", show(pa), show(pb)),
        );
    }
    // 3. Not ready < ready.
    if pa.ready != pb.ready {
        let (nr, r) = if pa.ready { (pb, pa) } else { (pa, pb) };
        return decided(
            Rule::NotReady,
            !pa.ready,
            format!("{} is not ready, {} is", nr.name, r.name),
        );
    }
    // 4. Lower pod-deletion-cost first.
    let (ca, cb) = (pa.deletion_cost(), pb.deletion_cost());
    if ca != cb {
        let (lo, hi) = (ca.min(cb), ca.max(cb));
        return decided(
            Rule::DeletionCost,
            ca < cb,
            format!("deletion cost {lo} < {hi}"),
        );
    }
    // 5. Doubled up first.
    if a.colocated != b.colocated {
        return decided(
            Rule::DoubledUp,
            a.colocated > b.colocated,
            format!(
                "{} active pods of the workload on {} vs {} on {}",
                a.colocated,
                node(pa),
                b.colocated,
                node(pb)
            ),
        );
    }
    // 6. Both ready: ready for less time first.
    if pa.ready && pb.ready {
        if let Some(r) = compare_times(
            Rule::ReadyTime,
            "ready",
            (pa, pa.ready_since),
            (pb, pb.ready_since),
            now,
        ) {
            return r;
        }
    }
    // 7. More restarts first; sidecar restarts break a tie.
    let (ra, rb) = (pa.restarts, pb.restarts);
    if ra.max_regular != rb.max_regular {
        return decided(
            Rule::Restarts,
            ra.max_regular > rb.max_regular,
            format!(
                "{} vs {} container restarts",
                ra.max_regular.max(rb.max_regular),
                ra.max_regular.min(rb.max_regular)
            ),
        );
    }
    if ra.max_sidecar != rb.max_sidecar {
        return decided(
            Rule::Restarts,
            ra.max_sidecar > rb.max_sidecar,
            format!(
                "{} vs {} sidecar restarts",
                ra.max_sidecar.max(rb.max_sidecar),
                ra.max_sidecar.min(rb.max_sidecar)
            ),
        );
    }
    // 8. Newer first.
    if let Some(r) = compare_times(
        Rule::CreationTime,
        "created",
        (pa, pa.created),
        (pb, pb.created),
        now,
    ) {
        return r;
    }
    (
        Ordering::Equal,
        Decision {
            rule: None,
            detail: "every rule ties; upstream's order is undefined (listed by name)".into(),
        },
    )
}

/// Sorts `pods` into deletion order. Upstream's comparison is not always
/// transitive (a UID tie-break in rule 6 can skip rule 7 for one pair and
/// not another), which Rust's sorts may reject by panicking; a stable
/// insertion sort gives a well-defined order on any input. Pods are
/// first sorted by name, so ties are listed by name.
pub fn deletion_order<'a>(mut pods: Vec<Ranked<'a>>, now: Timestamp) -> Vec<Ranked<'a>> {
    pods.sort_by(|a, b| a.pod.name.cmp(&b.pod.name));
    for i in 1..pods.len() {
        let mut j = i;
        while j > 0 && compare(&pods[j], &pods[j - 1], now).0 == Ordering::Less {
            pods.swap(j, j - 1);
            j -= 1;
        }
    }
    pods
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1 as k8s;
    use serde_json::{json, Value};

    const NOW: &str = "2026-01-10T00:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// A ready Running pod on `node`, ready and created long ago.
    fn pod(name: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "containerStatuses": [{"name": "c", "restartCount": 0, "ready": true, "image": "", "imageID": ""}]}
        })
    }

    fn facts(v: Value) -> PodFacts {
        PodFacts::from_k8s(&serde_json::from_value::<k8s::Pod>(v).unwrap())
    }

    /// Compares a and b (both ranked 1) both ways; returns the decision
    /// for a-before-b, asserting a goes first.
    fn first(a: Value, b: Value) -> Decision {
        first_ranked(a, 1, b, 1)
    }

    fn first_ranked(a: Value, ra: usize, b: Value, rb: usize) -> Decision {
        let (a, b) = (facts(a), facts(b));
        let (ra, rb) = (
            Ranked {
                pod: &a,
                colocated: ra,
            },
            Ranked {
                pod: &b,
                colocated: rb,
            },
        );
        let (ord, d) = compare(&ra, &rb, now());
        assert_eq!(ord, Ordering::Less, "{d:?}");
        let (rev, d2) = compare(&rb, &ra, now());
        assert_eq!(rev, Ordering::Greater, "{d2:?}");
        assert_eq!(d.rule, d2.rule);
        d
    }

    #[test]
    fn rule_1_unassigned_first() {
        let mut a = pod("a");
        a["spec"].as_object_mut().unwrap().remove("nodeName");
        let d = first(a, pod("b"));
        assert_eq!(d.rule, Some(Rule::Unassigned));
        assert_eq!(d.detail, "a has no node, b is on n1");
    }

    #[test]
    fn rule_2_phase_order() {
        let mut pending = pod("a");
        pending["status"]["phase"] = json!("Pending");
        let mut unknown = pod("b");
        unknown["status"]["phase"] = json!("Unknown");
        let d = first(pending.clone(), unknown.clone());
        assert_eq!(d.rule, Some(Rule::Phase));
        assert_eq!(d.detail, "Pending vs Unknown");
        assert_eq!(first(unknown, pod("c")).rule, Some(Rule::Phase));
        // Two assigned pods on different nodes are not told apart by rule 1.
        let mut other_node = pending;
        other_node["spec"]["nodeName"] = json!("n2");
        assert_eq!(first(other_node, pod("c")).rule, Some(Rule::Phase));
    }

    #[test]
    fn rule_3_not_ready_first() {
        let mut a = pod("a");
        a["status"]["conditions"][0]["status"] = json!("False");
        let d = first(a, pod("b"));
        assert_eq!(
            (d.rule, d.detail.as_str()),
            (Some(Rule::NotReady), "a is not ready, b is")
        );
    }

    #[test]
    fn rule_4_lower_cost_first() {
        let mut a = pod("a");
        a["metadata"]["annotations"] = json!({"controller.kubernetes.io/pod-deletion-cost": "-5"});
        let mut b = pod("b");
        b["metadata"]["annotations"] = json!({"controller.kubernetes.io/pod-deletion-cost": "10"});
        let d = first(a.clone(), b);
        assert_eq!(
            (d.rule, d.detail.as_str()),
            (Some(Rule::DeletionCost), "deletion cost -5 < 10")
        );
        // An invalid value counts as 0, as upstream.
        let mut bad = pod("c");
        bad["metadata"]["annotations"] =
            json!({"controller.kubernetes.io/pod-deletion-cost": "+7"});
        assert_eq!(first(a, bad).detail, "deletion cost -5 < 0");
    }

    #[test]
    fn rule_5_doubled_up_first() {
        let d = first_ranked(pod("a"), 3, pod("b"), 1);
        assert_eq!(d.rule, Some(Rule::DoubledUp));
        assert_eq!(d.detail, "3 active pods of the workload on n1 vs 1 on n1");
    }

    #[test]
    fn rule_6_ready_for_less_time_first() {
        let mut a = pod("a");
        a["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-01-09T23:59:00Z");
        let d = first(a, pod("b"));
        assert_eq!(d.rule, Some(Rule::ReadyTime));
        assert_eq!(d.detail, "ready 60s ago vs 9d ago (log2 buckets 35 vs 49)");
        // Same log2 bucket: the lower UID goes first.
        let mut x = pod("x");
        x["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-01-09T23:00:00Z");
        let mut y = pod("y");
        y["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-01-09T23:00:01Z");
        let d = first(x, y);
        assert_eq!(d.rule, Some(Rule::ReadyTime));
        assert!(d.detail.contains("same log2 bucket"), "{}", d.detail);
    }

    #[test]
    fn rule_7_more_restarts_first() {
        let mut a = pod("a");
        a["status"]["containerStatuses"][0]["restartCount"] = json!(4);
        let d = first(a, pod("b"));
        assert_eq!(
            (d.rule, d.detail.as_str()),
            (Some(Rule::Restarts), "4 vs 0 container restarts")
        );
        // Sidecar restarts break a tie.
        let mut s = pod("s");
        s["spec"]["initContainers"] = json!([{"name": "proxy", "restartPolicy": "Always"}]);
        s["status"]["initContainerStatuses"] = json!([{"name": "proxy", "restartCount": 2, "ready": true, "image": "", "imageID": ""}]);
        assert_eq!(first(s, pod("t")).detail, "2 vs 0 sidecar restarts");
    }

    #[test]
    fn rule_8_newer_first() {
        let mut a = pod("a");
        a["metadata"]["creationTimestamp"] = json!("2026-01-09T00:00:00Z");
        let d = first(a, pod("b"));
        assert_eq!(d.rule, Some(Rule::CreationTime));
        assert_eq!(
            d.detail,
            "created 24h ago vs 9d ago (log2 buckets 46 vs 49)"
        );
    }

    #[test]
    fn everything_equal_is_a_tie() {
        let (a, b) = (facts(pod("a")), facts(pod("a")));
        let r = |p| Ranked {
            pod: p,
            colocated: 1,
        };
        let (ord, d) = compare(&r(&a), &r(&b), now());
        assert_eq!((ord, d.rule), (Ordering::Equal, None));
    }

    #[test]
    fn ranks_count_active_related_pods_per_node() {
        let mut gone = pod("gone");
        gone["status"]["phase"] = json!("Succeeded");
        let mut other = pod("other");
        other["spec"]["nodeName"] = json!("n2");
        let all: Vec<PodFacts> = [pod("a"), pod("b"), gone, other]
            .into_iter()
            .map(facts)
            .collect();
        let related: Vec<&PodFacts> = all.iter().collect();
        let ranked = rank(&[&all[0], &all[3]], &related);
        assert_eq!(
            ranked.iter().map(|r| r.colocated).collect::<Vec<_>>(),
            [2, 1]
        );
    }

    #[test]
    fn a_non_transitive_input_sorts_without_panicking() {
        // a and b became ready at the same second, c in the same log2
        // bucket: rule 6's UID tie-break decides a-c and b-c, rule 7 a-b.
        let mut v = Vec::new();
        for (name, uid, t, restarts) in [
            ("a", "3", "2026-01-09T23:00:00Z", 5),
            ("b", "1", "2026-01-09T23:00:00Z", 0),
            ("c", "2", "2026-01-09T23:00:05Z", 0),
        ] {
            let mut p = pod(name);
            p["metadata"]["uid"] = json!(uid);
            p["status"]["conditions"][0]["lastTransitionTime"] = json!(t);
            p["status"]["containerStatuses"][0]["restartCount"] = json!(restarts);
            v.push(facts(p));
        }
        for _ in 0..3 {
            let ranked: Vec<Ranked> = v
                .iter()
                .map(|p| Ranked {
                    pod: p,
                    colocated: 1,
                })
                .collect();
            assert_eq!(deletion_order(ranked, now()).len(), 3);
            v.rotate_left(1);
        }
    }
}
