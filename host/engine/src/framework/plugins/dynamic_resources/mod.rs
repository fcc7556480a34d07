//! DynamicResources: pods that ask for devices through ResourceClaims
//! (`resource.k8s.io`), with kube-scheduler 1.37's semantics and messages
//! (`pkg/scheduler/framework/plugins/dynamicresources`):
//!
//! - PreEnqueue: the pod waits, gated, until each of its claims exists (a
//!   template's claim is made by kube-controller-manager and named in the
//!   pod's status), is not being deleted and, when made from a template,
//!   is owned by the pod.
//! - PreFilter: an allocated claim restricts the pod to the allocation's
//!   nodes; an unallocated one must not be in flight for another pod and
//!   its device classes must exist. A pod without claims skips the plugin.
//! - Filter: the structured allocator ([`allocator`]) finds devices for
//!   the unallocated claims on the node (`cannot allocate all claims`);
//!   a node outside an allocated claim's selector is
//!   `resourceclaim not available on the node`. A CEL error fails the
//!   attempt, as upstream.
//! - PostFilter: a claim allocated for other nodes and reserved for nobody
//!   (or only this pod) is deallocated so the next attempt can choose
//!   again.
//! - Score (weight 2): prioritized lists satisfied by earlier alternatives
//!   score higher; with device rankers ([`ranking`]), `101 * that + the
//!   best set's rank`, so the list's preference stays first.
//! - Reserve / Unreserve: the allocation is held in flight, so no other
//!   pod's cycle takes its devices.
//! - PreBind: a [`ClaimBinding`] step per claim to write: the finalizer,
//!   `status.allocation` and the pod in `status.reservedFor` (the runtime's
//!   binder writes them; `simulate` records them).

pub mod allocator;
pub mod binding_conditions;
pub mod capacity;
#[cfg(test)]
mod capacity_tests;
pub mod cel;
pub mod extended;
#[cfg(test)]
mod extended_tests;
pub mod ranking;
pub mod report;
pub mod store;
pub mod taint_rules;
pub mod templates;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use crate::framework::handle::Handle;
use crate::framework::objects::{object_key, ApiKind, ObjectEvent, PluginReport, StatusWrite};
use crate::framework::points::Release;
use crate::framework::status::default_normalize;
use crate::framework::{
    BindAction, CycleContext, CycleState, Decision, FilterPlugin, FilterRunner, Filtered,
    InformerPlugin, NodeInfo, Plugin, PluginBundle, PluginError, PostFilterPlugin,
    PostFilterResult, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin, Rejection, ReservePlugin,
    ScorePlugin, Snapshot,
};
use crate::model::dra::{Claim, Consumer};
use crate::model::Pod;

use allocator::{ClaimResult, Outcome};
use ranking::NodeRank;
pub use store::Store;

pub const NAME: &str = "DynamicResources";

const STATE_KEY: &str = "DynamicResources";

/// Filter's reasons (upstream's, word for word).
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";
pub const NOT_AVAILABLE: &str = "resourceclaim not available on the node";
pub const INVALID_POOLS: &str = "invalid resource pools were encountered";

/// Upstream's default `filterTimeout`.
pub const DEFAULT_FILTER_TIMEOUT: Duration = Duration::from_secs(10);

/// A claim to write before binding (the runtime's binder executes it):
/// the allocation (when this cycle made it, with the delete-protection
/// finalizer) and the pod as a consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimBinding {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `status.allocation` to write; `None`: the claim is allocated
    /// already and only the reservation is added.
    pub allocation: Option<Value>,
    pub pod_name: String,
    pub pod_uid: String,
    /// The claim as this cycle saw it: its `resourceVersion`, finalizers
    /// and consumers. The binder writes against this version without
    /// reading the claim first (as upstream's first attempt does), and
    /// reads it only when the claim changed since.
    pub resource_version: String,
    pub finalizers: Vec<String>,
    pub consumers: usize,
}

