//! The built-in pod-deletion-cost policy of wasmsched.
//!
//! The deletion-cost controller calls it once per pod of an opted-in
//! ReplicaSet with the pod's status and live metrics; the answer goes into
//! `controller.kubernetes.io/pod-deletion-cost`, so the ReplicaSet
//! controller removes cheap pods (idle, still warming up) before expensive
//! ones (busy, warm caches, live connections) on scale-down. The formula,
//! args and a worked example are in docs/deletion-cost.md.

pub mod args;
pub mod formula;

pub use args::Config;
pub use formula::{Breakdown, Inputs, Tier};

use wasmsched_plugin_sdk::types::{Pod, PodStatus};
use wasmsched_plugin_sdk::{export_plugin, Cluster, Plugin, PodExt};

pub struct DeletionCost {
    cfg: Config,
}

/// Logs at debug level through the host (`--log wasmsched=debug`); only
/// in the component, natively the SDK would print to stderr.
fn debug(message: impl FnOnce() -> String) {
    #[cfg(target_arch = "wasm32")]
    wasmsched_plugin_sdk::log(wasmsched_plugin_sdk::types::LogLevel::Debug, &message());
    #[cfg(not(target_arch = "wasm32"))]
    let _ = message;
}

/// A metric value the formula may use: finite and not negative. The host
/// already holds pods whose metrics are garbage; this guards other hosts.
fn metric(metrics: &[(String, f64)], name: &str) -> Result<Option<f64>, String> {
    match metrics.iter().find(|(k, _)| k == name) {
        None => Ok(None),
        Some((_, v)) if !v.is_finite() || *v < 0.0 => {
            Err(format!("metric {name} = {v}: must be a finite number >= 0"))
        }
        Some((_, v)) => Ok(Some(*v)),
    }
}

impl DeletionCost {
    pub fn new(cfg: Config) -> Self {
        DeletionCost { cfg }
    }

    /// The pod's tier from its label, else its annotation.
    fn tier(&self, pod: &Pod) -> Result<Option<Tier>, String> {
        let key = &self.cfg.tier_label;
        let (what, value) = match (pod.label(key), pod.annotation(key)) {
            (Some(v), _) => ("label", v),
            (None, Some(v)) => ("annotation", v),
            (None, None) => return Ok(None),
        };
        Tier::parse(value).map(Some).ok_or_else(|| {
            format!(
                "pod {}/{}: {what} {key}={value:?}: expected {}",
                pod.namespace,
                pod.name,
                Tier::NAMES
            )
        })
    }

    /// Reads and checks the inputs of the formula.
    pub fn inputs(&self, pod: &PodStatus, metrics: &[(String, f64)]) -> Result<Inputs, String> {
        let cache_hit_rate = metric(metrics, formula::CACHE_HIT_RATE)?;
        if let Some(r) = cache_hit_rate.filter(|r| *r > 1.0) {
            return Err(format!(
                "metric {} = {r}: a ratio in 0..=1 is expected (divide a percentage by 100 in the query)",
                formula::CACHE_HIT_RATE
            ));
        }
        Ok(Inputs {
            active_requests: metric(metrics, formula::ACTIVE_REQUESTS)?,
            cache_hit_rate,
            avg_response_time_seconds: metric(metrics, formula::AVG_RESPONSE_TIME)?,
            active_connections: metric(metrics, formula::ACTIVE_CONNECTIONS)?,
            age_seconds: pod.age_seconds,
            tier: if self.cfg.tiers {
                self.tier(&pod.pod)?
            } else {
                None
            },
        })
    }

    /// The breakdown of one pod's cost.
    pub fn breakdown(
        &self,
        pod: &PodStatus,
        metrics: &[(String, f64)],
    ) -> Result<Breakdown, String> {
        Ok(formula::compute(&self.cfg, &self.inputs(pod, metrics)?))
    }
}

impl Plugin for DeletionCost {
    type Cycle = ();

    fn init(args: &str) -> Result<Self, String> {
        let cfg = Config::parse(args)?;
        debug(|| format!("deletion-cost configuration: {cfg:?}"));
        Ok(DeletionCost::new(cfg))
    }

    /// Never called: this plugin takes part in no scheduling cycle.
    fn cycle_start(&self, _pod: &Pod, _cluster: &Cluster) -> Result<(), String> {
        Ok(())
    }

    fn deletion_cost(
        &self,
        pod: &PodStatus,
        metrics: &[(String, f64)],
    ) -> Result<Option<i32>, String> {
        let b = self.breakdown(pod, metrics)?;
        debug(|| format!("{}/{}: {b:?}", pod.pod.namespace, pod.pod.name));
        Ok(b.cost)
    }
}

export_plugin!(DeletionCost: deletion_cost);

#[cfg(test)]
mod tests;
