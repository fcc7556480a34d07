//! PostFilter: when no node fits, each PostFilter plugin (preemption) in
//! order until one nominates a node. Also the [`FilterRunner`] that lets
//! it re-run the profile's filters on what-if copies of nodes.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::framework::advisor::PreemptionAdvisor;
use crate::framework::cycle_state::CycleState;
use crate::framework::explain::PreemptionExplanation;
use crate::framework::fit_error::FitError;
use crate::framework::interface::{
    CycleContext, FilterRunner, Filtered, Nomination, PluginError, PostFilterResult, Rejection,
};
use crate::framework::node_info::NodeInfo;
use crate::framework::profile::Profile;
use crate::model::Pod;

use super::phase::Cycle;
use super::verdict::{Found, Timed};

impl Cycle<'_> {
    /// Runs PostFilter; adds its messages to `fit`; the nomination, if any.
    pub(super) fn post_filter(&mut self, fit: &mut FitError, found: &Found) -> Option<Nomination> {
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
            pool: Some(self.pool),
            recording: self.recording,
            explained: Mutex::new(None),
        };
        let mut nominated = None;
        for p in &self.profile.post_filter {
            let _t = Timed::start(self.timings, p.name(), "PostFilter");
            let filtered = Filtered {
                fit,
                unresolvable: &unresolvable,
            };
            match p.post_filter(&self.ctx, &self.state, &filtered, &runner) {
                Ok(PostFilterResult::Nominated(n)) => {
                    nominated = Some(n);
                    break;
                }
                Ok(PostFilterResult::Unschedulable(msg)) => {
                    if !msg.is_empty() {
                        fit.post_filter.push(msg);
                    }
                }
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
        self.timings
            .extension_point("PostFilter", status, started.elapsed());
        self.record.preemption = runner.explained.into_inner();
        nominated
    }
}

/// The profile's filters, for what-if evaluations.
pub(super) struct Runner<'a> {
    pub profile: &'a Profile,
    /// Filter plugins that said Skip at PreFilter.
    pub skipped: &'a [bool],
    pub pool: Option<&'a rayon::ThreadPool>,
    pub recording: bool,
    /// What preemption recorded for `--explain`.
    pub explained: Mutex<Option<PreemptionExplanation>>,
}

impl Runner<'_> {
    /// The Filter plugins in order, each node stopping at its first
    /// rejection; the rejecting plugin's position with it.
    pub fn filter_at(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), (usize, Rejection)> {
        for (i, f) in self.profile.filter.iter().enumerate() {
            if self.skipped.get(i) == Some(&true) {
                continue;
            }
            f.filter(ctx, state, node).map_err(|r| (i, r))?;
        }
        Ok(())
    }
}

impl FilterRunner for Runner<'_> {
    fn run_filters(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        self.filter_at(ctx, state, node).map_err(|(_, r)| r)
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

    fn advisors(&self) -> &[Arc<dyn PreemptionAdvisor>] {
        &self.profile.preemption_advisors
    }

    fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool
    }

    fn recording(&self) -> bool {
        self.recording
    }

    fn record(&self, explanation: PreemptionExplanation) {
        *self.explained.lock() = Some(explanation);
    }
}
