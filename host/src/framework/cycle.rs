//! One scheduling cycle: PreFilter, Filter (parallel, stopping at
//! numFeasibleNodesToFind), PreScore, Score, NormalizeScore, weights, and
//! the seeded tie-break. Also the `--explain` variant that evaluates every
//! node with every plugin.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::model::Pod;
use crate::wasm::bindings::types::CyclePlan;
use crate::wasm::plugin::{check_scores, ALL};
use crate::wasm::{FailurePolicy, WasmPlugin};

use super::fit_error::FitError;
use super::interface::{CycleContext, CycleState, MAX_NODE_SCORE};
use super::node_info::{NodeInfo, Snapshot};
use super::profile::{num_feasible_nodes_to_find, FilterEntry, Profile, ScoreEntry};
use super::timings::Timings;

static CYCLE_IDS: AtomicU64 = AtomicU64::new(1);

/// One plugin's rejection of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRejection {
    /// Position of the rejecting plugin in the profile's Filter list (an
    /// index, not a name: rejections are made by the thousand per cycle).
    pub plugin: usize,
    pub reasons: Vec<String>,
    pub unresolvable: bool,
}

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

/// Per-plugin state of one cycle shared by the workers: a wasm plugin
/// that failed is not called again in the same cycle.
#[derive(Default)]
struct PluginTrouble {
    /// `Fail` policy: the message every further node gets.
    failed: Mutex<Option<String>>,
    /// `Ignore` policy: skip it.
    ignored: std::sync::atomic::AtomicBool,
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
}

impl Framework {
    /// `workers` threads evaluate nodes in parallel; `seed` makes ties
    /// reproducible.
    pub fn new(profile: Profile, workers: usize, seed: u64) -> Self {
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
        }
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

