//! Which candidate wins (upstream `pickOneNodeForPreemption`), as a full
//! order so advisors see every candidate ranked: fewest budget
//! violations, lowest highest-victim priority, lowest sum of victim
//! priorities, fewest victims, latest start of the highest-priority
//! victims, then (with `preferLowerDeletionCost`) the lowest summed
//! pod-deletion-cost, then the first found.

use crate::model::priority::deletion_cost;

use super::candidates::Found;

/// A candidate with the values the rules compare.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub found: Found,
    pub violations: u32,
    /// The first victim's priority, the highest (upstream takes
    /// `Pods[0]`; the victims are sorted by importance).
    pub highest: i32,
    /// Each priority plus 2^31, so that negative priorities add up right.
    pub priority_sum: i64,
    pub count: usize,
    /// The earliest start among the victims of the highest priority
    /// (upstream `GetEarliestPodStartTime`); a pod not started counts as
    /// starting now.
    pub earliest_start: i64,
    pub deletion_cost: i64,
    /// Position in the rules' order (before any advice).
    pub rank: usize,
}

/// The rules, in order, as `--explain` names them.
const RULES: [&str; 6] = [
    "more PodDisruptionBudget violations",
    "a higher highest victim priority",
    "a higher sum of victim priorities",
    "more victims",
    "an earlier start of its highest-priority victims",
    "a higher summed pod-deletion-cost",
];

impl Ranked {
    fn new(found: Found) -> Self {
        let victims = &found.selection.victims;
        let highest = victims.first().map_or(i32::MIN, |(p, _)| p.priority);
        let mut max = highest;
        let mut earliest = i64::MAX;
        for (p, _) in victims {
            let start = p.start_ms.unwrap_or(i64::MAX);
            if p.priority > max {
                (max, earliest) = (p.priority, start);
            } else if p.priority == max {
                earliest = earliest.min(start);
            }
        }
        Self {
            violations: found.selection.violations,
            highest,
            priority_sum: victims
                .iter()
                .map(|(p, _)| i64::from(p.priority) + (1i64 << 31))
                .sum(),
            count: victims.len(),
            earliest_start: earliest,
            deletion_cost: victims
                .iter()
                .map(|(p, _)| i64::from(deletion_cost(p)))
                .sum(),
            rank: 0,
            found,
        }
    }

    /// The values the rules compare, in order (smaller wins).
    fn keys(&self, by_cost: bool) -> [i64; 6] {
        [
            i64::from(self.violations),
            i64::from(self.highest),
            self.priority_sum,
            self.count as i64,
            -self.earliest_start.min(i64::MAX - 1),
            if by_cost { self.deletion_cost } else { 0 },
        ]
    }
}

/// The candidates best first; ties keep the order they were found in.
pub fn order(found: Vec<Found>, by_cost: bool) -> Vec<Ranked> {
    let mut ranked: Vec<Ranked> = found.into_iter().map(Ranked::new).collect();
    ranked.sort_by_key(|r| r.keys(by_cost));
    ranked
}

/// Why `later` comes after `earlier`: the first rule that tells them
/// apart, or "found later" when none does.
pub fn why_behind(earlier: &Ranked, later: &Ranked, by_cost: bool) -> String {
    let (a, b) = (earlier.keys(by_cost), later.keys(by_cost));
    match (0..RULES.len()).find(|&i| a[i] != b[i]) {
        Some(i) if a[i] < b[i] => RULES[i].to_string(),
        Some(_) => "ranked lower by an advisor".to_string(),
        None => "found later (upstream takes the first of equals)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::framework::plugins::testutil::P;
    use crate::model::Pod;

    use super::super::victims::Selection;
    use super::*;

    fn pod(name: &str, priority: i32, start: Option<i64>, cost: i32) -> Arc<Pod> {
        let mut p = P::new(name).priority(priority).build();
        p.start_ms = start;
        p.annotations.insert(
            crate::model::priority::DELETION_COST.into(),
            cost.to_string(),
        );
        Arc::new(p)
    }

    fn found(node: &str, victims: Vec<Arc<Pod>>, violations: u32) -> Found {
        Found {
            node_index: 0,
            node: node.into(),
            selection: Selection {
                victims: victims.into_iter().map(|p| (p, false)).collect(),
                violations,
            },
        }
    }

    fn names(r: &[Ranked]) -> Vec<&str> {
        r.iter().map(|r| r.found.node.as_str()).collect()
    }

    #[test]
    fn rules_apply_in_upstreams_order() {
        let c = vec![
            found("violates", vec![pod("a", 1, Some(5), 0)], 1),
            found("high", vec![pod("b", 5, Some(5), 0)], 0),
            found(
                "sum",
                vec![pod("c", 1, Some(5), 0), pod("d", 1, Some(5), 0)],
                0,
            ),
            found(
                "negative",
                vec![
                    pod("e", -10, Some(5), 0),
                    pod("f", -10, Some(5), 0),
                    pod("g", -10, Some(5), 0),
                ],
                0,
            ),
            found("early", vec![pod("h", 1, Some(1), 0)], 0),
            found("late", vec![pod("i", 1, Some(9), 0)], 0),
            found("unstarted", vec![pod("j", 1, None, 0)], 0),
        ];
        let r = order(c, false);
        assert_eq!(
            names(&r),
            [
                "negative",
                "unstarted",
                "late",
                "early",
                "sum",
                "high",
                "violates"
            ]
        );
        assert_eq!(why_behind(&r[1], &r[2], false), RULES[4]);
        assert_eq!(why_behind(&r[3], &r[4], false), RULES[2]);
        assert_eq!(why_behind(&r[5], &r[6], false), RULES[0]);
        // Three victims at -10 sum lower than one at 1 (the 2^31 offset).
        assert_eq!(why_behind(&r[0], &r[1], false), RULES[1]);
    }

    #[test]
    fn deletion_cost_breaks_only_upstreams_ties() {
        let c = vec![
            found("costly", vec![pod("a", 1, Some(5), 100)], 0),
            found("cheap", vec![pod("b", 1, Some(5), -1)], 0),
            found("earlier", vec![pod("c", 1, Some(4), -50)], 0),
        ];
        assert_eq!(
            names(&order(c.clone(), false)),
            ["costly", "cheap", "earlier"]
        );
        let r = order(c, true);
        assert_eq!(names(&r), ["cheap", "costly", "earlier"]);
        assert_eq!(why_behind(&r[0], &r[1], true), RULES[5]);
        assert!(why_behind(&r[0], &r[0], true).starts_with("found later"));
    }
}
