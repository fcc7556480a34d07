//! Benchmark-only: the built-in policies compiled natively into the host
//! and driven through the guest SDK's runtime directly, with the same
//! resident-state protocol as the wasm instances (one copy of the cluster
//! per thread, deltas, cycle-start) but no component boundary and no wasm
//! execution. The difference to the `wasm` scenario is what wasm costs.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use wasmsched_plugin_sdk::types::CyclePlan;
use wasmsched_plugin_sdk::{runtime, Plugin};

use crate::framework::registry;
use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, Framework, NodeInfo, Plugin as FwPlugin,
    PluginBundle, PluginError, Point, PreFilterPlugin, PreScorePlugin, Rejection, ScorePlugin,
    Snapshot,
};
use crate::model::Pod;
use crate::wasm::interests::{Interests, KeySelector};

mod sdk_convert {
    crate::wit_conversions!(wasmsched_plugin_sdk::types);
}

/// What the wasm host would send a built-in: every key (natively there is
/// no copy to save), and only the node metrics it declared.
fn interests<P: Plugin>() -> Interests {
    Interests {
        metrics: Some(KeySelector::from_names(runtime::metric_interests::<P>())),
        ..Interests::default()
    }
}

/// Hands the calls to the plugin as the wasm host would.
fn feed<P: Plugin>(batches: Vec<sdk_convert::Batch>) {
    for batch in batches {
        match batch {
            sdk_convert::Batch::Apply(deltas) => runtime::apply::<P>(deltas),
            sdk_convert::Batch::Metrics(nodes) => runtime::set_metrics::<P>(nodes),
            sdk_convert::Batch::Values(nodes, values) => {
                runtime::set_metric_values::<P>(&nodes, &values)
            }
        }
    }
}

#[derive(Default)]
struct Sync {
    applied: Option<u64>,
    cycle: Option<(String, u64, CyclePlan)>,
}

thread_local! {
    static SYNC: RefCell<HashMap<TypeId, Sync>> = RefCell::new(HashMap::new());
}

/// A built-in policy run natively.
pub struct Native<P> {
    name: &'static str,
    /// Its CycleState key.
    key: &'static str,
    _plugin: PhantomData<fn() -> P>,
}

impl<P: Plugin> Native<P> {
    fn new(name: &'static str, key: &'static str) -> Self {
        Self {
            name,
            key,
            _plugin: PhantomData,
        }
    }

    /// Brings this thread's copy of the plugin up to date and starts the
    /// pod's cycle on it, as the wasm host does for an instance.
    fn ensure(&self, snapshot: &Snapshot, pod: &Pod) -> Result<CyclePlan, String> {
        SYNC.with(|s| {
            let mut s = s.borrow_mut();
            let sync = s.entry(TypeId::of::<P>()).or_default();
            let generation = snapshot.generation();
            if sync.applied != Some(generation) {
                match sync.applied.and_then(|a| snapshot.changes_since(a)) {
                    Some(changes) => feed::<P>(sdk_convert::deltas(changes, &interests::<P>())),
                    None => {
                        runtime::init::<P>("{}")?;
                        feed::<P>(sdk_convert::deltas(
                            &snapshot.as_changes(),
                            &interests::<P>(),
                        ));
                    }
                }
                sync.applied = Some(generation);
                sync.cycle = None;
            }
            match &sync.cycle {
                Some((uid, g, plan)) if *uid == pod.uid && *g == generation => Ok(*plan),
                _ => {
                    let plan =
                        runtime::cycle_start::<P>(sdk_convert::pod(pod, &Interests::default()))?;
                    sync.cycle = Some((pod.uid.clone(), generation, plan));
                    Ok(plan)
                }
            }
        })
    }
}

/// What PreFilter/PreScore leave for the per-node calls, so that worker
/// threads need no cycle of their own unless Filter matters (the wasm path
/// does the same with its instances).
#[derive(Clone)]
struct Prepared {
    /// Raw scores of the feasible nodes, computed in one batch by PreScore.
    scores: HashMap<u32, i64>,
    feasible: Vec<u32>,
}

impl<P: Plugin> FwPlugin for Native<P> {
    fn name(&self) -> &str {
        self.name
    }
}

impl<P: Plugin> PreFilterPlugin for Native<P> {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        _state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let plan = self
            .ensure(ctx.snapshot, ctx.pod)
            .map_err(Rejection::unresolvable)?;
        Ok(if plan.filter {
            Decision::Run
        } else {
            Decision::Skip
        })
    }
}

impl<P: Plugin> FilterPlugin for Native<P> {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        self.ensure(ctx.snapshot, ctx.pod)
            .map_err(Rejection::unresolvable)?;
        match runtime::filter::<P>(&[node.index]).pop().flatten() {
            None => Ok(()),
            Some(r) if r.unresolvable => Err(Rejection::unresolvable(r.reason)),
            Some(r) => Err(Rejection::new(r.reason)),
        }
    }
}

impl<P: Plugin> PreScorePlugin for Native<P> {
    fn pre_score(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError> {
        let plan = self.ensure(ctx.snapshot, ctx.pod).map_err(PluginError)?;
        if !plan.score {
            return Ok(Decision::Skip);
        }
        let feasible: Vec<u32> = feasible.iter().map(|n| n.index).collect();
        let raw = runtime::score::<P>(&feasible).map_err(PluginError)?;
        let scores = feasible.iter().copied().zip(raw).collect();
        state.write(self.key, Prepared { scores, feasible });
        Ok(Decision::Run)
    }
}

impl<P: Plugin> ScorePlugin for Native<P> {
    fn score(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        Ok(state
            .read::<Prepared>(self.key)
            .and_then(|p| p.scores.get(&node.index).copied())
            .unwrap_or(0))
    }

    fn normalize(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        let Some(p) = state.read::<Prepared>(self.key) else {
            return Ok(Decision::Skip);
        };
        let out = runtime::normalize::<P>(&p.feasible, scores.to_vec()).map_err(PluginError)?;
        scores.copy_from_slice(&out);
        Ok(Decision::Run)
    }
}

/// Appends the native GPU-topology and network-locality plugins to the
/// framework's profile, with the built-ins' default weights.
pub fn add_builtins(fw: &Framework) {
    let mut profile = (*fw.profile()).clone();
    let gpu = Arc::new(Native::<gpu_topology::GpuTopology>::new(
        "GpuTopology",
        "native-gpu-feasible",
    ));
    let net = Arc::new(Native::<network_locality::NetworkLocality>::new(
        "NetworkLocality",
        "native-net-feasible",
    ));
    for b in [bundle(&gpu), bundle(&net)] {
        let weight = registry::default_weight(b.name());
        for point in [
            Point::PreFilter,
            Point::Filter,
            Point::PreScore,
            Point::Score,
        ] {
            profile.enable(&b, point, weight);
        }
    }
    fw.set_profile(profile);
}

fn bundle<P: Plugin>(p: &Arc<Native<P>>) -> PluginBundle {
    PluginBundle::new(p.clone())
        .with_pre_filter(p)
        .with_filter(p)
        .with_pre_score(p)
        .with_score(p)
}
