//! DeviceTaintRules (DRADeviceTaintRules): a rule taints the devices its
//! selector picks (driver, pool, device; each unset field matches all),
//! as if each had the taint in its slice. Upstream's ResourceSlice tracker
//! (`k8s.io/dynamic-resource-allocation/resourceslice/tracker`) patches
//! the slices kube-scheduler allocates from in the same way; a rule
//! without a selector taints nothing.

use serde_json::Value;

use crate::framework::objects::ApiKind;
use crate::model::dra::{self, Slice, Taint};

/// 1.37 serves `v1`; 1.36 `v1beta2`, earlier `v1alpha3` (same selector
/// fields).
pub const DEVICE_TAINT_RULE: ApiKind = ApiKind {
    group: dra::GROUP,
    versions: &["v1", "v1beta2", "v1alpha3"],
    kind: "DeviceTaintRule",
    plural: "devicetaintrules",
    namespaced: false,
    hint: "is resource.k8s.io/v1 DeviceTaintRule served? Kubernetes 1.37+, or the DRADeviceTaintRules gate on",
};

/// A DeviceTaintRule, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintRule {
    /// `None`: no `deviceSelector` (the rule taints no device).
    pub selector: Option<Selector>,
    pub taint: Taint,
}

/// `spec.deviceSelector`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
}

impl TaintRule {
    /// Reads a rule of any served version (the selector fields are the
    /// same in each); the `v1alpha3` fields later versions dropped
    /// (`deviceClassName`, `selectors`) are refused rather than ignored.
    pub fn parse(object: &Value) -> Result<Self, String> {
        for dropped in ["deviceClassName", "selectors"] {
            if object
                .pointer(&format!("/spec/deviceSelector/{dropped}"))
                .is_some_and(|v| !v.is_null())
            {
                return Err(format!(
                    "spec.deviceSelector.{dropped}: not supported (removed from the API after v1alpha3; select by driver, pool and device)"
                ));
            }
        }
        let spec = object
            .get("spec")
            .ok_or_else(|| "spec: missing".to_string())?;
        let taint = &spec["taint"];
        let text = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
        let key = text(taint, "key");
        if key.is_empty() {
            return Err("spec.taint.key: required".into());
        }
        let effect = text(taint, "effect");
        if !matches!(effect.as_str(), "NoSchedule" | "NoExecute" | "None") {
            return Err(format!(
                "spec.taint.effect: unsupported {effect:?} (NoSchedule, NoExecute or None)"
            ));
        }
        let selector = spec
            .get("deviceSelector")
            .filter(|s| !s.is_null())
            .map(|s| {
                let field = |f: &str| s[f].as_str().map(str::to_string);
                Selector {
                    driver: field("driver"),
                    pool: field("pool"),
                    device: field("device"),
                }
            });
        Ok(Self {
            selector,
            taint: Taint {
                key,
                value: text(taint, "value"),
                effect,
            },
        })
    }
}

/// `slice` with the taints of the rules that select its devices added
/// (after the slice's own, in the rules' order); `None` when no rule
/// applies.
pub fn apply<'a>(slice: &Slice, rules: impl IntoIterator<Item = &'a TaintRule>) -> Option<Slice> {
    let mut patched: Option<Slice> = None;
    for rule in rules {
        let Some(sel) = &rule.selector else {
            continue;
        };
        if sel.driver.as_ref().is_some_and(|d| *d != slice.driver)
            || sel.pool.as_ref().is_some_and(|p| *p != slice.pool)
        {
            continue;
        }
        for (i, d) in slice.devices.iter().enumerate() {
            if sel.device.as_ref().is_some_and(|n| *n != d.name) {
                continue;
            }
            patched.get_or_insert_with(|| slice.clone()).devices[i]
                .taints
                .push(rule.taint.clone());
        }
    }
    patched
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice() -> Slice {
        let api: k8s_openapi::api::resource::v1::ResourceSlice = serde_json::from_value(json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "nodeName": "n1", "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}
        }))
        .unwrap();
        Slice::from_api(&api).unwrap()
    }

    fn rule(selector: Value) -> TaintRule {
        TaintRule::parse(&json!({"spec": {"deviceSelector": selector,
            "taint": {"key": "maintenance", "value": "true", "effect": "NoSchedule"}}}))
        .unwrap()
    }

    /// The tracker's `applyPatches` cases: driver, pool and device narrow
    /// the rule; no selector taints nothing.
    #[test]
    fn rules_taint_the_devices_they_select() {
        let s = slice();
        let taints = |p: Option<Slice>| -> Vec<usize> {
            p.map_or(vec![0, 0], |p| {
                p.devices.iter().map(|d| d.taints.len()).collect()
            })
        };
        assert_eq!(taints(apply(&s, &[rule(json!({}))])), vec![1, 1]);
        assert_eq!(
            taints(apply(&s, &[rule(json!({"device": "gpu-1"}))])),
            vec![0, 1]
        );
        assert_eq!(
            taints(apply(&s, &[rule(json!({"driver": "other"}))])),
            vec![0, 0]
        );
        assert_eq!(
            taints(apply(&s, &[rule(json!({"pool": "n2"}))])),
            vec![0, 0]
        );
        assert_eq!(
            taints(apply(
                &s,
                &[rule(
                    json!({"driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"})
                )]
            )),
            vec![1, 0]
        );
        assert_eq!(taints(apply(&s, &[rule(Value::Null)])), vec![0, 0]);
        let two = [rule(json!({})), rule(json!({"device": "gpu-0"}))];
        assert_eq!(taints(apply(&s, &two)), vec![2, 1]);
    }

    #[test]
    fn bad_rules_name_the_field() {
        let e = TaintRule::parse(&json!({"spec": {"taint": {"key": "k", "effect": "Sometimes"}}}));
        assert!(e
            .unwrap_err()
            .starts_with("spec.taint.effect: unsupported \"Sometimes\""));
        let e = TaintRule::parse(&json!({"spec": {"taint": {"effect": "NoSchedule"}}}));
        assert_eq!(e.unwrap_err(), "spec.taint.key: required");
        let e = TaintRule::parse(
            &json!({"spec": {"deviceSelector": {"deviceClassName": "gpu"},
            "taint": {"key": "k", "effect": "NoSchedule"}}}),
        );
        assert!(e
            .unwrap_err()
            .starts_with("spec.deviceSelector.deviceClassName: not supported"));
    }
}