/// The claim for a pod's extended resources backed by DRA, to create and
/// write before binding ([`extended`]): the binder creates it from
/// `metadata` and `spec`, writes `allocation` and the pod's reservation
/// as for a [`ClaimBinding`], and records `mappings` in the pod's
/// `status.extendedResourceClaimStatus`. When a later step fails, the
/// binder deletes the claim again (upstream's Unreserve).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedClaimBinding {
    pub metadata: Value,
    pub spec: Value,
    pub allocation: Value,
    pub mappings: Vec<extended::Mapping>,
    pub pod_name: String,
    pub pod_uid: String,
}

/// After the claims are written: wait until every binding condition of
/// their devices is True ([`binding_conditions`]; upstream's PreBind
/// wait). `extended`: the claim an [`ExtendedClaimBinding`] of the same
/// binding created is waited for too.
#[derive(Debug, Clone, PartialEq)]
pub struct AwaitBindingConditions {
    pub namespace: String,
    pub claims: Vec<String>,
    pub extended: bool,
    pub node: String,
    pub timeout: Duration,
    /// The devices and their conditions, for the event and `simulate`.
    pub pending: Vec<String>,
}

pub struct DynamicResources {
    store: Arc<Store>,
    filter_timeout: Option<Duration>,
    binding_timeout: Duration,
    /// Device sets per node for the rankers (0: no ranking).
    ranked_sets: usize,
}

impl Plugin for DynamicResources {
    fn name(&self) -> &str {
        NAME
    }

    /// The devices allocated on the chosen node and, when rankers ranked
    /// them, the other sets with their ranks (best first, at most five).
    fn explain(&self, state: &CycleState, chosen: Option<&str>) -> Vec<String> {
        let Some(prep) = state.read::<Arc<Prep>>(STATE_KEY) else {
            return Vec::new();
        };
        let Some(node) = chosen else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(results) = prep.results.lock().get(node) {
            let ext = prep.ext_claims.lock().get(node).map(|c| c.claim.clone());
            let keys = prep
                .to_allocate
                .iter()
                .map(|&i| prep.claims[i].key())
                .chain(ext.map(|c| format!("{} (extended resources)", c.key())));
            for (key, r) in keys.zip(results) {
                out.push(format!(
                    "claim {key}: devices {} on {node}",
                    r.devices.join(", ")
                ));
                for p in binding_conditions::pending_in_allocation(&r.allocation) {
                    out.push(format!("  binding waits for conditions: {p}"));
                }
            }
        }
        match prep.ranks.lock().get(node) {
            Some(rank) => {
                out.push(format!(
                    "ranked {} device set(s) on {node}: chosen rank {} ({})",
                    rank.sets.len(),
                    rank.best,
                    if rank.chosen == 0 {
                        "the first fit"
                    } else {
                        "not the first fit"
                    }
                ));
                let mut others: Vec<&(Vec<String>, i64)> = rank
                    .sets
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != rank.chosen)
                    .map(|(_, s)| s)
                    .collect();
                others.sort_by_key(|s| std::cmp::Reverse(s.1));
                for (devices, r) in others.into_iter().take(5) {
                    out.push(format!("  alternative rank {r}: {}", devices.join(", ")));
                }
            }
            None if !prep.to_allocate.is_empty() => {
                out.push("devices chosen by first fit (no device ranker)".into())
            }
            None => {}
        }
        out
    }
}

/// A pod's claims, resolved: the claim object of each pod claim that has
/// one, in order, or the first reason the pod must wait.
fn resolve(store: &Store, pod: &Pod) -> Result<Vec<Arc<Claim>>, String> {
    resolve_claims(store, pod).map_err(|e| e.message)
}

/// Why a pod's claims cannot be used yet.
struct Unresolved {
    message: String,
    /// The claim at fault (missing, invalid, being deleted, not the
    /// pod's); `None`: the pod's own spec or status is.
    claim: Option<String>,
}

