//! PostFilter: when no node fits, each PostFilter plugin (preemption) in
//! order until one nominates a node. Also the [`FilterRunner`] that lets
//! it re-run the profile's filters on what-if copies of nodes.

use std::sync::Arc;
use std::time::Instant;

use crate::framework::cycle_state::CycleState;
use crate::framework::fit_error::FitError;
use crate::framework::interface::{
    CycleContext, FilterRunner, Filtered, Nomination, PluginError, PostFilterResult, Rejection,
};
use crate::framework::node_info::NodeInfo;
use crate::framework::profile::Profile;
use crate::model::Pod;

use super::filter::Found;
use super::{Cycle, Timed};

impl Cycle<'_> {
    /// Runs PostFilter; adds its messages to `fit`; the nomination, if any.
    pub(super) fn post_filter(&self, fit: &mut FitError, found: &Found) -> Option<Nomination> {
        if self.profile.post_filter.is_empty() {
            return None;
        }
        let started = Instant::now();
        let unresolvable: Vec<u32> = found
            .rejections
            .iter()
            .filter(|(_, r)| r.unresolvable)
            .map(|(i, _)| *i)
            .collect();
        let runner = Runner {
            profile: self.profile,
            skipped: &self.skip_filter,
        };
        let mut nominated = None;
        for p in &self.profile.post_filter {
            let _t = Timed::start(&self.fw.timings, p.name(), "PostFilter");
            let filtered = Filtered {
                fit,
                unresolvable: &unresolvable,
            };
            match p.post_filter(&self.ctx, &self.state, &filtered, &runner) {
                Ok(PostFilterResult::Nominated(n)) => {
                    nominated = Some(n);
                    break;
                }
                Ok(PostFilterResult::Unschedulable(msg)) => fit.post_filter.push(msg),
                Err(e) => fit
                    .post_filter
                    .push(format!("plugin {} failed: {e}", p.name())),
            }
        }
        let status = if nominated.is_some() {
            "Success"
        } else {
            "Unschedulable"
        };
        self.fw
            .timings
            .extension_point("PostFilter", status, started.elapsed());
        nominated
    }
}

/// The profile's filters, for what-if evaluations.
struct Runner<'a> {
    profile: &'a Profile,
    /// Filter plugins that said Skip at PreFilter.
    skipped: &'a [bool],
}

impl FilterRunner for Runner<'_> {
    fn run_filters(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        for (i, f) in self.profile.filter.iter().enumerate() {
            if self.skipped.get(i) == Some(&true) {
                continue;
            }
            f.filter(ctx, state, node)?;
        }
        Ok(())
    }

    fn add_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        for p in &self.profile.pre_filter {
            p.add_pod(ctx, state, pod, node)?;
        }
        Ok(())
    }

    fn remove_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        for p in &self.profile.pre_filter {
            p.remove_pod(ctx, state, pod, node)?;
        }
        Ok(())
    }
}
