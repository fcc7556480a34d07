//! PodDisruptionBudgets as preemption reads them: which pods a budget
//! covers and how many more disruptions it allows now
//! (`status.disruptionsAllowed`, which the disruption controller keeps).
//! `policy/v1beta1` (what a 1.20 API server serves) and `policy/v1` have
//! the same fields, so both decode into one type.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::policy::v1 as k8s;

use super::selector::LabelSelector;
use super::validation;
use super::{ModelError, Pod};

/// One PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisruptionBudget {
    pub namespace: String,
    pub name: String,
    /// `None`: absent or empty, which matches no pod (as kube-scheduler
    /// reads budgets).
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods`: pods (by name) whose eviction the API
    /// server already processed; they do not count again.
    pub disrupted: BTreeSet<String>,
}

impl DisruptionBudget {
    pub fn from_k8s(pdb: &k8s::PodDisruptionBudget) -> Result<Self, ModelError> {
        let name = pdb.metadata.name.clone().unwrap_or_default();
        let namespace = pdb
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let err = |field: &str, cause: String| ModelError {
            object: format!(
                "PodDisruptionBudget {}/{}",
                crate::escape::name(&namespace),
                crate::escape::name(&name)
            ),
            field: field.to_string(),
            cause,
        };
        validation::meta(&pdb.metadata, validation::dns_subdomain).map_err(|(f, c)| err(&f, c))?;
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|c| err("spec.selector", c))?
            .filter(|s| !s.requirements.is_empty());
        let status = pdb.status.as_ref();
        Ok(Self {
            selector,
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            namespace: namespace.clone(),
            name: name.clone(),
        })
    }

    /// A budget from its JSON, `policy/v1` or `policy/v1beta1` (read as
    /// v1: the fields are the same). Errors name the field.
    pub fn from_json(mut v: serde_json::Value) -> Result<Self, String> {
        if let Some(o) = v.as_object_mut() {
            o.insert("apiVersion".into(), "policy/v1".into());
            o.insert("kind".into(), "PodDisruptionBudget".into());
        }
        let pdb: k8s::PodDisruptionBudget = serde_path_to_error::deserialize(v)
            .map_err(|e| format!("{}: {}", e.path(), e.inner()))?;
        Self::from_k8s(&pdb).map_err(|e| format!("{}: {}", e.field, e.cause))
    }

    /// Whether the budget covers `pod`.
    pub fn covers(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace
            && !pod.labels.is_empty()
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }
}

/// The budgets of the cluster, as the scheduling cycle sees them.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    /// The list is complete (the watch has synced; `simulate`: always).
    /// Preemption waits for this, so it never evicts past a budget it has
    /// not read yet.
    pub synced: bool,
    pub list: Arc<Vec<DisruptionBudget>>,
}

impl Budgets {
    /// A complete list.
    pub fn complete(list: Vec<DisruptionBudget>) -> Self {
        Self {
            synced: true,
            list: Arc::new(list),
        }
    }

    /// Adds or replaces a budget (by namespace and name).
    pub fn set(&mut self, b: DisruptionBudget) {
        let list = Arc::make_mut(&mut self.list);
        match list
            .iter_mut()
            .find(|x| x.namespace == b.namespace && x.name == b.name)
        {
            Some(x) => *x = b,
            None => list.push(b),
        }
    }

    pub fn remove(&mut self, namespace: &str, name: &str) {
        Arc::make_mut(&mut self.list).retain(|x| !(x.namespace == namespace && x.name == name));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn budget(v: serde_json::Value) -> DisruptionBudget {
        DisruptionBudget::from_k8s(&serde_json::from_value(v).unwrap()).unwrap()
    }

    fn pod(ns: &str, labels: serde_json::Value) -> Pod {
        Pod::from_k8s(
            &serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": ns, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]}
            }))
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn names_are_checked_as_the_api_server_checks_them() {
        let bad =
            DisruptionBudget::from_json(json!({"metadata": {"name": "db", "namespace": "A B"}}));
        assert!(bad.unwrap_err().starts_with("metadata.namespace: "));
        let bad = DisruptionBudget::from_json(json!({"metadata": {"namespace": "a"}}));
        assert_eq!(bad.unwrap_err(), "metadata.name: missing");
    }

    #[test]
    fn empty_selectors_cover_nothing() {
        let b = budget(json!({
            "metadata": {"name": "b", "namespace": "a"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 1, "disruptedPods": {"db-0": "2021-01-01T00:00:00Z"},
                       "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
        }));
        assert!(b.covers(&pod("a", json!({"app": "db"}))));
        assert!(
            !b.covers(&pod("b", json!({"app": "db"}))),
            "other namespace"
        );
        assert!(!b.covers(&pod("a", json!({"app": "web"}))));
        assert_eq!(b.disruptions_allowed, 1);
        assert!(b.disrupted.contains("db-0"));
        let empty =
            budget(json!({"metadata": {"name": "e", "namespace": "a"}, "spec": {"selector": {}}}));
        let beta = DisruptionBudget::from_json(json!({
            "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "a"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 1},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
        }))
        .unwrap();
        assert_eq!(
            beta,
            DisruptionBudget {
                disrupted: Default::default(),
                ..b.clone()
            }
        );
        let bad = DisruptionBudget::from_json(json!({
            "metadata": {"name": "b"}, "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}
        }));
        assert!(bad.unwrap_err().starts_with("spec.selector: "));
        assert!(!empty.covers(&pod("a", json!({"app": "db"}))));
        assert_eq!(empty.disruptions_allowed, 0);
    }
}