/// [`resolve`], naming the claim at fault.
fn resolve_claims(store: &Store, pod: &Pod) -> Result<Vec<Arc<Claim>>, Unresolved> {
    let pod_fault = |message| Unresolved {
        message,
        claim: None,
    };
    let mut out = Vec::new();
    for pc in &pod.resource_claims {
        let (name, owned) = match (&pc.claim, &pc.template) {
            (Some(n), _) => (n.clone(), false),
            (None, Some(_)) => match pod.claim_statuses.get(&pc.name) {
                Some(Some(n)) => (n.clone(), true),
                // Deliberately no claim.
                Some(None) => continue,
                None => {
                    return Err(pod_fault(format!(
                        "pod \"{}\": ResourceClaim not created yet",
                        pod.key()
                    )))
                }
            },
            (None, None) => {
                return Err(pod_fault(format!(
                    "pod \"{}\", spec.resourceClaim {:?}: none of the supported fields are set",
                    pod.key(),
                    pc.name
                )))
            }
        };
        let key = format!("{}/{name}", pod.namespace);
        let claim_fault = |message| Unresolved {
            message,
            claim: Some(key.clone()),
        };
        let Some(claim) = store.claim(&key) else {
            return Err(claim_fault(match store.invalid_claim(&key) {
                Some(e) => format!("ResourceClaim {key} cannot be used: {e}"),
                None => format!("could not find ResourceClaim \"{key}\""),
            }));
        };
        if claim.deleting {
            return Err(claim_fault(format!(
                "resourceclaim {name:?} is being deleted"
            )));
        }
        if owned && claim.owner_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(claim_fault(format!(
                "ResourceClaim {key} was not created for Pod {} (Pod is not owner)",
                pod.key()
            )));
        }
        out.push(claim);
    }
    Ok(out)
}

impl DynamicResources {
    /// An allocated claim whose binding failed (a failure condition True)
    /// or timed out waiting for its binding conditions: not usable, so
    /// PostFilter may deallocate it (upstream's Filter).
    fn binding_failed(&self, c: &Claim, now: k8s_openapi::jiff::Timestamp) -> bool {
        if c.allocation.is_none() || !binding_conditions::has_conditions(c) {
            return false;
        }
        match binding_conditions::readiness(c) {
            binding_conditions::Readiness::Ready => false,
            binding_conditions::Readiness::Failed(_) => true,
            binding_conditions::Readiness::Pending => {
                binding_conditions::timed_out(c, self.binding_timeout, now)
            }
        }
    }
}

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &Pod) -> Result<(), String> {
        if pod.resource_claims.is_empty() {
            return Ok(());
        }
        resolve(&self.store, pod).map(|_| ())
    }

    /// A refusal names one claim: missing, invalid, being deleted or not
    /// the pod's. Only a change of that claim (or of the pod, which names
    /// a template's claim in its status) can lift it, so only the pods
    /// waiting for a claim are checked again when it changes (upstream's
    /// hint for claims), not every held pod on every DRA event.
    fn released_by(&self, pod: &Pod) -> Release {
        self.hold(pod).unwrap_or(Release::PodUpdate)
    }

    /// One walk of the pod's claims for both answers.
    fn hold(&self, pod: &Pod) -> Option<Release> {
        if pod.resource_claims.is_empty() {
            return None;
        }
        match resolve_claims(&self.store, pod) {
            Ok(_) => None,
            Err(Unresolved {
                claim: Some(key), ..
            }) => Some(Release::Object {
                kind: store::RESOURCE_CLAIM.kind,
                key,
            }),
            Err(_) => Some(Release::PodUpdate),
        }
    }
}

/// The cycle's state: the claims, what restricts the nodes, the
/// allocator's inputs, and each node's allocation once Filter found one.
struct Prep {
    claims: Vec<Arc<Claim>>,
    /// Indexes of the claims to allocate.
    to_allocate: Vec<usize>,
    inputs: Option<Arc<allocator::Inputs>>,
    /// Filter's results, by node.
    results: Mutex<BTreeMap<String, Vec<ClaimResult>>>,
    /// Claims allocated on nodes other than ones that were filtered out
    /// (for PostFilter), by node.
    unavailable: Mutex<BTreeMap<String, Vec<usize>>>,
    /// Device rankers' verdicts, by node.
    ranks: Mutex<BTreeMap<String, NodeRank>>,
    /// Extended resources backed by DRA ([`extended`]).
    ext: Option<extended::Prep>,
    /// Filter's extended resource claim, by node (allocated after the
    /// pod's own claims: the last of the node's results).
    ext_claims: Mutex<BTreeMap<String, extended::NodeClaim>>,
}