    /// Schedules one pod against the snapshot (which it does not change).
    pub fn schedule(&self, pod: &Pod, snapshot: &Snapshot) -> Outcome {
        let profile = self.profile();
        let profile = &*profile;
        let cycle = CYCLE_IDS.fetch_add(1, Ordering::Relaxed);
        let num_nodes = snapshot.num_nodes();
        let mut fit = FitError {
            num_all_nodes: num_nodes,
            ..Default::default()
        };
        if let Some(msg) = &pod.unsupported {
            fit.pod_reason = Some(msg.clone());
            return Outcome::Unschedulable(fit);
        }
        if num_nodes == 0 {
            fit.pod_reason = Some("no nodes available to schedule pods".into());
            return Outcome::Unschedulable(fit);
        }
        let ctx = CycleContext { pod, snapshot };
        let mut state = CycleState::default();
        let started = Instant::now();
        let pre = self.pre_filter(profile, &ctx, &mut state, cycle);
        self.timings.extension_point(
            "PreFilter",
            if pre.is_ok() {
                "Success"
            } else {
                "Unschedulable"
            },
            started.elapsed(),
        );
        if let Err(reason) = pre {
            fit.pod_reason = Some(reason);
            return Outcome::Unschedulable(fit);
        }
        let filter_started = Instant::now();

        // Filter, in waves of one chunk per worker, in round-robin order
        // from where the previous cycle stopped (deterministic for a seed).
        let all: Vec<&NodeInfo> = snapshot.nodes().collect();
        let start = self.next_start.load(Ordering::Relaxed) % all.len();
        let order: Vec<&NodeInfo> = all[start..]
            .iter()
            .chain(all[..start].iter())
            .copied()
            .collect();
        let to_find = num_feasible_nodes_to_find(num_nodes, profile.percentage_of_nodes_to_score);
        let workers = self.pool.current_num_threads();
        let chunk = (to_find / workers).clamp(16, 256);
        let trouble: Vec<PluginTrouble> = profile
            .filters
            .iter()
            .map(|_| PluginTrouble::default())
            .collect();
        let mut feasible: Vec<&NodeInfo> = Vec::new();
        let mut rejections: Vec<NodeRejection> = Vec::new();
        let mut processed = 0;
        for wave in order.chunks(chunk * workers) {
            let results: Vec<Vec<Option<NodeRejection>>> = self.pool.install(|| {
                wave.par_chunks(chunk)
                    .map(|nodes| self.filter_nodes(profile, &ctx, &state, cycle, nodes, &trouble))
                    .collect()
            });
            for (node, verdict) in wave.iter().zip(results.into_iter().flatten()) {
                if feasible.len() >= to_find {
                    break;
                }
                processed += 1;
                match verdict {
                    None => feasible.push(node),
                    // Counted only if the pod fits nowhere: most cycles
                    // never need the FitError.
                    Some(r) => rejections.push(r),
                }
            }
            if feasible.len() >= to_find {
                break;
            }
        }
        self.next_start
            .store((start + processed) % all.len(), Ordering::Relaxed);
        self.timings.extension_point(
            "Filter",
            if feasible.is_empty() {
                "Unschedulable"
            } else {
                "Success"
            },
            filter_started.elapsed(),
        );

        match feasible.len() {
            0 => {
                for r in &rejections {
                    r.reasons.iter().for_each(|reason| fit.add(reason));
                }
                Outcome::Unschedulable(fit)
            }
            1 => Outcome::Scheduled(Placement {
                node: feasible[0].name().to_string(),
                node_index: feasible[0].index,
                score: None,
                evaluated_nodes: processed,
                feasible_nodes: 1,
            }),
            n => {
                let started = Instant::now();
                let scored = self.score_nodes(profile, &ctx, &mut state, cycle, &feasible);
                let status = if scored.is_ok() { "Success" } else { "Error" };
                self.timings
                    .extension_point("Score", status, started.elapsed());
                match scored {
                    Ok(totals) => {
                        let best = self.select(&totals);
                        Outcome::Scheduled(Placement {
                            node: feasible[best].name().to_string(),
                            node_index: feasible[best].index,
                            score: Some(totals[best]),
                            evaluated_nodes: processed,
                            feasible_nodes: n,
                        })
                    }
                    Err(e) => Outcome::Error(e),
                }
            }
        }
    }

    /// PreFilter of native plugins and cycle-start of wasm plugins (on the
    /// calling thread's instance). A rejection is the pod's reason.
    fn pre_filter(
        &self,
        profile: &Profile,
        ctx: &CycleContext,
        state: &mut CycleState,
        cycle: u64,
    ) -> Result<(), String> {
        for entry in &profile.filters {
            let _record = Record(&self.timings, entry.name(), "PreFilter", Instant::now());
            match entry {
                FilterEntry::Native(p) => {
                    p.pre_filter(ctx, state).map_err(|r| r.reasons.join(", "))?;
                }
                FilterEntry::Wasm(w) => wasm_cycle_start(w, ctx, state, cycle)?,
            }
        }
        for s in &profile.scores {
            if let ScoreEntry::Wasm(w) = &s.plugin {
                if !profile
                    .filters
                    .iter()
                    .any(|f| matches!(f, FilterEntry::Wasm(x) if std::ptr::eq(&**x, &**w)))
                {
                    wasm_cycle_start(w, ctx, state, cycle)?;
                }
            }
        }
        Ok(())
    }

