//! A configured wasm plugin: one compiled module, a pool of instances (one
//! per worker thread, so Filter and Score run in parallel without a global
//! lock), and the policy for what happens when it fails.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::framework::registry::Handle;
use crate::framework::{PluginHealth, RankInput, Snapshot};
use crate::model::Pod;

use super::bindings::types as wit;
use super::convert;
use super::error::{FailureKind, PluginFailure};
use super::instance::{Instance, Limits};
use super::module::PluginModule;

/// What a plugin failure (trap, timeout, memory, bad result) does to the
/// pod being scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
pub enum FailurePolicy {
    /// The node(s) being evaluated are rejected with
    /// `plugin <name> failed: <cause>`.
    #[default]
    Fail,
    /// The plugin is skipped for this pod; the skip is counted.
    Ignore,
}

/// How a plugin is run.
#[derive(Debug, Clone)]
pub struct WasmSettings {
    /// `pluginConfig` args as JSON text.
    pub args: String,
    pub limits: Limits,
    pub failure_policy: FailurePolicy,
}

/// Counters a plugin keeps about itself (exported as metrics and shown by
/// `simulate`).
#[derive(Debug, Default)]
pub struct PluginStats {
    failures: Mutex<BTreeMap<&'static str, u64>>,
    pub skips: AtomicU64,
    pub instances_created: AtomicU64,
    pub last_failure: Mutex<Option<String>>,
    /// The most linear memory one instance has had, bytes.
    pub peak_memory: AtomicU64,
}

impl PluginStats {
    fn record(&self, f: &PluginFailure) {
        *self.failures.lock().entry(f.kind.as_str()).or_insert(0) += 1;
        *self.last_failure.lock() = Some(f.to_string());
    }

    /// Failures by kind (`timeout`, `memory`, `trap`, ...).
    pub fn failures(&self) -> BTreeMap<&'static str, u64> {
        self.failures.lock().clone()
    }
}

/// Why a call into a plugin gave no answer.
#[derive(Debug)]
pub enum CallError {
    /// The plugin refused the pod: `cycle-start`, or the call itself
    /// (Reserve, a deletion cost), returned an error result.
    Refused(String),
    /// The plugin failed (a trap, its deadline, its memory cap, a bad
    /// result); its instance was replaced.
    Failed(PluginFailure),
}

impl From<PluginFailure> for CallError {
    fn from(f: PluginFailure) -> Self {
        Self::Failed(f)
    }
}

/// What a call into a plugin yields.
pub type CallResult<T> = Result<T, CallError>;

/// A wasm plugin ready to take part in scheduling cycles.
pub struct WasmPlugin {
    pub name: String,
    pub module: Arc<PluginModule>,
    pub settings: WasmSettings,
    slots: Vec<Mutex<Option<Instance>>>,
    pub stats: PluginStats,
    /// The profile's framework handle (Permit allows waiting pods there).
    pub handle: Handle,
}

/// The plan of a plugin that could not say (all extension points run).
pub const ALL: wit::CyclePlan = wit::CyclePlan {
    filter: true,
    score: true,
};

/// Which instance slot the current thread uses: one per worker of the
/// scheduler's thread pool, slot 0 for any other thread.
pub fn current_slot() -> usize {
    rayon::current_thread_index().map_or(0, |i| i + 1)
}

impl WasmPlugin {
    /// Builds the plugin and its first instance, which runs `init`: a
    /// plugin that rejects its args fails here, at start.
    pub fn new(
        name: &str,
        module: Arc<PluginModule>,
        settings: WasmSettings,
        workers: usize,
    ) -> Result<Self, PluginFailure> {
        let first = Instance::new(name, &module, settings.limits, &settings.args)?;
        let mut slots: Vec<Mutex<Option<Instance>>> =
            (0..=workers).map(|_| Mutex::new(None)).collect();
        *slots[0].get_mut() = Some(first);
        let stats = PluginStats::default();
        stats.instances_created.store(1, Ordering::Relaxed);
        Ok(Self {
            name: name.to_string(),
            module,
            settings,
            slots,
            stats,
            handle: Handle::default(),
        })
    }