impl Prep {
    /// The claims to allocate on `node`: the pod's unallocated claims,
    /// then the node's extended resource claim.
    fn allocating<'a>(&'a self, ext: Option<&'a extended::NodeClaim>) -> Vec<&'a Claim> {
        self.to_allocate
            .iter()
            .map(|&i| &*self.claims[i])
            .chain(ext.map(|e| &*e.claim))
            .collect()
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let ext = extended::prepare(&self.store, ctx.pod);
        if ctx.pod.resource_claims.is_empty() && ext.is_none() {
            return Ok(Decision::Skip);
        }
        let mut claims = resolve(&self.store, ctx.pod).map_err(Rejection::unresolvable)?;
        if claims.is_empty() && ext.is_none() {
            return Ok(Decision::Skip);
        }
        // A claim made for the extended resources by an earlier cycle is
        // one of the pod's claims (upstream's claim store).
        if let Some(existing) = ext.as_ref().and_then(|e| e.existing()) {
            claims.push(existing.clone());
        }
        let mut to_allocate = Vec::new();
        for (i, c) in claims.iter().enumerate() {
            if c.allocation.is_some() || c.extended {
                continue;
            }
            if self
                .store
                .in_flight(&c.uid)
                .is_some_and(|f| f.pod_uid != ctx.pod.uid)
            {
                return Err(Rejection::unresolvable(format!(
                    "resource claim {} is in the process of being allocated",
                    c.key()
                )));
            }
            for r in &c.requests {
                for e in &r.alternatives {
                    if self.store.class(&e.class).is_none() {
                        return Err(Rejection::unresolvable(format!(
                            "request {}: device class {} does not exist",
                            e.name, e.class
                        )));
                    }
                }
            }
            to_allocate.push(i);
        }
        let allocating_ext = ext.as_ref().is_some_and(|e| e.existing().is_none());
        let inputs =
            (!to_allocate.is_empty() || allocating_ext).then(|| Arc::new(self.store.inputs()));
        state.write(
            STATE_KEY,
            Arc::new(Prep {
                claims,
                to_allocate,
                inputs,
                results: Mutex::new(BTreeMap::new()),
                unavailable: Mutex::new(BTreeMap::new()),
                ranks: Mutex::new(BTreeMap::new()),
                ext,
                ext_claims: Mutex::new(BTreeMap::new()),
            }),
        );
        Ok(Decision::Run)
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        let Some(prep) = state.read::<Arc<Prep>>(STATE_KEY) else {
            return Ok(());
        };
        let n = &node.node;
        let ext = match &prep.ext {
            Some(e) => extended::for_node(e, &self.store, ctx.pod, node)?,
            None => None,
        };
        let now = binding_conditions::now();
        let unavailable: Vec<usize> = prep
            .claims
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.allocation
                    .as_ref()
                    .and_then(|a| a.node_selector.as_ref())
                    .is_some_and(|terms| !terms.iter().any(|t| t.matches(&n.name, &n.labels)))
                    || self.binding_failed(c, now)
            })
            .map(|(i, _)| i)
            .collect();
        let not_available = |unavailable: Vec<usize>| {
            prep.unavailable.lock().insert(n.name.clone(), unavailable);
            Err(Rejection::unresolvable(NOT_AVAILABLE))
        };
        if !unavailable.is_empty() && prep.inputs.is_none() {
            return not_available(unavailable);
        }
        let allocating = !prep.to_allocate.is_empty() || ext.is_some();
        if let (Some(inputs), true) = (&prep.inputs, allocating) {
            let claims = prep.allocating(ext.as_ref());
            let deadline = self.filter_timeout.map(|t| Instant::now() + t);
            let ranking = !ctx.device_rankers.is_empty() && self.ranked_sets > 0;
            let limit = if ranking { self.ranked_sets } else { 1 };
            let mut rank = None;
            let choose = |input: crate::framework::RankInput, ids: &[&String]| {
                if !ranking {
                    return 0;
                }
                let named = ctx.explaining.then(|| input.clone());
                rank = ranking::rank(ctx, state, node, input);
                if let (Some(r), Some(input)) = (rank.as_mut(), named) {
                    r.describe(&input, ids);
                }
                rank.as_ref().map_or(0, |r| r.chosen)
            };
            // Devices and scores only: the chosen node's allocation is
            // built in Reserve.
            match allocator::allocate_ranked(inputs, n, &claims, deadline, limit, choose, false) {
                Err(e) => return Err(Rejection::error(e.0)),
                Ok(Outcome::None { invalid }) => {
                    return Err(Rejection::unresolvable(if invalid {
                        INVALID_POOLS
                    } else {
                        CANNOT_ALLOCATE
                    }))
                }
                Ok(Outcome::Allocated(results)) => {
                    if !unavailable.is_empty() {
                        return not_available(unavailable);
                    }
                    if let Some(r) = rank {
                        prep.ranks.lock().insert(n.name.clone(), r);
                    }
                    prep.results.lock().insert(n.name.clone(), results);
                    if let Some(e) = ext {
                        prep.ext_claims.lock().insert(n.name.clone(), e);
                    }
                }
            }
        } else if !unavailable.is_empty() {
            return not_available(unavailable);
        }
        Ok(())
    }
}

