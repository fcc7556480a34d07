//! VolumeBinding (upstream's `plugins/volumebinding`): a pod's claims must
//! be bound to PVs its node may use, or bindable there. PreFilter sorts
//! the claims (a missing or deleted claim, or an unbound `Immediate` one,
//! rejects the pod); Filter finds per node the PVs (smallest that fits)
//! or provisioning for the unbound `WaitForFirstConsumer` claims; Reserve
//! assumes the choice in the volume store, so no later cycle takes the
//! same PV; PreBind writes it (`BindVolume`, `SelectNode`) and waits for
//! the PV controller (`WaitForVolumes`); Unreserve rolls the assumption
//! back. Score (1.37's `StorageCapacityScoring`, on by default) prefers
//! the nodes where the pod's volumes use the least of what is there: the
//! static PVs' capacity, or the CSIStorageCapacity of provisioned ones.

use std::sync::Arc;
use std::time::Duration;

use super::binder::{self, PodClaims, PodVolumes, ERR_UNBOUND_IMMEDIATE};
use super::VolumeAction;
use crate::framework::handle::Handle;
use crate::framework::plugins::helpers::{args_object, int_in, reject_unknown};
use crate::framework::plugins::node_resources_fit::{
    parse_shape_points, requested_to_capacity_ratio_score,
};
use crate::framework::volumes::VolumeStore;
use crate::framework::{
    BindAction, CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PluginBundle,
    PluginError, PreBindPlugin, PreFilterPlugin, PreScorePlugin, Rejection, ReservePlugin,
    ScorePlugin, Snapshot,
};
use crate::model::volume::ClaimRef;
use crate::model::Pod;

pub const NAME: &str = "VolumeBinding";

/// Upstream's `DefaultBindTimeoutSeconds`.
pub const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(600);

const STATE_KEY: &str = "VolumeBinding";

/// Upstream's default `shape` with `StorageCapacityScoring` (1.37): an
/// empty node scores 10, a full one 0 (scores scaled onto MaxNodeScore).
pub const DEFAULT_SHAPE: [(i64, i64); 2] = [(0, 100), (100, 0)];

/// The plugin, with its `bindTimeoutSeconds` and scoring `shape`.
#[derive(Debug, Clone)]
pub struct VolumeBinding {
    pub bind_timeout: Duration,
    /// (utilization, score) points, scores already scaled to 0..=100.
    pub shape: Vec<(i64, i64)>,
}

impl Default for VolumeBinding {
    fn default() -> Self {
        Self {
            bind_timeout: DEFAULT_BIND_TIMEOUT,
            shape: DEFAULT_SHAPE.to_vec(),
        }
    }
}

/// What the cycle knows about the pod's claims.
#[derive(Clone)]
struct State {
    store: Arc<VolumeStore>,
    claims: PodClaims,
    /// What Reserve assumed on the chosen node; `None` when all claims
    /// were bound already.
    reserved: Option<PodVolumes>,
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &str {
        NAME
    }
}

