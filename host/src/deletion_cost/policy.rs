//! The deletion-cost policy: one wasm instance of the configured plugin,
//! called once per pod. A failing instance (trap, timeout, memory) is
//! dropped and the next call builds a fresh one, as for scheduling plugins.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::facts::PodFacts;
use crate::framework::Snapshot;
use crate::wasm::bindings::types as wit;
use crate::wasm::{
    FailurePolicy, Limits, Loader, PluginFailure, PluginModule, WasmPlugin, WasmSettings,
};

/// The deletion-cost policy to run.
#[derive(Clone)]
pub struct PolicySpec {
    pub name: String,
    pub module: Arc<PluginModule>,
    pub limits: Limits,
    /// Args as JSON text.
    pub args: String,
}

impl std::fmt::Debug for PolicySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySpec")
            .field("name", &self.name)
            .field("digest", &self.module.digest)
            .field("args", &self.args)
            .finish()
    }
}

/// The contract's pod record for the deletion-cost call.
pub type WitPodStatus = wit::PodStatus;

/// The policy plugin, started through the plugin loader.
pub struct CostPolicy {
    plugin: Arc<WasmPlugin>,
}

impl CostPolicy {
    /// Instantiates the plugin and runs `init` with its args, so bad args
    /// fail here, at start.
    pub fn new(spec: &PolicySpec) -> Result<Self, PluginFailure> {
        let settings = WasmSettings {
            args: spec.args.clone(),
            limits: spec.limits,
            failure_policy: FailurePolicy::Fail,
        };
        let plugin = Loader::default().start(
            &spec.name,
            spec.module.clone(),
            settings,
            0,
            Default::default(),
        )?;
        Ok(CostPolicy { plugin })
    }

    pub fn name(&self) -> &str {
        &self.plugin.name
    }

    /// The plugin's cost for one pod, or `None` for no opinion. A failing
    /// instance is replaced on the next call, as for scheduling plugins.
    pub fn cost(
        &self,
        pod: &wit::PodStatus,
        metrics: &[(String, f64)],
    ) -> Result<Option<i32>, PluginFailure> {
        static EMPTY: std::sync::OnceLock<Snapshot> = std::sync::OnceLock::new();
        let empty = EMPTY.get_or_init(Snapshot::default);
        self.plugin.call_deletion_cost(empty, pod, metrics)
    }
}

/// The contract's record of a pod for the deletion-cost call.
pub fn pod_status(facts: &PodFacts, now: Timestamp) -> Result<wit::PodStatus, String> {
    let model = facts.model.as_ref().map_err(Clone::clone)?;
    Ok(wit::PodStatus {
        pod: crate::wasm::convert::pod(model, &crate::wasm::interests::Interests::default()),
        phase: facts.phase.as_str().to_string(),
        ready: facts.ready,
        age_seconds: facts.age_seconds(now),
        restarts: facts.restarts.total,
    })
}
