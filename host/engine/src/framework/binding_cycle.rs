//! The extension points that run once a pod has a node (upstream's
//! `RunReservePlugins`, `RunPermitPlugins`, `RunPreBindPlugins`,
//! `RunBindPlugins`, `RunPostBindPlugins`): Reserve and Unreserve,
//! PreBind and Bind output (the binding cycle's actions), Permit, and
//! PostBind. What to do with the pod (assume it, queue it again) is the
//! Scheduler's (`crate::scheduler`).

use std::collections::BTreeMap;

use crate::model::Pod;

use super::cycle::Framework;
use super::cycle_state::CycleState;
use super::interface::{BindAction, CycleContext, Permit, PluginError, SchedulingError};
use super::node_info::{NodeInfo, Snapshot};

pub use super::assumption::Assumption;

impl Framework {
    /// Reserve (each plugin in order), PreBind output, Bind plugins and
    /// Permit. Returns the binding actions and the Permit waits (plugin ->
    /// deadline). A failure undoes the reservations made.
    pub fn prepare_binding(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        cycle: u64,
        state: &mut CycleState,
        node: &NodeInfo,
        now_ms: u64,
    ) -> Result<(Vec<BindAction>, BTreeMap<String, u64>), Refusal> {
        let ctx = &CycleContext {
            pod,
            snapshot,
            cycle,
            pool: None,
            device_rankers: &[],
            explaining: false,
        };
        let profile = self.profile();
        let undo = |state: &CycleState| self.unreserve(ctx.pod, state, node.name());
        for (i, r) in profile.reserve.iter().enumerate() {
            if let Err(e) = r.reserve(ctx, state, node) {
                for done in profile.reserve[..i].iter().rev() {
                    done.unreserve(ctx.pod, state, node.name());
                }
                return Err(Refusal::Error(binding_error(r.name(), "Reserve", e)));
            }
        }
        let actions = match self.binding_actions(ctx.pod, state, node.name()) {
            Ok(a) => a,
            Err(e) => {
                undo(state);
                return Err(Refusal::Error(e));
            }
        };
        let mut waits = BTreeMap::new();
        for p in &profile.permit {
            match p.permit(ctx, state, node) {
                Ok(Permit::Allow) => {}
                Ok(Permit::Wait(d)) => {
                    waits.insert(p.name().to_string(), now_ms + d.as_millis() as u64);
                }
                Ok(Permit::Reject(reason)) => {
                    undo(state);
                    return Err(Refusal::Unschedulable(reason));
                }
                Err(e) => {
                    undo(state);
                    return Err(Refusal::Error(binding_error(p.name(), "Permit", e)));
                }
            }
        }
        Ok((actions, waits))
    }

    /// PreBind output of every PreBind plugin, then the first Bind plugin
    /// that binds (the default binder: `pods/binding`).
    fn binding_actions(
        &self,
        pod: &Pod,
        state: &CycleState,
        node: &str,
    ) -> Result<Vec<BindAction>, SchedulingError> {
        let profile = self.profile();
        let mut actions = Vec::new();
        for p in &profile.pre_bind {
            let mut a = p
                .pre_bind(pod, state, node)
                .map_err(|e| binding_error(p.name(), "PreBind", e))?;
            actions.append(&mut a);
        }
        for b in &profile.bind {
            match b.bind(pod, state, node) {
                Ok(Some(mut a)) => {
                    actions.append(&mut a);
                    return Ok(actions);
                }
                Ok(None) => {}
                Err(e) => return Err(binding_error(b.name(), "Bind", e)),
            }
        }
        actions.push(BindAction::Bind);
        Ok(actions)
    }

    /// Every Reserve plugin's Unreserve, in reverse order.
    pub fn unreserve(&self, pod: &Pod, state: &CycleState, node: &str) {
        for r in self.profile().reserve.iter().rev() {
            r.unreserve(pod, state, node);
        }
    }

    /// The binding cycle succeeded: PostBind.
    pub fn post_bind(&self, a: &Assumption) {
        for p in &self.profile().post_bind {
            p.post_bind(&a.pod, &a.state, &a.placement.node);
        }
    }

    /// Why a pod held at Permit waits, for its event: the first Permit
    /// plugin that says, else upstream's wording.
    pub fn waiting_message(&self, pod: &Pod, node: &str) -> String {
        self.profile()
            .permit
            .iter()
            .find_map(|p| p.waiting_message(pod, node))
            .unwrap_or_else(|| format!("Reserved on {node}; waiting at Permit"))
    }
}

/// Why a pod that fits was not assumed.
pub enum Refusal {
    /// Permit rejected it.
    Unschedulable(String),
    /// Reserve, PreBind or Bind failed.
    Error(SchedulingError),
}

fn binding_error(plugin: &str, point: &'static str, cause: PluginError) -> SchedulingError {
    SchedulingError::Binding {
        plugin: plugin.to_string(),
        point,
        cause,
    }
}
