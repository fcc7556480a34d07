//! Coscheduling's extension points (see the module's documentation).

use std::sync::Arc;
use std::time::Duration;

use crate::framework::{
    CycleContext, CycleState, Decision, FilterRunner, Filtered, NodeInfo, Permit, PermitPlugin,
    PluginError, PostBindPlugin, PostFilterPlugin, PostFilterResult, PreFilterPlugin, Rejection,
    ReservePlugin,
};
use crate::model::{Pod, PodGroup};

use super::gang::{Group, Reservation};
use super::groups::{group_key, Inner};
use super::resources::shortfall;
use super::topology::{self, Claim, Plan};
use super::{Coscheduling, NAME, STATE_KEY};

/// The group's PodGroup, or why it cannot be used.
fn spec(key: &str, g: &Group) -> Result<PodGroup, String> {
    match &g.spec {
        None => Err(format!("pod group {key} not found")),
        Some(Err(e)) => Err(e.clone()),
        Some(Ok(s)) => Ok(s.clone()),
    }
}

/// Members other groups planned into domains but have not reserved yet.
fn claims(inner: &Inner, key: &str) -> Vec<Claim> {
    inner
        .groups
        .iter()
        .filter(|(k, _)| k.as_str() != key)
        .filter_map(|(_, g)| {
            let plan = g.round.plan.clone()?;
            let pods = g.pending_members().map(|m| m.pod.clone()).collect();
            Some(Claim { plan, pods })
        })
        .collect()
}

impl Coscheduling {
    fn timeout(&self, spec: &PodGroup) -> Duration {
        spec.schedule_timeout
            .unwrap_or(self.args.permit_waiting_time)
    }

    /// PreFilter's checks for a member of `key`; the cycle's plan.
    fn check(&self, ctx: &CycleContext, key: &str) -> Result<Option<Arc<Plan>>, Rejection> {
        let now = self.clock.now_ms();
        let mut inner = self.groups.lock();
        // Other groups' claims matter only to a group about to plan.
        let planning = inner.groups.get(key).is_some_and(|g| {
            !g.round.planned && matches!(&g.spec, Some(Ok(s)) if s.topology.is_some())
        });
        let claims = if planning {
            claims(&inner, key)
        } else {
            Vec::new()
        };
        let g = inner.group_mut(key);
        let spec = spec(key, g).map_err(Rejection::unresolvable)?;
        if let Some(b) = g.backing_off(now) {
            let reason = format!(
                "pod group {key} backs off after a failed attempt: {}",
                b.reason
            );
            return Err(Rejection::new(reason));
        }
        let pod = ctx.pod;
        let unseen = usize::from(!g.members.contains_key(&pod.uid));
        let live = g.live_members() + unseen;
        let min = spec.min_member as usize;
        if live < min {
            return Err(Rejection::new(format!(
                "pod group {key} has {live} pod(s), fewer than its minMember {min}"
            )));
        }
        if g.assigned() < min && !g.round.resources_checked {
            if let Some(want) = &spec.min_resources {
                let short = shortfall(ctx.snapshot, key, want, spec.min_member);
                if !short.is_empty() {
                    let list: Vec<String> = short.iter().map(|(r, n)| format!("{r} {n}")).collect();
                    return Err(Rejection::new(format!(
                        "pod group {key}: minResources exceed the cluster's free capacity (short by {})",
                        list.join(", ")
                    )));
                }
            }
            g.round.resources_checked = true;
        }
        let Some(topology) = &spec.topology else {
            return Ok(None);
        };
        if !g.round.planned {
            let mut pending: Vec<Arc<Pod>> = g.pending_members().map(|m| m.pod.clone()).collect();
            if unseen == 1 {
                pending.push(Arc::new(pod.clone()));
            }
            let assigned = g.assigned_nodes();
            let req = topology::Request {
                key,
                topology,
                pending,
                assigned_nodes: &assigned,
            };
            let plan = topology::plan(req, ctx.snapshot, &claims).map_err(Rejection::new)?;
            g.round.plan = plan.map(Arc::new);
            g.round.planned = true;
        }
        Ok(g.round.plan.clone())
    }
}

impl PreFilterPlugin for Coscheduling {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let Some(key) = group_key(ctx.pod) else {
            return Ok(Decision::Skip);
        };
        match self.check(ctx, &key)? {
            Some(plan) => {
                state.write(STATE_KEY, plan);
                Ok(Decision::Run)
            }
            None => Ok(Decision::Skip),
        }
    }

    /// Upstream's PreFilter status: every node counts the group's reason
    /// (`0/8 nodes are available: 8 pod group ml/eval has 2 pod(s), ...`).
    fn rejection_counts_nodes(&self) -> bool {
        true
    }
}

