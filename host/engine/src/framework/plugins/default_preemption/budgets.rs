//! PodDisruptionBudget accounting (upstream `filterPodsWithPDBViolation`):
//! which of a node's potential victims, taken in order, would push a
//! budget below zero allowed disruptions.

use std::sync::Arc;

use crate::model::budget::DisruptionBudget;
use crate::model::Pod;

/// Splits `pods` (in importance order) into those whose eviction would
/// violate a budget and the others, both keeping the order. Each matching
/// budget's allowance is used up by the pods before; a pod the budget
/// already lists as disrupted does not count again.
pub fn split_by_budget(
    pods: &[Arc<Pod>],
    budgets: &[DisruptionBudget],
) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let mut allowed: Vec<i64> = budgets
        .iter()
        .map(|b| i64::from(b.disruptions_allowed))
        .collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violated = false;
        for (b, left) in budgets.iter().zip(allowed.iter_mut()) {
            if !b.covers(pod) || b.disrupted.contains(&pod.name) {
                continue;
            }
            *left -= 1;
            if *left < 0 {
                violated = true;
            }
        }
        if violated {
            violating.push(pod.clone());
        } else {
            fine.push(pod.clone());
        }
    }
    (violating, fine)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::framework::plugins::testutil::P;

    use super::*;

    fn budget(allowed: i32, disrupted: serde_json::Value) -> DisruptionBudget {
        DisruptionBudget::from_k8s(
            &serde_json::from_value(json!({
                "metadata": {"name": "b", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "db"}}},
                "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted,
                           "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
            }))
            .unwrap(),
        )
        .unwrap()
    }

    fn names(p: &[Arc<Pod>]) -> Vec<&str> {
        p.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn allowances_are_used_up_in_order() {
        let db = |n: &str| Arc::new(P::new(n).labels(&[("app", "db")]).build());
        let pods = vec![db("a"), Arc::new(P::new("web").build()), db("b"), db("c")];
        let (bad, ok) = split_by_budget(&pods, &[budget(1, json!({}))]);
        assert_eq!(names(&bad), ["b", "c"]);
        assert_eq!(names(&ok), ["a", "web"]);
        // Already disrupted pods do not use the allowance.
        let (bad, _) = split_by_budget(&pods, &[budget(1, json!({"a": "2021-01-01T00:00:00Z"}))]);
        assert_eq!(names(&bad), ["c"]);
        let (bad, ok) = split_by_budget(&pods, &[budget(0, json!({}))]);
        assert_eq!((bad.len(), ok.len()), (3, 1));
        let (bad, _) = split_by_budget(&pods, &[]);
        assert!(bad.is_empty());
    }
}