impl PostFilterPlugin for DynamicResources {
    fn post_filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        _filtered: &Filtered,
        _runner: &dyn FilterRunner,
    ) -> Result<PostFilterResult, PluginError> {
        let Some(prep) = state.read::<Arc<Prep>>(STATE_KEY) else {
            return Ok(PostFilterResult::Unschedulable(String::new()));
        };
        let candidates: HashSet<usize> = prep
            .unavailable
            .lock()
            .values()
            .flatten()
            .copied()
            .collect();
        let mut candidates: Vec<usize> = candidates.into_iter().collect();
        candidates.sort_unstable();
        for i in candidates {
            let c = &prep.claims[i];
            if c.extended {
                break;
            }
            let only_this = match c.reserved_for.as_slice() {
                [] => true,
                [one] => one.uid == ctx.pod.uid,
                _ => false,
            };
            if only_this {
                self.store.deallocate(c);
                return Ok(PostFilterResult::Unschedulable(
                    "deallocation of ResourceClaim completed".into(),
                ));
            }
        }
        // The claim an earlier cycle made for the extended resources is
        // deleted, so that the next attempt starts anew.
        if let Some(existing) = prep.ext.as_ref().and_then(|e| e.existing()) {
            self.store.delete_claim(existing);
            return Ok(PostFilterResult::Unschedulable(
                "deletion of ResourceClaim completed".into(),
            ));
        }
        Ok(PostFilterResult::Unschedulable(String::new()))
    }
}

impl ScorePlugin for DynamicResources {
    fn score(
        &self,
        _ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        let Some(prep) = state.read::<Arc<Prep>>(STATE_KEY) else {
            return Ok(0);
        };
        let listed: i64 = prep
            .results
            .lock()
            .get(node.name())
            .map_or(0, |r| r.iter().map(|c| c.score).sum());
        // A prioritized list's preference stays first (as upstream's
        // score orders nodes); the best set's rank orders nodes within it.
        Ok(match prep.ranks.lock().get(node.name()) {
            Some(r) => listed * 101 + r.best,
            None => listed,
        })
    }

