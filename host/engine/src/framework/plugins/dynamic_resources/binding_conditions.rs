//! Device binding conditions (DRADeviceBindingConditions, beta and on in
//! kube-scheduler 1.37): a device whose slice lists `bindingConditions`
//! is allocated with them (and its `bindingFailureConditions`) in the
//! claim's allocation result; PreBind then waits until the claim's
//! `status.devices[]` shows each binding condition True (a driver or
//! controller sets them), fails when a failure condition is True, and
//! gives up after `bindingTimeout` counted from `allocationTimestamp`.
//! Upstream's `isClaimReadyForBinding`, `isClaimTimeout` and
//! `formatBCStatusOneLine`; the wait itself is the runtime binder's.

use std::time::Duration;

use crate::model::dra::{Allocated, Claim};

/// Now, for [`timed_out`].
pub fn now() -> k8s_openapi::jiff::Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// Upstream's `DynamicResourcesBindingTimeoutDefault`.
pub const DEFAULT_BINDING_TIMEOUT: Duration = Duration::from_secs(600);

/// Upstream's `ErrDeviceBindingTimeout` and `ErrDeviceBindingFailed`.
pub const TIMEOUT: &str = "device binding timeout";
pub const FAILED: &str = "device binding failed";

/// Where a claim's binding stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Every binding condition True, no failure condition True (also: no
    /// binding conditions at all).
    Ready,
    /// Some binding condition is not True yet.
    Pending,
    /// A failure condition is True: upstream's error text.
    Failed(String),
}

/// Upstream's `isClaimReadyForBinding`.
pub fn readiness(claim: &Claim) -> Readiness {
    let Some(allocation) = &claim.allocation else {
        return Readiness::Pending;
    };
    for r in &allocation.results {
        if r.binding_conditions.is_empty() {
            continue;
        }
        let Some(conditions) = device_status(claim, r) else {
            return Readiness::Pending;
        };
        for f in &r.binding_failure_conditions {
            if let Some(c) = conditions.iter().find(|c| &c.type_ == f) {
                return Readiness::Failed(format!(
                    "{FAILED}: claim={}, reason={}, message={:?}",
                    claim.name, c.reason, c.message
                ));
            }
        }
        if r.binding_conditions
            .iter()
            .any(|b| !conditions.iter().any(|c| &c.type_ == b))
        {
            return Readiness::Pending;
        }
    }
    Readiness::Ready
}

/// The True conditions the claim's status lists for the device, if it
/// lists the device.
fn device_status<'c>(
    claim: &'c Claim,
    r: &Allocated,
) -> Option<&'c [crate::model::dra::TrueCondition]> {
    let id = r.id();
    claim
        .device_conditions
        .iter()
        .find(|(d, _)| *d == id)
        .map(|(_, c)| c.as_slice())
}

/// Upstream's `isClaimTimeout`: the claim has a device with binding
/// conditions and was allocated more than `timeout` before `now`.
pub fn timed_out(claim: &Claim, timeout: Duration, now: k8s_openapi::jiff::Timestamp) -> bool {
    let Some(allocation) = &claim.allocation else {
        return false;
    };
    let Some(at) = allocation.allocated_at else {
        return false;
    };
    if !allocation
        .results
        .iter()
        .any(|r| !r.binding_conditions.is_empty())
    {
        return false;
    }
    let Ok(timeout) = k8s_openapi::jiff::SignedDuration::try_from(timeout) else {
        return false;
    };
    at.checked_add(timeout).is_ok_and(|end| end < now)
}

/// Whether any allocated device of the claim has binding conditions
/// (upstream's `hasBindingConditions`, for one claim).
pub fn has_conditions(claim: &Claim) -> bool {
    claim
        .allocation
        .iter()
        .flat_map(|a| &a.results)
        .any(|r| !r.binding_conditions.is_empty())
}

/// The devices of an allocation result (as written) that have binding
/// conditions, each as upstream's log line names it with what is pending
/// (`<driver=D, pool=P> device pending=[a,b]`).
pub fn pending_in_allocation(allocation: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for r in allocation["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let conditions: Vec<&str> = r["bindingConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str())
            .collect();
        if conditions.is_empty() {
            continue;
        }
        out.push(format!(
            "<driver={}, pool={}> {} pending=[{}]",
            r["driver"].as_str().unwrap_or_default(),
            r["pool"].as_str().unwrap_or_default(),
            r["device"].as_str().unwrap_or_default(),
            conditions.join(",")
        ));
    }
    out
}