impl PostFilterPlugin for Coscheduling {
    /// A member fits nowhere: unless the group is complete or within 10%
    /// of `minMember` (upstream's rule), its waiting members are rejected
    /// and the group backs off.
    fn post_filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        filtered: &Filtered,
        _runner: &dyn FilterRunner,
    ) -> Result<PostFilterResult, PluginError> {
        let none = Ok(PostFilterResult::Unschedulable(String::new()));
        let Some(key) = group_key(ctx.pod) else {
            return none;
        };
        let now = self.clock.now_ms();
        let mut inner = self.groups.lock();
        let g = inner.group_mut(&key);
        let (min, assigned) = (g.min_member(), g.assigned());
        if !matches!(g.spec, Some(Ok(_))) || g.round.allowed || assigned >= min {
            return none;
        }
        if assigned > 0 && (min - assigned) * 10 <= min {
            return Ok(PostFilterResult::Unschedulable(format!(
                "Pod group {key} keeps its {assigned} of {min} reserved members waiting."
            )));
        }
        let reason = format!(
            "{} is unschedulable: {}",
            ctx.pod.key(),
            filtered.fit.message()
        );
        if g.live_members() >= min && g.backing_off(now).is_none() {
            g.back_off(now + self.args.pod_group_backoff.as_millis() as u64, reason);
        } else {
            g.reset_round();
        }
        drop(inner);
        let why = format!(
            "pod group {key} rejected: {} is unschedulable",
            ctx.pod.key()
        );
        let n = self.reject_waiting(&key, &ctx.pod.uid, &why);
        Ok(PostFilterResult::Unschedulable(if n == 0 {
            format!("Pod group {key}: no member binds until {min} fit.")
        } else {
            format!("Pod group {key} rejected: {n} reserved member(s) released.")
        }))
    }
}

impl ReservePlugin for Coscheduling {
    fn reserve(
        &self,
        ctx: &CycleContext,
        _state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        let Some(key) = group_key(ctx.pod) else {
            return Ok(());
        };
        let now = self.clock.now_ms();
        let mut inner = self.groups.lock();
        let g = inner.group_mut(&key);
        let timeout = spec(&key, g).map_or(self.args.permit_waiting_time, |s| self.timeout(&s));
        g.reserved.insert(
            ctx.pod.uid.clone(),
            Reservation {
                node: node.name().to_string(),
                at_ms: now,
                timeout_ms: timeout.as_millis() as u64,
            },
        );
        g.started = true;
        inner.dirty.insert(key);
        Ok(())
    }

    /// A reservation undone before the group was allowed (its wait timed
    /// out, it was deleted, a later plugin refused it) fails the group's
    /// attempt: every waiting member is rejected and the group backs off.
    fn unreserve(&self, pod: &Pod, _state: &CycleState, _node: &str) {
        let Some(key) = group_key(pod) else { return };
        let now = self.clock.now_ms();
        let mut inner = self.groups.lock();
        inner.dirty.insert(key.clone());
        let g = inner.group_mut(&key);
        let Some(r) = g.reserved.remove(&pod.uid) else {
            return;
        };
        let (min, assigned) = (g.min_member(), g.assigned());
        if g.round.allowed || assigned >= min {
            return;
        }
        let held = assigned + 1;
        let why = if now >= r.at_ms.saturating_add(r.timeout_ms) {
            let secs = r.timeout_ms / 1000;
            format!("timed out after {secs}s with {held} of {min} members reserved")
        } else {
            format!(
                "{} gave up its reservation with {held} of {min} members reserved",
                pod.key()
            )
        };
        if g.backing_off(now).is_none() {
            g.back_off(
                now + self.args.pod_group_backoff.as_millis() as u64,
                why.clone(),
            );
        }
        drop(inner);
        self.reject_waiting(&key, &pod.uid, &format!("pod group {key} {why}"));
    }
}

impl PermitPlugin for Coscheduling {
    /// Waits until `minMember` are bound or reserved; the member that
    /// completes the group allows every waiting one.
    fn permit(
        &self,
        ctx: &CycleContext,
        _state: &mut CycleState,
        _node: &NodeInfo,
    ) -> Result<Permit, PluginError> {
        let Some(key) = group_key(ctx.pod) else {
            return Ok(Permit::Allow);
        };
        let mut inner = self.groups.lock();
        let g = inner.group_mut(&key);
        let spec = match spec(&key, g) {
            Ok(s) => s,
            Err(e) => return Ok(Permit::Reject(e)),
        };
        let assigned = g.assigned();
        if assigned >= spec.min_member as usize {
            g.round.allowed = true;
            drop(inner);
            for uid in self.waiting_members(&key, &ctx.pod.uid) {
                self.waiting.allow(&uid, NAME);
            }
            return Ok(Permit::Allow);
        }
        if assigned == 1 {
            // The first member waits: bring its siblings to the front.
            inner.activate_pending(&key);
        }
        Ok(Permit::Wait(self.timeout(&spec)))
    }

    fn waiting_message(&self, pod: &Pod, node: &str) -> Option<String> {
        self.groups.waiting_message(pod, node)
    }
}

impl PostBindPlugin for Coscheduling {
    fn post_bind(&self, pod: &Pod, _state: &CycleState, node: &str) {
        let Some(key) = group_key(pod) else { return };
        self.groups.lock().bound(&key, pod, node);
    }
}