    fn normalize(
        &self,
        _ctx: &CycleContext,
        _state: &CycleState,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<Decision, PluginError> {
        default_normalize(scores, false);
        Ok(Decision::Run)
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        let Some(prep) = state.read::<Arc<Prep>>(STATE_KEY).cloned() else {
            return Ok(());
        };
        let ext = prep.ext_claims.lock().get(node.name()).cloned();
        prep.ext_claims.lock().retain(|n, _| n == node.name());
        if prep.to_allocate.is_empty() && ext.is_none() {
            return Ok(());
        }
        // Only the chosen node's results are needed from here on (PreBind,
        // `--explain`); the cycle state lives until the pod is bound, so
        // the other nodes' go now.
        let results = {
            let mut all = prep.results.lock();
            all.retain(|n, _| n == node.name());
            all.remove(node.name())
        };
        let rank = {
            let mut all = prep.ranks.lock();
            all.retain(|n, _| n == node.name());
            all.remove(node.name())
        };
        let (Some(results), Some(inputs)) = (results, &prep.inputs) else {
            return Err(PluginError("claim allocation not found for node".into()));
        };
        // The allocation to write, built for this node only: the same
        // search as Filter's (the same inputs), the ranked choice taken
        // again.
        let claims = prep.allocating(ext.as_ref());
        let limit = if rank.is_some() { self.ranked_sets } else { 1 };
        let chosen = rank.as_ref().map_or(0, |r| r.chosen);
        let deadline = self.filter_timeout.map(|t| Instant::now() + t);
        let built = allocator::allocate_ranked(
            inputs,
            &node.node,
            &claims,
            deadline,
            limit,
            |_, _| chosen,
            true,
        );
        let results = match built {
            Ok(Outcome::Allocated(built))
                if built
                    .iter()
                    .map(|c| &c.devices)
                    .eq(results.iter().map(|c| &c.devices)) =>
            {
                built
            }
            other => {
                return Err(PluginError(format!(
                    "claim allocation on node {} changed between Filter and Reserve: {other:?}",
                    node.name()
                )))
            }
        };
        prep.results
            .lock()
            .insert(node.name().to_string(), results.clone());
        if let Some(r) = rank {
            prep.ranks.lock().insert(node.name().to_string(), r);
        }
        for (c, r) in claims.iter().zip(&results) {
            let whole = r
                .devices
                .iter()
                .filter(|d| !r.shares.iter().any(|(s, _)| s == *d))
                .cloned()
                .collect();
            if !self.store.reserve(c, &ctx.pod.uid, whole, r.shares.clone()) {
                self.store.unreserve(&ctx.pod.uid);
                return Err(PluginError(format!(
                    "resource claim {} is in the process of being allocated",
                    c.key()
                )));
            }
        }
        Ok(())
    }

    fn unreserve(&self, pod: &Pod, _state: &CycleState, _node: &str) {
        self.store.unreserve(&pod.uid);
    }
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind(
        &self,
        pod: &Pod,
        state: &CycleState,
        node: &str,
    ) -> Result<Vec<BindAction>, PluginError> {
        let Some(prep) = state.read::<Arc<Prep>>(STATE_KEY) else {
            return Ok(Vec::new());
        };
        let results = prep.results.lock().get(node).cloned().unwrap_or_default();
        let mut actions = Vec::new();
        let mut waiting = Vec::new();
        let mut pending = Vec::new();
        for (i, c) in prep.claims.iter().enumerate() {
            if c.extended {
                // An earlier cycle's: Filter refused the node.
                continue;
            }
            let allocation = prep
                .to_allocate
                .iter()
                .position(|&k| k == i)
                .and_then(|k| results.get(k))
                .map(|r| r.allocation.clone());
            if allocation.is_none() && c.reserved_for_pod(&pod.uid) {
                continue;
            }
            match &allocation {
                Some(a) => {
                    let p = binding_conditions::pending_in_allocation(a);
                    if !p.is_empty() {
                        waiting.push(c.name.clone());
                        pending.extend(p);
                    }
                }
                None if binding_conditions::has_conditions(c) => {
                    waiting.push(c.name.clone());
                    pending.push(binding_conditions::summary(c));
                }
                None => {}
            }
            actions.push(BindAction::plugin(ClaimBinding {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                uid: c.uid.clone(),
                allocation,
                pod_name: pod.name.clone(),
                pod_uid: pod.uid.clone(),
                resource_version: c.resource_version.clone(),
                finalizers: c.finalizers.clone(),
                consumers: c.reserved_for.len(),
            }));
        }
        let mut extended = false;
        if let Some(e) = prep.ext_claims.lock().get(node) {
            let Some(r) = results.get(prep.to_allocate.len()) else {
                return Err(PluginError(format!(
                    "extended resource claim allocation not found for node {node}"
                )));
            };
            let p = binding_conditions::pending_in_allocation(&r.allocation);
            extended = !p.is_empty();
            pending.extend(p);
            actions.push(BindAction::plugin(ExtendedClaimBinding {
                metadata: extended::metadata(&pod.namespace, &pod.name, &pod.uid),
                spec: extended::spec(&e.requests),
                allocation: r.allocation.clone(),
                mappings: e.mappings.clone(),
                pod_name: pod.name.clone(),
                pod_uid: pod.uid.clone(),
            }));
        }
        if !waiting.is_empty() || extended {
            actions.push(BindAction::plugin(AwaitBindingConditions {
                namespace: pod.namespace.clone(),
                claims: waiting,
                extended,
                node: node.to_string(),
                timeout: self.binding_timeout,
                pending,
            }));
        }
        Ok(actions)
    }

    /// Without an API server no driver sets binding conditions: the pod
    /// binds as if they were met (`--explain` names the conditions the
    /// binding would wait for).
    fn simulate(&self, actions: &[BindAction], _snapshot: &Snapshot) {
        for b in actions
            .iter()
            .filter_map(BindAction::get::<ExtendedClaimBinding>)
        {
            self.store.record_extended_claim(
                &b.metadata,
                &b.spec,
                &b.allocation,
                &b.pod_name,
                &b.pod_uid,
            );
        }
        for b in actions.iter().filter_map(BindAction::get::<ClaimBinding>) {
            let consumer = Consumer {
                name: b.pod_name.clone(),
                uid: b.pod_uid.clone(),
                resource: "pods".into(),
            };
            let key = format!("{}/{}", b.namespace, b.name);
            self.store
                .record_allocation(&key, b.allocation.as_ref(), consumer);
        }
    }
}

impl InformerPlugin for DynamicResources {
    fn kinds(&self) -> &'static [ApiKind] {
        &[
            store::DEVICE_CLASS,
            store::RESOURCE_SLICE,
            store::RESOURCE_CLAIM,
            taint_rules::DEVICE_TAINT_RULE,
        ]
    }