    /// Runs the filter plugins in order over `nodes`; each node stops at
    /// its first rejection, as upstream.
    fn filter_nodes(
        &self,
        profile: &Profile,
        ctx: &CycleContext,
        state: &CycleState,
        cycle: u64,
        nodes: &[&NodeInfo],
        trouble: &[PluginTrouble],
    ) -> Vec<Option<NodeRejection>> {
        let mut verdicts: Vec<Option<NodeRejection>> = vec![None; nodes.len()];
        let mut alive: Vec<usize> = (0..nodes.len()).collect();
        for (position, (entry, trouble)) in profile.filters.iter().zip(trouble).enumerate() {
            if alive.is_empty() {
                break;
            }
            let started = Instant::now();
            let _record = Record(&self.timings, entry.name(), "Filter", started);
            match entry {
                FilterEntry::Native(p) => alive.retain(|&i| match p.filter(ctx, state, nodes[i]) {
                    Ok(()) => true,
                    Err(r) => {
                        verdicts[i] = Some(NodeRejection {
                            plugin: position,
                            reasons: r.reasons,
                            unresolvable: r.unresolvable,
                        });
                        false
                    }
                }),
                FilterEntry::Wasm(w) => {
                    if !w.module.exports.filter
                        || !plan_of(state, w).filter
                        || trouble.ignored.load(Ordering::Relaxed)
                    {
                        continue;
                    }
                    let failed = trouble.failed.lock().clone();
                    let result = match failed {
                        Some(msg) => Err(msg),
                        None => {
                            let idx: Vec<u32> = alive.iter().map(|&i| nodes[i].index).collect();
                            match w.filter(ctx.snapshot, cycle, ctx.pod, &idx) {
                                Ok(Ok(v)) => Ok(v),
                                Ok(Err(pod_reason)) => Err(pod_reason),
                                Err(failure) => match w.failure_policy() {
                                    FailurePolicy::Ignore => {
                                        if !trouble.ignored.swap(true, Ordering::Relaxed) {
                                            w.count_skip();
                                        }
                                        continue;
                                    }
                                    FailurePolicy::Fail => {
                                        let msg = format!("plugin {} failed: {failure}", w.name);
                                        *trouble.failed.lock() = Some(msg.clone());
                                        Err(msg)
                                    }
                                },
                            }
                        }
                    };
                    match result {
                        Ok(v) => {
                            let mut k = 0;
                            alive.retain(|&i| {
                                let verdict = v[k].clone();
                                k += 1;
                                match verdict {
                                    None => true,
                                    Some(r) => {
                                        verdicts[i] = Some(NodeRejection {
                                            plugin: position,
                                            reasons: vec![r.reason],
                                            unresolvable: r.unresolvable,
                                        });
                                        false
                                    }
                                }
                            });
                        }
                        Err(msg) => {
                            for &i in &alive {
                                verdicts[i] = Some(NodeRejection {
                                    plugin: position,
                                    reasons: vec![msg.clone()],
                                    unresolvable: true,
                                });
                            }
                            alive.clear();
                        }
                    }
                }
            }
        }
        verdicts
    }

    /// PreScore, Score, NormalizeScore and weights over the feasible
    /// nodes; returns the weighted totals in the same order.
    fn score_nodes(
        &self,
        profile: &Profile,
        ctx: &CycleContext,
        state: &mut CycleState,
        cycle: u64,
        feasible: &[&NodeInfo],
    ) -> Result<Vec<i64>, String> {
        let mut totals = vec![0i64; feasible.len()];
        for (s, scores) in profile
            .scores
            .iter()
            .zip(self.plugin_scores(profile, ctx, state, cycle, feasible)?)
        {
            if let Some(scores) = scores {
                for (t, v) in totals.iter_mut().zip(scores) {
                    *t += v * s.weight;
                }
            }
        }
        Ok(totals)
    }