    /// The plugin, using `handle` (its profile's waiting pods).
    pub fn with_handle(mut self, handle: Handle) -> Self {
        self.handle = handle;
        self
    }

    /// What the plugin's counters say, for reports and metrics.
    pub fn health_report(&self) -> PluginHealth {
        PluginHealth {
            failures: self.stats.failures(),
            skips: self.stats.skips.load(Ordering::Relaxed),
            instances: self.stats.instances_created.load(Ordering::Relaxed),
            last_failure: self.stats.last_failure.lock().clone(),
            memory_bytes: self.stats.peak_memory.load(Ordering::Relaxed),
        }
    }

    /// Runs `f` on this thread's instance as it is (no catch-up, no
    /// cycle): for calls after the cycle, such as Unreserve. `None` when
    /// this thread has no instance.
    pub fn with_current<R>(
        &self,
        f: impl FnOnce(&mut Instance) -> Result<R, PluginFailure>,
    ) -> Option<Result<R, PluginFailure>> {
        let slot = &self.slots[current_slot() % self.slots.len()];
        let mut guard = slot.lock();
        let inst = guard.as_mut()?;
        let result = f(inst);
        if let Err(failure) = &result {
            *guard = None;
            self.stats.record(failure);
        }
        Some(result)
    }

    pub fn failure_policy(&self) -> FailurePolicy {
        self.settings.failure_policy
    }

    /// Runs `f` on this thread's instance, after bringing the instance up
    /// to date with `snapshot` and, when `cycle` is given, starting that
    /// cycle on it. A failing instance is dropped; the next call builds a
    /// fresh one.
    pub(super) fn with_instance<R>(
        &self,
        snapshot: &Snapshot,
        cycle: Option<(u64, &Pod)>,
        f: impl FnOnce(&mut Instance) -> CallResult<R>,
    ) -> CallResult<R> {
        let slot = &self.slots[current_slot() % self.slots.len()];
        let mut guard = slot.lock();
        let result = self.run(&mut guard, snapshot, cycle, f);
        if let Err(CallError::Failed(failure)) = &result {
            *guard = None;
            self.stats.record(failure);
            tracing::warn!(plugin = %self.name, %failure, "plugin call failed; its instance is replaced");
        }
        result
    }

    /// Brings the slot's instance up to date with `snapshot`: a fresh one
    /// (new, or replacing one too far behind) gets the whole cluster under
    /// `initTimeout`; a current one the changes since, under the call
    /// deadline.
    fn sync(&self, slot: &mut Option<Instance>, snapshot: &Snapshot) -> Result<(), PluginFailure> {
        let generation = snapshot.generation();
        let behind = slot
            .as_ref()
            .is_some_and(|i| i.synced && snapshot.changes_since(i.applied).is_none());
        if slot.is_none() || behind {
            let inst = Instance::new(
                &self.name,
                &self.module,
                self.settings.limits,
                &self.settings.args,
            )?;
            self.stats.instances_created.fetch_add(1, Ordering::Relaxed);
            *slot = Some(inst);
        }
        let inst = slot.as_mut().expect("instance was just ensured");
        if !inst.synced {
            let deltas = convert::deltas(&snapshot.as_changes(), &inst.interests);
            inst.apply_batches(&deltas, true)?;
            inst.synced = true;
        } else if inst.applied != generation {
            let changes = snapshot.changes_since(inst.applied).unwrap_or_default();
            let deltas = convert::deltas(changes, &inst.interests);
            inst.apply_batches(&deltas, false)?;
        }
        inst.applied = generation;
        self.stats
            .peak_memory
            .fetch_max(inst.memory_bytes() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn run<R>(
        &self,
        slot: &mut Option<Instance>,
        snapshot: &Snapshot,
        cycle: Option<(u64, &Pod)>,
        f: impl FnOnce(&mut Instance) -> CallResult<R>,
    ) -> CallResult<R> {
        self.sync(slot, snapshot)?;
        let inst = slot.as_mut().expect("sync leaves an instance");
        if let Some((id, pod)) = cycle {
            if inst.cycle.map(|(c, _)| c) != Some(id) {
                inst.cycle = None;
                let record = convert::pod(pod, &inst.interests);
                let plan = inst.cycle_start(&record)?.map_err(CallError::Refused)?;
                inst.cycle = Some((id, plan));
            }
        }
        f(inst)
    }

    /// PreFilter/PreScore: starts the pod's cycle on this thread's
    /// instance; returns the plugin's plan for the cycle.
    pub fn cycle_start(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
    ) -> CallResult<wit::CyclePlan> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| {
            Ok(i.cycle.map_or(ALL, |(_, plan)| plan))
        })
    }

