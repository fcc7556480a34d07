//! The deletion-cost policy: one wasm instance of the configured plugin,
//! called once per pod. A failing instance (trap, timeout, memory) is
//! dropped and the next call builds a fresh one, as for scheduling plugins.

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use super::config::PolicySpec;
use super::facts::PodFacts;
use crate::wasm::bindings::types as wit;
use crate::wasm::instance::Instance;
use crate::wasm::PluginFailure;

/// The contract's pod record for the deletion-cost call.
pub type WitPodStatus = wit::PodStatus;

pub struct CostPolicy {
    spec: PolicySpec,
    instance: Mutex<Option<Instance>>,
}

impl CostPolicy {
    /// Instantiates the plugin and runs `init` with its args, so bad args
    /// fail here, at start.
    pub fn new(spec: &PolicySpec) -> Result<Self, PluginFailure> {
        let first = Instance::new(&spec.name, &spec.module, spec.limits, &spec.args)?;
        Ok(CostPolicy {
            spec: spec.clone(),
            instance: Mutex::new(Some(first)),
        })
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The plugin's cost for one pod, or `None` for no opinion.
    pub fn cost(
        &self,
        pod: &wit::PodStatus,
        metrics: &[(String, f64)],
    ) -> Result<Option<i32>, PluginFailure> {
        let mut slot = self.instance.lock();
        if slot.is_none() {
            *slot = Some(Instance::new(
                &self.spec.name,
                &self.spec.module,
                self.spec.limits,
                &self.spec.args,
            )?);
        }
        let result = slot
            .as_mut()
            .expect("instance was just ensured")
            .deletion_cost(pod, metrics);
        if let Err(failure) = &result {
            tracing::warn!(plugin = %self.spec.name, %failure, "deletion-cost call failed; its instance is replaced");
            *slot = None;
        }
        result
    }
}

/// The contract's record of a pod for the deletion-cost call.
pub fn pod_status(facts: &PodFacts, now: Timestamp) -> Result<wit::PodStatus, String> {
    let model = facts.model.as_ref().map_err(Clone::clone)?;
    Ok(wit::PodStatus {
        pod: crate::wasm::convert::pod(model),
        phase: facts.phase.as_str().to_string(),
        ready: facts.ready,
        age_seconds: facts.age_seconds(now),
        restarts: facts.restarts.total,
    })
}