    /// Each score plugin's normalized scores (`None`: plugin skipped).
    fn plugin_scores(
        &self,
        profile: &Profile,
        ctx: &CycleContext,
        state: &mut CycleState,
        cycle: u64,
        feasible: &[&NodeInfo],
    ) -> Result<Vec<Option<Vec<i64>>>, String> {
        for s in &profile.scores {
            if let ScoreEntry::Native(p) = &s.plugin {
                let _record = Record(&self.timings, p.name(), "PreScore", Instant::now());
                p.pre_score(ctx, state, feasible)
                    .map_err(|e| format!("plugin {} PreScore: {e}", p.name()))?;
            }
        }
        let state = &*state;
        let mut out = Vec::new();
        for s in &profile.scores {
            let _record = Record(&self.timings, s.plugin.name(), "Score", Instant::now());
            let scores = match &s.plugin {
                ScoreEntry::Native(p) => {
                    let mut scores: Vec<i64> = self
                        .pool
                        .install(|| {
                            feasible
                                .par_iter()
                                .map(|n| p.score(ctx, state, n))
                                .collect::<Result<_, _>>()
                        })
                        .map_err(|e| format!("plugin {} Score: {e}", p.name()))?;
                    p.normalize(ctx, state, &mut scores)
                        .map_err(|e| format!("plugin {} NormalizeScore: {e}", p.name()))?;
                    if let Some(bad) = scores.iter().find(|v| !(0..=MAX_NODE_SCORE).contains(*v)) {
                        return Err(format!(
                            "plugin {} returned score {bad} outside 0..=100",
                            p.name()
                        ));
                    }
                    Some(scores)
                }
                // Upstream's Skip: the plugin said Score does not matter
                // for this pod.
                ScoreEntry::Wasm(w) if !plan_of(state, w).score => None,
                ScoreEntry::Wasm(w) => match self.wasm_scores(w, ctx, cycle, feasible) {
                    Ok(v) => Some(v),
                    Err(msg) => match w.failure_policy() {
                        FailurePolicy::Ignore => {
                            w.count_skip();
                            None
                        }
                        FailurePolicy::Fail => return Err(msg),
                    },
                },
            };
            out.push(scores);
        }
        Ok(out)
    }