    pub fn call_filter(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        nodes: &[u32],
    ) -> CallResult<Vec<Option<wit::Rejection>>> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| Ok(i.filter(nodes)?))
    }

    pub fn call_score(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        nodes: &[u32],
    ) -> CallResult<Vec<i64>> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| Ok(i.score(nodes)?))
    }

    /// NormalizeScore; `None` when the plugin does not export it.
    pub fn call_normalize(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        nodes: &[u32],
        scores: &[i64],
    ) -> CallResult<Option<Vec<i64>>> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| {
            Ok(i.normalize(nodes, scores)?)
        })
    }

    /// Reserve and PreBind output for the cycle's pod on `node`.
    pub fn call_reserve(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        node: u32,
    ) -> CallResult<wit::PodPatch> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| {
            i.reserve(node)?.map_err(CallError::Refused)
        })
    }

    /// Device ranks for the cycle's pod's candidate sets on `node`.
    pub fn call_rank_devices(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        node: u32,
        input: &RankInput,
    ) -> CallResult<Vec<u8>> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| {
            Ok(i.rank_devices(node, input)?)
        })
    }

    pub fn call_permit(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        node: u32,
    ) -> CallResult<wit::PermitResult> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| Ok(i.permit(node)?))
    }

    pub fn call_post_filter(
        &self,
        snapshot: &Snapshot,
        cycle: u64,
        pod: &Pod,
        candidates: &[wit::Candidate],
    ) -> CallResult<Option<wit::PreemptionAdvice>> {
        self.with_instance(snapshot, Some((cycle, pod)), |i| {
            Ok(i.post_filter(candidates)?)
        })
    }

    /// The deletion cost of a pod (no cycle; the instance is brought up to
    /// date with `snapshot`, which the controller leaves empty).
    pub fn call_deletion_cost(
        &self,
        snapshot: &Snapshot,
        pod: &wit::PodStatus,
        metrics: &[(String, f64)],
    ) -> Result<Option<i32>, PluginFailure> {
        match self.with_instance(snapshot, None, |i| Ok(i.deletion_cost(pod, metrics)?)) {
            Ok(cost) => Ok(cost),
            Err(CallError::Refused(reason)) => Err(PluginFailure::new(FailureKind::Plugin, reason)),
            Err(CallError::Failed(f)) => Err(f),
        }
    }

    /// Records that the plugin was skipped for a pod (`Ignore` policy).
    pub fn count_skip(&self) {
        self.stats.skips.fetch_add(1, Ordering::Relaxed);
    }

    /// A failure that is the plugin's fault but not caught by the
    /// instance (a score out of range), recorded like the others.
    pub fn record_failure(&self, failure: &PluginFailure) {
        self.stats.record(failure);
    }
}

/// Out-of-range scores are the plugin's failure, like a trap.
pub fn check_scores(scores: &[i64]) -> Result<(), PluginFailure> {
    match scores.iter().find(|s| !(0..=100).contains(*s)) {
        Some(s) => Err(PluginFailure::new(
            FailureKind::BadResult,
            format!("score {s} is outside 0..=100"),
        )),
        None => Ok(()),
    }
}
