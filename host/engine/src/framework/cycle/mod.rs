//! One scheduling cycle: PreFilter, Filter (parallel, stopping at
//! numFeasibleNodesToFind), PostFilter when nothing fits, PreScore, Score
//! and NormalizeScore (parallel), weights, and the seeded tie-break. The
//! same cycle serves `--explain`, with a recorder attached.

mod filter;
mod nominated;
mod post_filter;
mod record;
mod score;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::model::Pod;

use super::clock::Clock;
use super::cycle_state::CycleState;
use super::explain::Explanation;
use super::fit_error::FitError;
use super::interface::{CycleContext, Nomination};
use super::node_info::Snapshot;
use super::profile::Profile;
use super::timings::Timings;
use super::waiting::WaitingPods;

static CYCLE_IDS: AtomicU64 = AtomicU64::new(1);

/// Where the pod goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub node_index: u32,
    /// Weighted total; `None` when only one node was feasible and scoring
    /// was skipped, as upstream.
    pub score: Option<i64>,
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
}

/// The result of a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Scheduled(Placement),
    Unschedulable(FitError),
    /// Something other than a fit verdict went wrong (upstream's "error"
    /// result), with the message.
    Error(String),
}

/// A cycle's outcome, and what the rest of the pod's scheduling needs.
pub struct CycleResult {
    pub outcome: Outcome,
    /// The cycle's state, for Reserve, Permit and the binding cycle.
    pub state: CycleState,
    /// What PostFilter proposed when nothing fit (preemption).
    pub nomination: Option<Nomination>,
    /// The cycle's id ([`CycleContext::cycle`]).
    pub cycle: u64,
}

/// Runs cycles for one profile.
pub struct Framework {
    /// Swapped whole when a plugin is reloaded; each cycle takes the
    /// current one at its start and uses it to the end, so no cycle mixes
    /// plugin versions.
    profile: RwLock<Arc<Profile>>,
    scheduler_name: String,
    pool: rayon::ThreadPool,
    rng: Mutex<StdRng>,
    next_start: AtomicUsize,
    /// CPU time per plugin and extension point.
    pub timings: Timings,
    /// Pods held at Permit.
    pub waiting: Arc<WaitingPods>,
    /// The clock its plugins read (advanced by each attempt).
    pub clock: Arc<Clock>,
}

impl Framework {
    /// `workers` threads evaluate nodes in parallel; `seed` makes ties
    /// reproducible.
    pub fn new(profile: Profile, workers: usize, seed: u64) -> Self {
        Self::with_waiting(profile, workers, seed, Arc::default())
    }

    /// [`Framework::new`] with the waiting pods its plugins were built
    /// with (a Permit plugin allows pods through them).
    pub fn with_waiting(
        profile: Profile,
        workers: usize,
        seed: u64,
        waiting: Arc<WaitingPods>,
    ) -> Self {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers.max(1))
            .thread_name(|i| format!("sched-worker-{i}"))
            .build()
            .expect("building the scheduler thread pool");
        Self {
            scheduler_name: profile.scheduler_name.clone(),
            profile: RwLock::new(Arc::new(profile)),
            pool,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            next_start: AtomicUsize::new(0),
            timings: Timings::default(),
            waiting,
            clock: Arc::default(),
        }
    }

    /// [`Framework::new`] with the handle its plugins were built with
    /// (their waiting pods and clock).
    pub fn with_handle(
        profile: Profile,
        workers: usize,
        seed: u64,
        handle: &super::registry::Handle,
    ) -> Self {
        let mut fw = Self::with_waiting(profile, workers, seed, handle.waiting.clone());
        fw.clock = handle.clock.clone();
        fw
    }

    /// The profile's name (its `schedulerName`).
    pub fn scheduler_name(&self) -> &str {
        &self.scheduler_name
    }

    /// The current plugin chain.
    pub fn profile(&self) -> Arc<Profile> {
        self.profile.read().clone()
    }

    /// Replaces the chain (for example with a reloaded plugin). Cycles that
    /// already started finish with the chain they started with.
    pub fn set_profile(&self, profile: Profile) {
        *self.profile.write() = Arc::new(profile);
    }

    /// Worker threads of the cycle.
    pub fn workers(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// The cycle's decision for `pod` against `snapshot` (which it does not
    /// change).
    pub fn schedule(&self, pod: &Pod, snapshot: &Snapshot) -> Outcome {
        self.run_cycle(pod, snapshot, None).outcome
    }

    /// The whole cycle; with `recorder`, also what it saw, for `--explain`.
    pub fn run_cycle(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        recorder: Option<&mut Explanation>,
    ) -> CycleResult {
        let profile = self.profile();
        let ctx = CycleContext {
            pod,
            snapshot,
            cycle: CYCLE_IDS.fetch_add(1, Ordering::Relaxed),
            pool: (self.workers() > 1).then_some(&self.pool),
        };
        let mut cycle = Cycle {
            fw: self,
            profile: &profile,
            ctx,
            state: CycleState::default(),
            skip_filter: Vec::new(),
            recording: recorder.is_some(),
            record: record::Record::default(),
        };
        let (outcome, nomination) = cycle.run();
        if let Some(explanation) = recorder {
            cycle.explain(&outcome, explanation);
        }
        CycleResult {
            outcome,
            state: cycle.state,
            nomination,
            cycle: cycle.ctx.cycle,
        }
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

/// One cycle in progress.
struct Cycle<'a> {
    fw: &'a Framework,
    profile: &'a Profile,
    ctx: CycleContext<'a>,
    state: CycleState,
    /// Per Filter plugin (profile order): it said Skip at PreFilter.
    skip_filter: Vec<bool>,
    /// A recorder is attached: keep what `--explain` shows.
    recording: bool,
    record: record::Record,
}

impl Cycle<'_> {
    fn run(&mut self) -> (Outcome, Option<Nomination>) {
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
        if let Err((reason, counts_nodes)) = pre {
            fit.pod_reason = Some(reason);
            fit.pod_reason_counts_nodes = counts_nodes;
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
    fn unschedulable(
        &mut self,
        mut fit: FitError,
        found: &filter::Found,
    ) -> (Outcome, Option<Nomination>) {
        for (_, r) in &found.rejections {
            r.reasons.iter().for_each(|reason| fit.add(reason));
        }
        let nomination = self.post_filter(&mut fit, found);
        (Outcome::Unschedulable(fit), nomination)
    }

    fn score_and_select(&mut self, found: &filter::Found, n: usize) -> Outcome {
        if self.recording {
            self.record.feasible = found.feasible.iter().map(|n| n.index).collect();
        }
        let started = Instant::now();
        let scored = self.score_nodes(&found.feasible);
        let ok = scored.is_ok();
        self.timed_point("Score", ok, "Error", started);
        match scored {
            Ok(totals) => {
                let best = self.fw.select(&totals);
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
        self.fw
            .timings
            .extension_point(point, status, started.elapsed());
    }
}

/// Records the time from its creation to its drop (so early returns are
/// timed too).
struct Timed<'a>(&'a Timings, &'a str, &'static str, Instant);

impl<'a> Timed<'a> {
    fn start(timings: &'a Timings, plugin: &'a str, point: &'static str) -> Self {
        Self(timings, plugin, point, Instant::now())
    }
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        let elapsed: Duration = self.3.elapsed();
        self.0.record(self.1, self.2, elapsed);
    }
}
