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

use crate::framework::{
    CycleContext, CycleState, FilterEntry, FilterPlugin, Framework, NodeInfo, PluginError,
    Rejection, ScoreEntry, ScorePlugin, Snapshot, WeightedScore,
};
use crate::model::Pod;

mod sdk_convert {
    crate::wit_conversions!(wasmsched_plugin_sdk::types);
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
                    Some(changes) => runtime::apply::<P>(sdk_convert::deltas(changes)),
                    None => {
                        runtime::init::<P>("{}")?;
                        runtime::apply::<P>(sdk_convert::deltas(&snapshot.as_changes()));
                    }
                }
                sync.applied = Some(generation);
                sync.cycle = None;
            }
            match &sync.cycle {
                Some((uid, g, plan)) if *uid == pod.uid && *g == generation => Ok(*plan),
                _ => {
                    let plan = runtime::cycle_start::<P>(sdk_convert::pod(pod))?;
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
struct Prepared {
    plan: CyclePlan,
    /// Raw scores of the feasible nodes, computed in one batch by PreScore.
    scores: HashMap<u32, i64>,
    feasible: Vec<u32>,
}

impl<P: Plugin> FilterPlugin for Native<P> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn pre_filter(&self, ctx: &CycleContext, state: &mut CycleState) -> Result<(), Rejection> {
        let plan = self
            .ensure(ctx.snapshot, ctx.pod)
            .map_err(Rejection::unresolvable)?;
        state.write(
            self.key,
            Prepared {
                plan,
                scores: HashMap::new(),
                feasible: Vec::new(),
            },
        );
        Ok(())
    }

    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        if state
            .read::<Prepared>(self.key)
            .is_some_and(|p| !p.plan.filter)
        {
            return Ok(());
        }
        self.ensure(ctx.snapshot, ctx.pod)
            .map_err(Rejection::unresolvable)?;
        match runtime::filter::<P>(&[node.index]).pop().flatten() {
            None => Ok(()),
            Some(r) if r.unresolvable => Err(Rejection::unresolvable(r.reason)),
            Some(r) => Err(Rejection::new(r.reason)),
        }
    }
}

impl<P: Plugin> ScorePlugin for Native<P> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn pre_score(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        feasible: &[&NodeInfo],
    ) -> Result<(), PluginError> {
        let plan = self.ensure(ctx.snapshot, ctx.pod).map_err(PluginError)?;
        let feasible: Vec<u32> = feasible.iter().map(|n| n.index).collect();
        let scores = if plan.score {
            let raw = runtime::score::<P>(&feasible).map_err(PluginError)?;
            feasible.iter().copied().zip(raw).collect()
        } else {
            HashMap::new()
        };
        state.write(
            self.key,
            Prepared {
                plan,
                scores,
                feasible,
            },
        );
        Ok(())
    }

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
        scores: &mut [i64],
    ) -> Result<(), PluginError> {
        let Some(p) = state.read::<Prepared>(self.key) else {
            return Ok(());
        };
        if !p.plan.score {
            scores.iter_mut().for_each(|s| *s = 0);
            return Ok(());
        }
        let out = runtime::normalize::<P>(&p.feasible, scores.to_vec()).map_err(PluginError)?;
        scores.copy_from_slice(&out);
        Ok(())
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
    profile.filters.push(FilterEntry::Native(gpu.clone()));
    profile.filters.push(FilterEntry::Native(net.clone()));
    for (name, _, weight) in crate::config::BUILTIN_WASM {
        let plugin: ScoreEntry = match *name {
            "GpuTopology" => ScoreEntry::Native(gpu.clone()),
            _ => ScoreEntry::Native(net.clone()),
        };
        profile.scores.push(WeightedScore {
            plugin,
            weight: *weight,
        });
    }
    fw.set_profile(profile);
}
