//! One cycle in progress: the pod's context, its CycleState and what the
//! framework lends it (workers, timings, the tie-break generator). Its
//! phases are in `filter`, `nominated`, `post_filter`, `score` and
//! `record`; this module runs them in order.

use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;

use crate::framework::context::CycleContext;
use crate::framework::cycle_state::CycleState;
use crate::framework::fit_error::FitError;
use crate::framework::points::Nomination;
use crate::framework::profile::Profile;
use crate::framework::status::SchedulingError;
use crate::framework::timings::Timings;

use super::verdict::{Found, Outcome, Placement, Record};

/// One cycle in progress.
pub(crate) struct Cycle<'a> {
    pub timings: &'a Timings,
    pub pool: &'a rayon::ThreadPool,
    /// Where the next cycle's Filter starts (upstream's
    /// nextStartNodeIndex).
    pub next_start: &'a AtomicUsize,
    pub rng: &'a Mutex<StdRng>,
    pub profile: &'a Profile,
    pub ctx: CycleContext<'a>,
    pub state: CycleState,
    /// Per Filter plugin (profile order): it said Skip at PreFilter.
    pub skip_filter: Vec<bool>,
    /// The PreFilterResult: the only nodes to filter, and the reason the
    /// others fail; `None`, every node.
    pub node_subset: Option<(std::collections::BTreeSet<String>, String)>,
    /// A recorder is attached: keep what `--explain` shows.
    pub recording: bool,
    pub record: Record,
}

impl Cycle<'_> {
    pub fn run(&mut self) -> (Outcome, Option<Nomination>) {
        let num_nodes = self.ctx.snapshot.num_nodes();
        let mut fit = FitError {
            num_all_nodes: num_nodes,
            ..Default::default()
        };
        if let Some(msg) = &self.ctx.pod.unsupported {
            fit.pod_reason = Some(msg.clone());
            return (Outcome::Unschedulable(fit), None);
        }
        if num_nodes == 0 {
            fit.pod_reason = Some("no nodes available to schedule pods".into());
            return (Outcome::Unschedulable(fit), None);
        }
        let started = Instant::now();
        let pre = self.pre_filter();
        self.timed_point("PreFilter", pre.is_ok(), "Unschedulable", started);
        if let Err((reason, counts_nodes, position)) = pre {
            if let Some(p) = self.profile.pre_filter.get(position) {
                fit.unschedulable_plugins.insert(p.name().to_string());
            }
            fit.pod_reason = Some(reason);
            fit.pod_reason_counts_nodes = counts_nodes;
            let complete = !self.profile.pre_filter[position..]
                .iter()
                .any(|p| p.has_extensions());
            fit.post_filter = self
                .profile
                .post_filter
                .iter()
                .filter_map(|p| p.after_pre_filter_rejection(num_nodes, complete))
                .collect();
            return (Outcome::Unschedulable(fit), None);
        }
        let started = Instant::now();
        let found = self.find_feasible();
        self.timed_point(
            "Filter",
            !found.feasible.is_empty(),
            "Unschedulable",
            started,
        );
        // A Filter plugin that failed (rather than rejected) fails the
        // attempt, as upstream's RunFilterPlugins does.
        if let Some((_, r)) = found.rejections.iter().find(|(_, r)| r.error) {
            let cause = SchedulingError::Filter {
                plugin: self.profile.filter[r.plugin].name().to_string(),
                cause: r.reasons.join(", "),
            };
            return (Outcome::Error(cause), None);
        }
        match found.feasible.len() {
            0 => self.unschedulable(fit, &found),
            1 => {
                let node = found.feasible[0];
                if self.recording {
                    // Shown, not used: upstream skips scoring one node.
                    self.record.feasible = vec![node.index];
                    self.record.totals = self.score_nodes(&found.feasible).ok();
                }
                (
                    Outcome::Scheduled(Placement {
                        node: node.name().to_string(),
                        node_index: node.index,
                        score: None,
                        evaluated_nodes: found.processed,
                        feasible_nodes: 1,
                    }),
                    None,
                )
            }
            n => (self.score_and_select(&found, n), None),
        }
    }

    /// No node fits: the FitError, then PostFilter.
    fn unschedulable(&mut self, mut fit: FitError, found: &Found) -> (Outcome, Option<Nomination>) {
        for (_, r) in &found.rejections {
            r.reasons.iter().for_each(|reason| fit.add(reason));
            if let Some(p) = self.profile.filter.get(r.plugin) {
                fit.unschedulable_plugins.insert(p.name().to_string());
            }
        }
        let nomination = self.post_filter(&mut fit, found);
        (Outcome::Unschedulable(fit), nomination)
    }

    fn score_and_select(&mut self, found: &Found, n: usize) -> Outcome {
        if self.recording {
            self.record.feasible = found.feasible.iter().map(|n| n.index).collect();
        }
        let started = Instant::now();
        let scored = self.score_nodes(&found.feasible);
        let ok = scored.is_ok();
        self.timed_point("Score", ok, "Error", started);
        match scored {
            Ok(totals) => {
                let best = self.select(&totals);
                self.record.totals = Some(totals.clone());
                Outcome::Scheduled(Placement {
                    node: found.feasible[best].name().to_string(),
                    node_index: found.feasible[best].index,
                    score: Some(totals[best]),
                    evaluated_nodes: found.processed,
                    feasible_nodes: n,
                })
            }
            Err(e) => Outcome::Error(e),
        }
    }

    fn timed_point(&self, point: &'static str, ok: bool, failed: &'static str, started: Instant) {
        let status = if ok { "Success" } else { failed };
        self.timings
            .extension_point(point, status, started.elapsed());
    }

    /// Worker threads of the cycle.
    pub fn workers(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Highest total wins; ties are broken uniformly at random with the
    /// seeded generator (upstream's reservoir sampling).
    fn select(&self, totals: &[i64]) -> usize {
        let mut rng = self.rng.lock();
        let mut best = 0;
        let mut count = 0u64;
        for (i, &t) in totals.iter().enumerate() {
            if t > totals[best] {
                best = i;
                count = 1;
            } else if t == totals[best] {
                count += 1;
                if rng.random_range(0..count) == 0 {
                    best = i;
                }
            }
        }
        best
    }
}