    fn object_event(&self, kind: &ApiKind, event: ObjectEvent<'_>) -> bool {
        match event {
            ObjectEvent::Applied { version, object } => {
                let key = object_key(kind, object);
                self.store.apply(kind, version, object, &key);
            }
            ObjectEvent::Deleted(key) => self.store.delete(kind, key),
            ObjectEvent::Relisted(seen) => self.store.retain(kind, seen),
        }
        // A new class, slice or claim state may let pods in.
        true
    }

    fn status_writes(&self) -> Vec<StatusWrite> {
        self.store.take_writes()
    }

    fn report(&self, _snapshot: &Snapshot) -> Option<PluginReport> {
        report::plugin_report(&self.store)
    }

    fn reset(&self) {
        self.store.reset();
    }
}

/// Checks a manifest's DRA object of `kind`: its key, or the field at
/// fault and why.
fn check(kind: &'static ApiKind, object: &Value) -> Result<String, String> {
    let key = object_key(kind, object);
    let version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or("v1");
    let store = Store::default();
    store.apply(kind, version, object, &key);
    match store.invalid(kind, &key) {
        Some(e) => Err(e),
        None => Ok(key),
    }
}

/// A manifest's DeviceClass (the registry's check).
pub fn check_class(object: &Value) -> Result<String, String> {
    check(&store::DEVICE_CLASS, object)
}

/// A manifest's ResourceSlice.
pub fn check_slice(object: &Value) -> Result<String, String> {
    check(&store::RESOURCE_SLICE, object)
}

/// A manifest's DeviceTaintRule.
pub fn check_taint_rule(object: &Value) -> Result<String, String> {
    check(&taint_rules::DEVICE_TAINT_RULE, object)
}

/// A manifest's ResourceClaim.
pub fn check_claim(object: &Value) -> Result<String, String> {
    check(&store::RESOURCE_CLAIM, object)
}