    /// A wasm plugin's Score and NormalizeScore over all feasible nodes in
    /// one batch, on the instance of the scheduling thread, which already
    /// holds the cycle from PreFilter. Spreading Score over the workers
    /// would make each worker instance run `cycle-start` first, and that
    /// can cost more than scoring (a locality plugin scans the placed
    /// pods there) while a batched score costs well under a microsecond
    /// per node (docs/contract.md).
    fn wasm_scores(
        &self,
        w: &WasmPlugin,
        ctx: &CycleContext,
        cycle: u64,
        feasible: &[&NodeInfo],
    ) -> Result<Vec<i64>, String> {
        let fail = |f: crate::wasm::PluginFailure| format!("plugin {} failed: {f}", w.name);
        let idx: Vec<u32> = feasible.iter().map(|n| n.index).collect();
        let raw = match w.score(ctx.snapshot, cycle, ctx.pod, &idx) {
            Ok(Ok(v)) => v,
            Ok(Err(reason)) => return Err(format!("plugin {} refused the pod: {reason}", w.name)),
            Err(f) => return Err(fail(f)),
        };
        let normalized = match w.normalize(ctx.snapshot, cycle, ctx.pod, &idx, &raw) {
            Ok(Ok(Some(v))) => v,
            Ok(Ok(None)) => raw,
            Ok(Err(reason)) => return Err(format!("plugin {} refused the pod: {reason}", w.name)),
            Err(f) => return Err(fail(f)),
        };
        if let Err(f) = check_scores(&normalized) {
            w.record_failure(&f);
            return Err(fail(f));
        }
        Ok(normalized)
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

    /// Evaluates every node with every plugin (Filter verdicts of all
    /// plugins, not only the first rejection; scores of all plugins on the
    /// feasible nodes): the answer to "why did my pod land there?".
    pub fn explain(&self, pod: &Pod, snapshot: &Snapshot) -> Explanation {
        let profile = self.profile();
        let profile = &*profile;
        let cycle = CYCLE_IDS.fetch_add(1, Ordering::Relaxed);
        let ctx = CycleContext { pod, snapshot };
        let mut state = CycleState::default();
        let nodes: Vec<&NodeInfo> = snapshot.nodes().collect();
        let mut out = Explanation {
            pod_reason: pod.unsupported.clone(),
            nodes: nodes
                .iter()
                .map(|n| NodeExplanation {
                    node: n.name().to_string(),
                    filters: Vec::new(),
                    scores: Vec::new(),
                    total: None,
                })
                .collect(),
        };
        if out.pod_reason.is_some() {
            return out;
        }
        if let Err(reason) = self.pre_filter(profile, &ctx, &mut state, cycle) {
            out.pod_reason = Some(reason);
            return out;
        }
        for entry in &profile.filters {
            let verdicts: Vec<FilterVerdict> = match entry {
                FilterEntry::Native(p) => nodes
                    .iter()
                    .map(|n| match p.filter(&ctx, &state, n) {
                        Ok(()) => FilterVerdict::Pass,
                        Err(r) => FilterVerdict::Reject(r.reasons.join(", ")),
                    })
                    .collect(),
                FilterEntry::Wasm(w) if !w.module.exports.filter => continue,
                FilterEntry::Wasm(w) if !plan_of(&state, w).filter => {
                    vec![FilterVerdict::Skip; nodes.len()]
                }
                FilterEntry::Wasm(w) => {
                    let idx: Vec<u32> = nodes.iter().map(|n| n.index).collect();
                    match w.filter(snapshot, cycle, pod, &idx) {
                        Ok(Ok(v)) => v
                            .into_iter()
                            .map(|r| {
                                r.map_or(FilterVerdict::Pass, |r| FilterVerdict::Reject(r.reason))
                            })
                            .collect(),
                        Ok(Err(reason)) => vec![FilterVerdict::Reject(reason); nodes.len()],
                        Err(f) => vec![FilterVerdict::Error(f.to_string()); nodes.len()],
                    }
                }
            };
            for (e, v) in out.nodes.iter_mut().zip(verdicts) {
                e.filters.push((entry.name().to_string(), v));
            }
        }
        let feasible_pos: Vec<usize> = (0..nodes.len())
            .filter(|&i| {
                out.nodes[i]
                    .filters
                    .iter()
                    .all(|(_, v)| matches!(v, FilterVerdict::Pass | FilterVerdict::Skip))
            })
            .collect();
        let feasible: Vec<&NodeInfo> = feasible_pos.iter().map(|&i| nodes[i]).collect();
        if feasible.is_empty() {
            return out;
        }
        // Raw scores are recomputed separately so the table can show both.
        for s in &profile.scores {
            if let ScoreEntry::Native(p) = &s.plugin {
                let _ = p.pre_score(&ctx, &mut state, &feasible);
            }
        }
        for s in &profile.scores {
            let (raw, normalized): (Result<Vec<i64>, String>, Result<Vec<i64>, String>) =
                match &s.plugin {
                    ScoreEntry::Native(p) => {
                        let raw: Result<Vec<i64>, String> = feasible
                            .iter()
                            .map(|n| p.score(&ctx, &state, n).map_err(|e| e.to_string()))
                            .collect();
                        let norm = raw.clone().and_then(|mut v| {
                            p.normalize(&ctx, &state, &mut v)
                                .map(|_| v)
                                .map_err(|e| e.to_string())
                        });
                        (raw, norm)
                    }
                    ScoreEntry::Wasm(w) if !plan_of(&state, w).score => continue,
                    ScoreEntry::Wasm(w) => {
                        let idx: Vec<u32> = feasible.iter().map(|n| n.index).collect();
                        let raw = match w.score(snapshot, cycle, pod, &idx) {
                            Ok(Ok(v)) => Ok(v),
                            Ok(Err(r)) => Err(r),
                            Err(f) => Err(f.to_string()),
                        };
                        let norm = raw.clone().and_then(|v| {
                            match w.normalize(snapshot, cycle, pod, &idx, &v) {
                                Ok(Ok(Some(n))) => Ok(n),
                                Ok(Ok(None)) => Ok(v),
                                Ok(Err(r)) => Err(r),
                                Err(f) => Err(f.to_string()),
                            }
                        });
                        (raw, norm)
                    }
                };
            for (k, &pos) in feasible_pos.iter().enumerate() {
                let entry = match (&raw, &normalized) {
                    (Ok(r), Ok(n)) => ScoreDetail {
                        plugin: s.plugin.name().to_string(),
                        raw: Some(r[k]),
                        normalized: Some(n[k]),
                        weighted: Some(n[k] * s.weight),
                        error: None,
                    },
                    (Err(e), _) | (_, Err(e)) => ScoreDetail {
                        plugin: s.plugin.name().to_string(),
                        raw: raw.as_ref().ok().map(|r| r[k]),
                        normalized: None,
                        weighted: None,
                        error: Some(e.clone()),
                    },
                };
                out.nodes[pos].scores.push(entry);
            }
        }
        for &pos in &feasible_pos {
            out.nodes[pos].total = Some(
                out.nodes[pos]
                    .scores
                    .iter()
                    .filter_map(|s| s.weighted)
                    .sum(),
            );
        }
        out
    }
}

/// Starts the cycle on a wasm plugin and records its plan in `state`.
fn wasm_cycle_start(
    w: &Arc<WasmPlugin>,
    ctx: &CycleContext,
    state: &mut CycleState,
    cycle: u64,
) -> Result<(), String> {
    let plan = match w.cycle_start(ctx.snapshot, cycle, ctx.pod) {
        Ok(Ok(plan)) => plan,
        Ok(Err(reason)) => return Err(reason),
        // A failing plugin is dealt with per node (Fail) or skipped
        // (Ignore) by the Filter/Score phases, which retry on a fresh
        // instance; here it must not decide the pod's fate alone.
        Err(_) => ALL,
    };
    if state.read::<Plans>(PLANS).is_none() {
        state.write(PLANS, Plans::default());
    }
    if let Some(plans) = state.read_mut::<Plans>(PLANS) {
        plans.0.insert(Arc::as_ptr(w) as usize, plan);
    }
    Ok(())
}

/// Each wasm plugin's plan for the cycle, by plugin address.
#[derive(Default)]
struct Plans(std::collections::HashMap<usize, CyclePlan>);

const PLANS: &str = "wasmsched/wasm-plans";

/// The plan a wasm plugin announced for this cycle (all points when none).
fn plan_of(state: &CycleState, w: &Arc<WasmPlugin>) -> CyclePlan {
    state
        .read::<Plans>(PLANS)
        .and_then(|p| p.0.get(&(Arc::as_ptr(w) as usize)).copied())
        .unwrap_or(ALL)
}

/// A Filter plugin's verdict on a node, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "verdict", content = "reason")]
pub enum FilterVerdict {
    Pass,
    /// The plugin skipped Filter for this pod (it passes every node).
    Skip,
    Reject(String),
    Error(String),
}

/// One score plugin on one node, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScoreDetail {
    pub plugin: String,
    pub raw: Option<i64>,
    pub normalized: Option<i64>,
    pub weighted: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything about one node, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeExplanation {
    pub node: String,
    pub filters: Vec<(String, FilterVerdict)>,
    pub scores: Vec<ScoreDetail>,
    pub total: Option<i64>,
}

/// The whole `--explain` answer for one pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Explanation {
    /// A reason that rejects the pod on every node.
    pub pod_reason: Option<String>,
    pub nodes: Vec<NodeExplanation>,
}

/// Records the time from its creation to its drop (so early `continue`s
/// are timed too).
struct Record<'a>(&'a Timings, &'a str, &'static str, Instant);

impl Drop for Record<'_> {
    fn drop(&mut self) {
        self.0.record(self.1, self.2, self.3.elapsed());
    }
}
