//! One scheduling cycle: PreFilter, Filter (parallel, stopping at
//! numFeasibleNodesToFind), PostFilter when nothing fits, PreScore, Score
//! and NormalizeScore (parallel), weights, and the seeded tie-break. The
//! same cycle serves `--explain`, with a recorder attached.

mod filter;
mod nominated;
mod phase;
mod post_filter;
mod record;
mod score;
mod verdict;

pub use verdict::{Outcome, Placement};

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::model::Pod;

use super::clock::Clock;
use super::cycle_state::CycleState;
use super::explain::Explanation;
use super::interface::{CycleContext, Nomination};
use super::node_info::Snapshot;
use super::profile::Profile;
use super::timings::Timings;

use super::waiting::WaitingPods;
use phase::Cycle;
use verdict::Record;

static CYCLE_IDS: AtomicU64 = AtomicU64::new(1);

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
        handle: &super::handle::Handle,
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
            device_rankers: &profile.device_rankers,
            explaining: recorder.is_some(),
        };
        let mut cycle = Cycle {
            timings: &self.timings,
            pool: &self.pool,
            next_start: &self.next_start,
            rng: &self.rng,
            profile: &profile,
            ctx,
            state: CycleState::default(),
            skip_filter: Vec::new(),
            node_subset: None,
            recording: recorder.is_some(),
            record: Record::default(),
        };
        // With workers, the whole cycle runs on one of them: the Filter
        // waves and Score's chunks it hands out are then work for the pool
        // it is part of, not a trip from this thread into the pool and back
        // (one per wave and per plugin, each a wake-up and a wait, which a
        // busy machine pays in context switches). With one, on this thread.
        let (outcome, nomination) = if self.workers() > 1 {
            self.pool.install(|| cycle.run())
        } else {
            cycle.run()
        };
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
}