/// A manifest's ResourceClaimTemplate (its spec is a claim's).
pub fn check_template(object: &Value) -> Result<String, String> {
    let kind = &store::RESOURCE_CLAIM_TEMPLATE;
    let key = object_key(kind, object);
    let version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or("v1");
    let v1 = crate::model::dra::to_v1(kind.kind, version, object.clone());
    let claim = serde_json::json!({"metadata": {"name": "template", "namespace": "default"}, "spec": v1["spec"]["spec"]});
    check(&store::RESOURCE_CLAIM, &claim)
        .map(|_| key)
        .map_err(|e| format!("spec.{e}"))
}

/// The registry's factory. Every profile shares one store.
pub fn new(args: Option<&Value>, handle: &Handle) -> Result<PluginBundle, String> {
    let Args {
        filter_timeout,
        binding_timeout,
        ranked_sets,
    } = parse_args(args)?;
    let p = Arc::new(DynamicResources {
        store: handle.shared::<Store>(),
        filter_timeout,
        binding_timeout,
        ranked_sets,
    });
    Ok(PluginBundle::new(p.clone())
        .with_pre_enqueue(&p)
        .with_pre_filter(&p)
        .with_filter(&p)
        .with_post_filter(&p)
        .with_score(&p)
        .with_reserve(&p)
        .with_pre_bind(&p)
        .with_informer(&p))
}

struct Args {
    filter_timeout: Option<Duration>,
    binding_timeout: Duration,
    ranked_sets: usize,
}

/// Upstream's `DynamicResourcesArgs`: `filterTimeout` (a duration; `0s`
/// turns the bound off); `bindingTimeout` (how long PreBind waits for
/// binding conditions, at least 1s, default 600s); and `rankedSets`, how many device sets per node
/// device rankers see (default [`ranking::MAX_SETS`]; 0: no ranking, the
/// first fit as upstream).
fn parse_args(args: Option<&Value>) -> Result<Args, String> {
    let mut out = Args {
        filter_timeout: Some(DEFAULT_FILTER_TIMEOUT),
        binding_timeout: binding_conditions::DEFAULT_BINDING_TIMEOUT,
        ranked_sets: ranking::MAX_SETS,
    };
    let Some(obj) = super::helpers::args_object(NAME, args)? else {
        return Ok(out);
    };
    super::helpers::reject_unknown(
        &obj,
        &["filterTimeout", "bindingTimeout", "rankedSets"],
        &format!("{NAME} args: "),
    )?;
    match obj.get("filterTimeout") {
        None => {}
        Some(Value::String(s)) => {
            let d = humantime::parse_duration(s)
                .map_err(|e| format!("{NAME} args: filterTimeout: invalid duration {s:?}: {e}"))?;
            out.filter_timeout = (!d.is_zero()).then_some(d);
        }
        Some(other) => {
            return Err(format!(
                "{NAME} args: filterTimeout: expected a duration string like \"10s\", got {}",
                super::helpers::json_type(other)
            ))
        }
    }
    match obj.get("bindingTimeout") {
        None => {}
        Some(Value::String(s)) => {
            let d = humantime::parse_duration(s)
                .map_err(|e| format!("{NAME} args: bindingTimeout: invalid duration {s:?}: {e}"))?;
            if d < Duration::from_secs(1) {
                return Err(format!(
                    "{NAME} args: bindingTimeout: must be at least 1 second, got {s:?}"
                ));
            }
            out.binding_timeout = d;
        }
        Some(other) => {
            return Err(format!(
                "{NAME} args: bindingTimeout: expected a duration string like \"600s\", got {}",
                super::helpers::json_type(other)
            ))
        }
    }
    match obj.get("rankedSets") {
        None => {}
        Some(v) => match v.as_u64().filter(|&n| n <= ranking::MAX_SETS_LIMIT as u64) {
            Some(n) => out.ranked_sets = n as usize,
            None => {
                return Err(format!(
                    "{NAME} args: rankedSets: expected an integer from 0 to {}, got {v}",
                    ranking::MAX_SETS_LIMIT
                ))
            }
        },
    }
    Ok(out)
}
