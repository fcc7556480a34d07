//! PriorityClasses and what the Priority admission plugin does with them:
//! a pod naming `priorityClassName` gets the class's `value` as its
//! priority (and its `preemptionPolicy` when the pod sets none); a pod
//! naming none gets the `globalDefault` class's, else 0.
//!
//! `run` sees pods after admission (their `spec.priority` is set) and
//! resolves only pods that arrive without one; `simulate` resolves
//! hand-written pods from the PriorityClass objects in its input.

use std::collections::HashMap;

use k8s_openapi::api::scheduling::v1 as k8s;

use super::pod::{Pod, PreemptionPolicy};
use super::validation;
use super::ModelError;

/// The classes every API server has (`system-cluster-critical`,
/// `system-node-critical`), known even when the input does not list them.
pub const SYSTEM_CLASSES: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// The pod-deletion-cost annotation (also read by preemption's tie-break).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// One PriorityClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClass {
    pub name: String,
    pub value: i32,
    pub global_default: bool,
    /// `None`: unset (`PreemptLowerPriority`).
    pub preemption_policy: Option<PreemptionPolicy>,
}

impl PriorityClass {
    pub fn from_k8s(pc: &k8s::PriorityClass) -> Result<Self, ModelError> {
        let name = pc.metadata.name.clone().unwrap_or_default();
        let err = |field: &str, cause: String| ModelError {
            object: format!("PriorityClass {}", crate::escape::name(&name)),
            field: field.to_string(),
            cause,
        };
        validation::meta(&pc.metadata, validation::dns_subdomain).map_err(|(f, c)| err(&f, c))?;
        let preemption_policy = pc
            .preemption_policy
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(PreemptionPolicy::parse)
            .transpose()
            .map_err(|c| err("preemptionPolicy", c))?;
        Ok(Self {
            value: pc.value.unwrap_or(0),
            global_default: pc.global_default.unwrap_or(false),
            preemption_policy,
            name,
        })
    }
}

/// The PriorityClasses known, by name.
#[derive(Debug, Clone, Default)]
pub struct PriorityClasses {
    by_name: HashMap<String, PriorityClass>,
}

impl PriorityClasses {
    pub fn new(classes: impl IntoIterator<Item = PriorityClass>) -> Self {
        let mut out = Self::default();
        for c in classes {
            out.set(c);
        }
        out
    }

    pub fn set(&mut self, class: PriorityClass) {
        self.by_name.insert(class.name.clone(), class);
    }

    pub fn remove(&mut self, name: &str) {
        self.by_name.remove(name);
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Upstream's `getDefaultPriorityClass`: of several global defaults,
    /// the one with the lowest value.
    fn global_default(&self) -> Option<&PriorityClass> {
        self.by_name
            .values()
            .filter(|c| c.global_default)
            .min_by_key(|c| (c.value, c.name.clone()))
    }

    /// Sets the priority (and preemption policy) of a pod whose
    /// `spec.priority` is unset, as admission would. Errors name the class
    /// that does not exist.
    pub fn resolve(&self, pod: &mut Pod) -> Result<(), String> {
        if pod.priority_given {
            return Ok(());
        }
        let (value, policy) = match &pod.priority_class {
            Some(name) => match self.by_name.get(name) {
                Some(c) => (c.value, c.preemption_policy),
                None => match SYSTEM_CLASSES.iter().find(|(n, _)| n == name) {
                    Some((_, v)) => (*v, None),
                    None => {
                        return Err(format!(
                            "spec.priorityClassName: no PriorityClass {name:?} was found"
                        ))
                    }
                },
            },
            None => match self.global_default() {
                Some(c) => (c.value, c.preemption_policy),
                None => (0, None),
            },
        };
        pod.priority = value;
        pod.priority_given = true;
        if pod.preemption_policy.is_none() {
            pod.preemption_policy = policy;
        }
        Ok(())
    }
}

/// A pod's `controller.kubernetes.io/pod-deletion-cost` (0 when unset or
/// not an int32, as the ReplicaSet controller reads it).
pub fn deletion_cost(pod: &Pod) -> i32 {
    pod.annotations
        .get(DELETION_COST)
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(v: serde_json::Value) -> PriorityClass {
        PriorityClass::from_k8s(&serde_json::from_value(v).unwrap()).unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut s = json!({"containers": [{"name": "c", "image": "x"}]});
        s.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        Pod::from_k8s(
            &serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": s})).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn classes_resolve_as_admission_does() {
        let classes = PriorityClasses::new([
            class(
                json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}),
            ),
            class(json!({"metadata": {"name": "low"}, "value": 10, "globalDefault": true})),
            class(json!({"metadata": {"name": "lower"}, "value": 5, "globalDefault": true})),
        ]);
        let mut p = pod(json!({"priorityClassName": "high"}));
        classes.resolve(&mut p).unwrap();
        assert_eq!(p.priority, 1000);
        assert!(!p.may_preempt(), "the class's preemptionPolicy applies");
        // The pod's own policy wins.
        let mut p =
            pod(json!({"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"}));
        classes.resolve(&mut p).unwrap();
        assert!(p.may_preempt());
        // No class named: the lowest global default.
        let mut p = pod(json!({}));
        classes.resolve(&mut p).unwrap();
        assert_eq!(p.priority, 5);
        // An explicit priority is kept.
        let mut p = pod(json!({"priority": 7, "priorityClassName": "high"}));
        classes.resolve(&mut p).unwrap();
        assert_eq!(p.priority, 7);
        // System classes need no object.
        let mut p = pod(json!({"priorityClassName": "system-node-critical"}));
        classes.resolve(&mut p).unwrap();
        assert_eq!(p.priority, 2_000_001_000);
        let mut p = pod(json!({"priorityClassName": "nope"}));
        assert_eq!(
            classes.resolve(&mut p).unwrap_err(),
            "spec.priorityClassName: no PriorityClass \"nope\" was found"
        );
        let bad = PriorityClass::from_k8s(
            &serde_json::from_value(
                json!({"metadata": {"name": "x"}, "value": 1, "preemptionPolicy": "Sometimes"}),
            )
            .unwrap(),
        );
        assert!(bad.unwrap_err().to_string().contains("preemptionPolicy"));
    }

    #[test]
    fn names_are_checked_as_the_api_server_checks_them() {
        let bad = PriorityClass::from_k8s(
            &serde_json::from_value(json!({"metadata": {"name": "Hi\u{202e}gh"}, "value": 1}))
                .unwrap(),
        )
        .unwrap_err();
        assert_eq!(bad.field, "metadata.name");
        assert!(bad.object.contains("\\u{202e}"), "{}", bad.object);
        let p = Pod::from_k8s(
            &serde_json::from_value(json!({
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c"}], "priorityClassName": "a\nb"}
            }))
            .unwrap(),
        );
        assert_eq!(p.unwrap_err().field, "spec.priorityClassName");
    }

    #[test]
    fn deletion_cost_reads_int32_only() {
        let mut p = pod(json!({}));
        assert_eq!(deletion_cost(&p), 0);
        p.annotations.insert(DELETION_COST.into(), "-5".into());
        assert_eq!(deletion_cost(&p), -5);
        p.annotations
            .insert(DELETION_COST.into(), "99999999999".into());
        assert_eq!(deletion_cost(&p), 0);
    }
}