/// Upstream's per-device summary line of a claim's binding conditions
/// (`formatBCStatusOneLine` over `listBindingConditionsStatus`): failed
/// and pending conditions per device with binding conditions.
pub fn summary(claim: &Claim) -> String {
    let Some(allocation) = &claim.allocation else {
        return String::new();
    };
    let mut parts = Vec::new();
    for r in &allocation.results {
        if r.binding_conditions.is_empty() {
            continue;
        }
        let conditions = device_status(claim, r).unwrap_or_default();
        let is_true = |t: &String| conditions.iter().any(|c| &c.type_ == t);
        let failed: Vec<&str> = r
            .binding_failure_conditions
            .iter()
            .filter(|t| is_true(t))
            .map(String::as_str)
            .collect();
        let pending: Vec<&str> = r
            .binding_conditions
            .iter()
            .filter(|t| !is_true(t))
            .map(String::as_str)
            .collect();
        let mut base = format!("<driver={}, pool={}> {}", r.driver, r.pool, r.device);
        if !failed.is_empty() {
            base += &format!(" failed=[{}]", failed.join(","));
        }
        if !pending.is_empty() {
            base += &format!(" pending=[{}]", pending.join(","));
        }
        parts.push(base);
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1 as api;
    use serde_json::json;

    /// A claim allocated `minutes_ago` with device `instance-1` of pool
    /// `worker` (binding condition `condition`, failure condition
    /// `failed`), its status listing `conditions` (type, status) for the
    /// device; `None`: no device status.
    fn claim(minutes_ago: i64, conditions: Option<&[(&str, &str)]>) -> Claim {
        let at = now() - k8s_openapi::jiff::SignedDuration::from_mins(minutes_ago);
        let mut v = json!({
            "metadata": {"name": "my-claim", "namespace": "default", "uid": "u"},
            "spec": {"devices": {"requests": [{"name": "req-1", "exactly": {"deviceClassName": "class"}}]}},
            "status": {"allocation": {
                "allocationTimestamp": serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)).unwrap(),
                "devices": {"results": [{
                    "request": "req-1", "driver": "some-driver", "pool": "worker", "device": "instance-1",
                    "bindingConditions": ["condition"], "bindingFailureConditions": ["failed"],
                }]},
            }},
        });
        if let Some(cs) = conditions {
            let list: Vec<_> = cs
                .iter()
                .map(|(t, s)| json!({"type": t, "status": s, "reason": "Because", "message": "it is so", "lastTransitionTime": "2026-01-01T00:00:00Z"}))
                .collect();
            v["status"]["devices"] = json!([{"driver": "some-driver", "pool": "worker", "device": "instance-1", "conditions": list}]);
        }
        let c: api::ResourceClaim = serde_json::from_value(v).unwrap();
        Claim::from_api(&c).unwrap()
    }

    #[test]
    fn ready_only_when_every_binding_condition_is_true() {
        assert_eq!(readiness(&claim(0, None)), Readiness::Pending);
        assert_eq!(readiness(&claim(0, Some(&[]))), Readiness::Pending);
        assert_eq!(
            readiness(&claim(0, Some(&[("condition", "False")]))),
            Readiness::Pending
        );
        assert_eq!(
            readiness(&claim(0, Some(&[("condition", "True")]))),
            Readiness::Ready
        );
    }

    #[test]
    fn a_true_failure_condition_fails_with_upstreams_text() {
        assert_eq!(
            readiness(&claim(
                0,
                Some(&[("condition", "True"), ("failed", "True")])
            )),
            Readiness::Failed(
                "device binding failed: claim=my-claim, reason=Because, message=\"it is so\""
                    .into()
            )
        );
        // A failure condition that is False does not fail.
        assert_eq!(
            readiness(&claim(
                0,
                Some(&[("condition", "True"), ("failed", "False")])
            )),
            Readiness::Ready
        );
    }

    #[test]
    fn times_out_after_the_binding_timeout_from_the_allocation() {
        let now = now();
        assert!(timed_out(&claim(11, None), DEFAULT_BINDING_TIMEOUT, now));
        assert!(!timed_out(&claim(9, None), DEFAULT_BINDING_TIMEOUT, now));
        assert!(timed_out(&claim(2, None), Duration::from_secs(60), now));
    }

    #[test]
    fn summary_names_failed_and_pending_conditions() {
        assert_eq!(
            summary(&claim(0, None)),
            "<driver=some-driver, pool=worker> instance-1 pending=[condition]"
        );
        assert_eq!(
            summary(&claim(0, Some(&[("failed", "True")]))),
            "<driver=some-driver, pool=worker> instance-1 failed=[failed] pending=[condition]"
        );
        assert!(has_conditions(&claim(0, None)));
    }

    #[test]
    fn pending_devices_of_an_allocation_as_written() {
        let a = json!({"devices": {"results": [
            {"driver": "d", "pool": "p", "device": "a"},
            {"driver": "d", "pool": "p", "device": "b", "bindingConditions": ["attached", "ready"]},
        ]}});
        assert_eq!(
            pending_in_allocation(&a),
            ["<driver=d, pool=p> b pending=[attached,ready]"]
        );
    }
}