/// Upstream's `podHasPVCs`: every claim exists and is not being deleted.
/// Returns whether the pod has any.
fn check_claims_exist(ctx: &CycleContext) -> Result<bool, Rejection> {
    let store = ctx.snapshot.volumes();
    let mut any = false;
    for name in ctx.pod.volumes.iter().filter_map(|v| v.claim()) {
        any = true;
        match store.api_pvc(&ctx.pod.namespace, name) {
            None => {
                return Err(Rejection::unresolvable(format!(
                    "persistentvolumeclaim {name:?} not found"
                )))
            }
            Some(c) if c.deleting => {
                return Err(Rejection::unresolvable(format!(
                    "persistentvolumeclaim {name:?} is being deleted"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(any)
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        if !check_claims_exist(ctx)? {
            return Ok(Decision::Skip);
        }
        let store = ctx.snapshot.volumes().clone();
        let claims = binder::pod_claims(&store, ctx.pod).map_err(Rejection::unresolvable)?;
        if !claims.immediate.is_empty() {
            return Err(Rejection::unresolvable(ERR_UNBOUND_IMMEDIATE));
        }
        state.write(
            STATE_KEY,
            State {
                store,
                claims,
                reserved: None,
            },
        );
        Ok(Decision::Run)
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        let Some(s) = state.read::<State>(STATE_KEY) else {
            return Ok(());
        };
        match binder::find_pod_volumes(&s.store, &s.claims, &node.node) {
            // Upstream's error status; a Filter here only rejects.
            Err(e) => Err(Rejection::unresolvable(e)),
            Ok(found) if found.reasons.is_empty() => Ok(()),
            Ok(found) => Err(Rejection {
                reasons: found.reasons.iter().map(|r| r.to_string()).collect(),
                unresolvable: true,
                error: false,
            }),
        }
    }
}

impl ReservePlugin for VolumeBinding {
    /// Finds the node's volumes again, from the store as it is now (the
    /// cycle and Reserve run under the cache's lock, so it is as the
    /// cycle saw it unless a binding was undone meanwhile), and assumes
    /// them.
    fn reserve(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        let Some(s) = state.read_mut::<State>(STATE_KEY) else {
            return Ok(());
        };
        s.claims = binder::pod_claims(&s.store, ctx.pod).map_err(PluginError)?;
        if !s.claims.immediate.is_empty() {
            return Err(PluginError(ERR_UNBOUND_IMMEDIATE.into()));
        }
        let found =
            binder::find_pod_volumes(&s.store, &s.claims, &node.node).map_err(PluginError)?;
        if !found.reasons.is_empty() {
            return Err(PluginError(format!(
                "the volumes no longer fit node {}: {}",
                node.name(),
                found.reasons.join(", ")
            )));
        }
        s.reserved =
            binder::assume(&s.store, ctx.pod, node.name(), &found.volumes).map_err(PluginError)?;
        Ok(())
    }

    fn unreserve(&self, _pod: &Pod, state: &CycleState, _node: &str) {
        if let Some(State {
            store,
            reserved: Some(v),
            ..
        }) = state.read::<State>(STATE_KEY)
        {
            binder::revert(store, v);
        }
    }
}

impl PreScorePlugin for VolumeBinding {
    /// A pod without claims scores 0 everywhere (upstream runs and scores
    /// nothing): skipped.
    fn pre_score(
        &self,
        _ctx: &CycleContext,
        state: &mut CycleState,
        _feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError> {
        Ok(if state.read::<State>(STATE_KEY).is_some() {
            Decision::Run
        } else {
            Decision::Skip
        })
    }
}

impl ScorePlugin for VolumeBinding {
    /// Upstream's `Score` with its `volumeCapacityScorer`: per storage
    /// class, the share of the capacity the pod's volumes take there, on
    /// `shape`; the classes' mean, rounded. With static bindings, the
    /// bound PVs' requests against their capacity; otherwise the
    /// provisioned claims against the CSIStorageCapacity that admitted
    /// them (claims of drivers without capacity are left out).
    fn score(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let Some(s) = state.read::<State>(STATE_KEY) else {
            return Ok(0);
        };
        let Ok(found) = binder::find_pod_volumes(&s.store, &s.claims, &node.node) else {
            return Ok(0);
        };
        Ok(score_volumes(&self.shape, &found.volumes))
    }
}

/// The score of one node's volumes (see [`VolumeBinding::score`]).
fn score_volumes(shape: &[(i64, i64)], v: &PodVolumes) -> i64 {
    // class -> (requested, capacity)
    let mut classes: std::collections::BTreeMap<&str, (i64, i64)> = Default::default();
    if !v.static_bindings.is_empty() {
        for (pv, pvc) in &v.static_bindings {
            let e = classes.entry(pv.class.as_str()).or_default();
            e.0 = e.0.saturating_add(pvc.request);
            e.1 = e.1.saturating_add(pv.capacity);
        }
    } else {
        for (pvc, capacity) in v.provisions.iter().zip(&v.provision_capacities) {
            let Some(capacity) = capacity else { continue };
            let e = classes.entry(pvc.class.as_str()).or_default();
            // Not a sum: two claims of one class share the node's capacity.
            e.1 = *capacity;
            e.0 = e.0.saturating_add(pvc.request);
        }
    }
    if classes.is_empty() {
        return 0;
    }
    let total: i64 = classes
        .values()
        .map(|&(requested, capacity)| requested_to_capacity_ratio_score(shape, requested, capacity))
        .sum();
    (total as f64 / classes.len() as f64).round() as i64
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind(
        &self,
        _pod: &Pod,
        state: &CycleState,
        node: &str,
    ) -> Result<Vec<BindAction>, PluginError> {
        let Some(State {
            reserved: Some(v), ..
        }) = state.read::<State>(STATE_KEY)
        else {
            return Ok(Vec::new());
        };
        Ok(actions(v, node, self.bind_timeout))
    }

    fn simulate(&self, actions: &[BindAction], snapshot: &Snapshot) {
        super::simulated::apply(snapshot.volumes(), actions);
    }
}

/// The writes of upstream's `bindAPIUpdate`, then the wait of its
/// `checkBindings` poll.
fn actions(v: &PodVolumes, node: &str, timeout: Duration) -> Vec<BindAction> {
    let mut out = Vec::new();
    for (pv, pvc) in &v.static_bindings {
        out.push(BindAction::plugin(VolumeAction::BindVolume {
            pv: pv.name.clone(),
            resource_version: pv.resource_version,
            claim: ClaimRef {
                namespace: pvc.namespace.clone(),
                name: pvc.name.clone(),
                uid: pvc.uid.clone(),
            },
            by_controller: pv
                .annotations
                .contains_key(crate::model::volume::ANN_BOUND_BY_CONTROLLER),
        }));
    }
    for c in &v.provisions {
        out.push(BindAction::plugin(VolumeAction::SelectNode {
            namespace: c.namespace.clone(),
            claim: c.name.clone(),
            node: node.to_string(),
            resource_version: c.resource_version,
        }));
    }
    out.push(BindAction::plugin(VolumeAction::WaitForVolumes {
        bindings: v
            .static_bindings
            .iter()
            .map(|(pv, pvc)| (pv.name.clone(), pvc.key()))
            .collect(),
        provisions: v.provisions.iter().map(|c| c.key()).collect(),
        timeout,
    }));
    out
}

/// Upstream's `VolumeBindingArgs`: `bindTimeoutSeconds` (positive) and
/// `shape` (validated as RequestedToCapacityRatio's).
fn parse_args(args: Option<&serde_json::Value>) -> Result<VolumeBinding, String> {
    let mut out = VolumeBinding::default();
    let Some(obj) = args_object(NAME, args)? else {
        return Ok(out);
    };
    let path = format!("{NAME} args: ");
    reject_unknown(&obj, &["bindTimeoutSeconds", "shape"], &path)?;
    if let Some(v) = obj.get("shape") {
        out.shape = parse_shape_points(Some(v), &format!("{path}shape"))?;
    }
    if let Some(v) = obj.get("bindTimeoutSeconds") {
        let secs = int_in(
            v,
            1..=i64::from(u32::MAX),
            &format!("{path}bindTimeoutSeconds"),
        )?;
        out.bind_timeout = Duration::from_secs(secs as u64);
    }
    Ok(out)
}

/// The registry's factory.
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<PluginBundle, String> {
    let p = Arc::new(parse_args(args)?);
    Ok(PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_pre_score(&p)
        .with_score(&p)
        .with_reserve(&p)
        .with_pre_bind(&p))
}
