//! DynamicResources' [`AwaitBindingConditions`] step (upstream's PreBind
//! wait, DRADeviceBindingConditions): once the claims are written, a
//! `BindingConditionsPending` event, then the claims are read every
//! [`POLL`] until every binding condition of their devices is True in
//! `status.devices[]` (a driver or controller sets them). A failure
//! condition that is True fails the binding, and so does the
//! `bindingTimeout` (counted from the allocation's timestamp): the pod's
//! reservation is taken back, the pod retried after backoff, and the next
//! attempt's Filter finds the claim unusable, PostFilter deallocates it
//! and devices are allocated anew. The wait runs in the binding's own
//! task: the scheduling loop goes on meanwhile.

use std::time::{Duration, Instant};

use kube::api::DynamicObject;

use super::{BindResult, Binder};
use crate::framework::plugins::dynamic_resources::binding_conditions::{
    self as bc, Readiness, TIMEOUT,
};
use crate::framework::plugins::dynamic_resources::AwaitBindingConditions;
use crate::model::dra::{to_v1, Claim};
use crate::runtime::events::{PodRef, Report};
use crate::scheduler::Binding;

/// How often the claims are read while waiting (upstream polls its cache
/// every 5 s).
const POLL: Duration = Duration::from_secs(1);

/// How a claim read while waiting stands.
enum Seen {
    Ready,
    Pending,
    /// Why the binding ends: failed or timed out.
    Over(String),
}

impl Binder {
    /// Waits for the binding conditions of the claims `a` names (and of
    /// `extended`, the claim this binding created for extended
    /// resources).
    pub(super) async fn await_binding_conditions(
        &self,
        req: &Binding,
        a: &AwaitBindingConditions,
        extended: Option<&str>,
    ) -> BindResult {
        let pod = req.pod();
        let _ = self.reports.send(Report::Normal {
            pod: PodRef::from(&**pod),
            reason: "BindingConditionsPending",
            message: format!(
                "waiting for binding conditions for device on node {}",
                a.node
            ),
            profile: req.profile.clone(),
        });
        tracing::info!(pod = %pod.key(), node = %a.node, devices = %a.pending.join("; "), "waiting for binding conditions");
        let names: Vec<&str> = a
            .claims
            .iter()
            .map(String::as_str)
            .chain(extended)
            .collect();
        let (api, version) = self.claims_api_versioned(&a.namespace).await;
        let started = Instant::now();
        loop {
            if let Some(r) = self.ready(req).await {
                return r;
            }
            let mut all_ready = true;
            for name in &names {
                self.throttle.wait().await;
                let seen = match api.get(name).await {
                    Ok(o) => judge(&o, version, a.timeout),
                    Err(kube::Error::Api(e)) if e.code == 404 => Seen::Over(format!(
                        "claim {}/{name} got deleted in the meantime",
                        a.namespace
                    )),
                    Err(e) => {
                        tracing::debug!(pod = %pod.key(), claim = %name, error = %e, "reading the claim failed; trying again");
                        Seen::Pending
                    }
                };
                match seen {
                    Seen::Ready => {}
                    Seen::Pending => all_ready = false,
                    Seen::Over(why) => {
                        tracing::warn!(pod = %pod.key(), node = %a.node, error = %why, "PreBind of DynamicResources failed; will retry");
                        return BindResult::Error;
                    }
                }
            }
            if all_ready {
                tracing::debug!(pod = %pod.key(), node = %a.node, "BindingConditions is met");
                return BindResult::Bound;
            }
            // A claim without an allocation timestamp still times out.
            if started.elapsed() > a.timeout + POLL {
                tracing::warn!(pod = %pod.key(), node = %a.node, error = TIMEOUT, "PreBind of DynamicResources failed; will retry");
                return BindResult::Error;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Upstream's `isPodReadyForBinding` for one claim as read.
fn judge(o: &DynamicObject, version: &str, timeout: Duration) -> Seen {
    let name = o.metadata.name.clone().unwrap_or_default();
    let value = match serde_json::to_value(o) {
        Ok(v) => to_v1("ResourceClaim", version, v),
        Err(e) => return Seen::Over(format!("claim {name}: {e}")),
    };
    let claim = serde_json::from_value::<k8s_openapi::api::resource::v1::ResourceClaim>(value)
        .map_err(|e| e.to_string())
        .and_then(|c| Claim::from_api(&c));
    let claim = match claim {
        Ok(c) => c,
        Err(e) => return Seen::Over(format!("claim {name} cannot be read: {e}")),
    };
    if claim.allocation.is_none() {
        return Seen::Over(format!(
            "claim {name} got deallocated elsewhere in the meantime"
        ));
    }
    match bc::readiness(&claim) {
        Readiness::Ready => Seen::Ready,
        Readiness::Failed(why) => Seen::Over(format!("{why} (devices: {})", bc::summary(&claim))),
        Readiness::Pending if bc::timed_out(&claim, timeout, bc::now()) => Seen::Over(format!(
            "{TIMEOUT}: claim={name} (devices: {})",
            bc::summary(&claim)
        )),
        Readiness::Pending => Seen::Pending,
    }
}
