//! The end of a binding cycle, as the driver reports it: the same
//! bookkeeping for `run`'s binder and for `simulate`'s instant binding.

use crate::framework::Cache;

use super::{Binding, Scheduler};

/// How a binding cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingResult {
    /// The pod is bound; the watch will confirm it.
    Bound,
    /// The pod is gone, already bound elsewhere, or was re-created under
    /// its name: the reservation is undone and the watch tells the truth.
    Dropped,
    /// It did not bind (an error, its node gone, leadership lost): the
    /// reservation is undone and the pod backs off.
    Retry,
}

impl Scheduler {
    /// Reports the end of `binding`'s cycle at `now_ms` (upstream's
    /// `handleBindingCycleError` and PostBind).
    pub fn binding_finished(
        &self,
        cache: &mut Cache,
        binding: &Binding,
        result: BindingResult,
        now_ms: u64,
    ) {
        let a = &binding.assumption;
        let uid = &a.pod.uid;
        let fw = self.profile(&binding.profile);
        match result {
            BindingResult::Bound => {
                cache.finish_binding(uid, now_ms);
                if let Some(fw) = fw {
                    fw.post_bind(a);
                }
            }
            BindingResult::Dropped => {
                if let Some(fw) = fw {
                    fw.unreserve(&a.pod, &a.state, &a.placement.node);
                }
                cache.forget(uid, now_ms);
            }
            BindingResult::Retry => match fw {
                Some(fw) => self.unassume(fw, a, cache, now_ms, false),
                None => {
                    cache.forget(uid, now_ms);
                    cache.requeue(a.pod.clone(), now_ms);
                }
            },
        }
    }
}

impl Scheduler {
    /// A binding cycle carried out without an API server (`simulate`,
    /// `bench`, `plugin test`): the PreBind plugins' steps applied as the
    /// API server and controllers would (volume bindings), the binding
    /// successful, and the pod seen bound as the watch would show it.
    pub fn bind_at_once(&self, cache: &mut Cache, binding: &Binding, now_ms: u64) {
        let a = &binding.assumption;
        if let Some(fw) = self.profile(&binding.profile) {
            for p in &fw.profile().pre_bind {
                p.simulate(&a.actions, &cache.snapshot);
            }
        }
        self.binding_finished(cache, binding, BindingResult::Bound, now_ms);
        self.pod_applied(cache, (*a.pod).clone(), false, now_ms);
        cache.snapshot.compact_log();
    }
}
