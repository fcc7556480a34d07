//! NodeResourcesBalancedAllocation: prefers nodes whose resources would be
//! used in similar proportions (a node with cpu full and memory idle
//! strands its memory).

use std::sync::Arc;

use serde_json::Value;

use crate::framework::interface::MAX_NODE_SCORE;
use crate::framework::{CycleContext, CycleState, NodeInfo, Plugin, PluginError, ScorePlugin};
use crate::model::resources::{CPU, MEMORY};

use super::helpers::{allocatable_and_requested, args_object, int_in, json_type, reject_unknown};

pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// The BalancedAllocation plugin over a set of resources (cpu and memory by
/// default).
#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<String>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        Self {
            resources: vec![CPU.to_string(), MEMORY.to_string()],
        }
    }
}

impl BalancedAllocation {
    pub fn new(resources: Vec<String>) -> Self {
        if resources.is_empty() {
            Self::default()
        } else {
            Self { resources }
        }
    }

    pub fn resources(&self) -> &[String] {
        &self.resources
    }

    /// Upstream `NodeResourcesBalancedAllocationArgs`:
    /// `{"resources": [{"name": "cpu", "weight": 1}, ...]}`; weights must
    /// be 1 (upstream ignores them and validates so).
    pub fn from_args(args: Option<&Value>) -> Result<Self, String> {
        let Some(obj) = args_object(NAME, args)? else {
            return Ok(Self::default());
        };
        reject_unknown(&obj, &["resources"], "")?;
        let mut names = Vec::new();
        if let Some(r) = obj.get("resources") {
            let list = r
                .as_array()
                .ok_or_else(|| format!("resources: expected an array, got {}", json_type(r)))?;
            for (i, item) in list.iter().enumerate() {
                let path = format!("resources[{i}]");
                let o = item.as_object().ok_or_else(|| {
                    format!("{path}: expected an object, got {}", json_type(item))
                })?;
                reject_unknown(o, &["name", "weight"], &format!("{path}."))?;
                let name = match o.get("name").and_then(Value::as_str) {
                    Some(n) if !n.is_empty() => n.to_string(),
                    _ => return Err(format!("{path}.name: required, a resource name")),
                };
                if let Some(w) = o.get("weight") {
                    int_in(w, 1..=1, &format!("{path}.weight"))?;
                }
                if names.contains(&name) {
                    return Err(format!("{path}.name: duplicate resource {name:?}"));
                }
                names.push(name);
            }
        }
        Ok(Self::new(names))
    }
}

/// Upstream `balancedResourceScorer`: `(1 - std) * 100` over the
/// requested/allocatable fractions (each capped at 1) of the resources the
/// node has; for two resources `std = |f1 - f2| / 2`.
pub fn balanced_score(pairs: &[(i64, i64)]) -> i64 {
    // Walked again rather than collected: Score calls this twice per node.
    let fractions = || {
        pairs
            .iter()
            .filter(|(alloc, _)| *alloc != 0)
            .map(|(alloc, req)| (*req as f64 / *alloc as f64).min(1.0))
    };
    let std = match fractions().count() {
        0 | 1 => 0.0,
        2 => {
            let mut f = fractions();
            let (a, b) = (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        n => {
            let mean = fractions().sum::<f64>() / n as f64;
            let var = fractions().map(|f| (f - mean) * (f - mean)).sum::<f64>() / n as f64;
            var.sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Upstream (1.33+, kubernetes#129138) `balancedResourceScorer`: the
/// balance with the pod against without it, brought back to
/// `[MaxNodeScore/2, MaxNodeScore]`: `50 + (50 + with - without) / 2`, so
/// a pod that improves a node's balance scores towards 100, one that
/// worsens it towards 50.
pub fn improvement_score(with: i64, without: i64) -> i64 {
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with - without) / 2
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &str {
        NAME
    }
}

/// (allocatable, requested) per resource, on the stack for the usual few.
type Pairs = smallvec::SmallVec<[(i64, i64); 4]>;

impl ScorePlugin for BalancedAllocation {
    /// Uses the actual requests (not the non-zero defaults). A pod that
    /// requests none of the resources scores 0 everywhere, as upstream
    /// skips it: otherwise every best-effort pod would chase the same
    /// already-balanced node (kubernetes#129138).
    fn score(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        if self.resources.iter().all(|r| ctx.pod.requests.get(r) == 0) {
            return Ok(0);
        }
        let with: Pairs = self
            .resources
            .iter()
            .map(|r| allocatable_and_requested(ctx.pod, node, r, true))
            .collect();
        // The same resources without the pod (an extended resource the pod
        // does not request stays left out).
        let without: Pairs = self
            .resources
            .iter()
            .zip(&with)
            .map(|(r, &(alloc, _))| (alloc, node.requested.get(r)))
            .collect();
        Ok(improvement_score(
            balanced_score(&with),
            balanced_score(&without),
        ))
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    let p = BalancedAllocation::from_args(args).map_err(|e| format!("{NAME} args: {e}"))?;
    let p = Arc::new(p);
    Ok(crate::framework::PluginBundle::new(p.clone()).with_score(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::framework::plugins::testutil::*;

    #[test]
    fn two_resources_use_half_the_fraction_difference() {
        // cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5: std 0.125 -> 87
        assert_eq!(balanced_score(&[(4000, 3000), (10000, 5000)]), 87);
        // equal fractions: 100
        assert_eq!(balanced_score(&[(4000, 2000), (10000, 5000)]), 100);
        // over capacity is capped at 1: fractions 1 and 0.5 -> 75
        assert_eq!(balanced_score(&[(4000, 8000), (10000, 5000)]), 75);
        // a resource the node lacks is left out
        assert_eq!(balanced_score(&[(0, 5), (10000, 5000)]), 100);
    }

    #[test]
    fn three_resources_use_the_standard_deviation() {
        // fractions 0.2, 0.5, 0.8: mean 0.5, std sqrt(0.06) = 0.2449 -> 75
        assert_eq!(balanced_score(&[(10, 2), (10, 5), (10, 8)]), 75);
    }

    #[test]
    fn scores_nodes_by_balance_after_placement() {
        // Upstream balanced_allocation_test "nothing scheduled, resources
        // requested, differently sized nodes": pod 3000m / 5000.
        // a (4000m, 10000): 0.75 vs 0.5 -> 87 (from 100 empty) -> 68;
        // b (6000m, 10000): 0.5 vs 0.5 -> 100 (from 100) -> 75
        let snap = cluster(
            vec![
                N::new("a")
                    .alloc(&[("cpu", "4"), ("memory", "10000")])
                    .build(),
                N::new("b")
                    .alloc(&[("cpu", "6"), ("memory", "10000")])
                    .build(),
            ],
            vec![],
        );
        let pod = P::new("p")
            .req(&[("cpu", "1"), ("memory", "2000")])
            .req(&[("cpu", "2"), ("memory", "3000")])
            .build();
        let s = score_all(&BalancedAllocation::default(), &pod, &snap);
        assert_eq!((s["a"], s["b"]), (68, 75));
    }

    #[test]
    fn existing_pods_count_with_their_actual_requests() {
        // a holds 2 cpu / 0 memory; pod 1 cpu / 2Gi on 4 cpu / 8Gi nodes.
        // a: without cpu 0.5, memory 0 -> 75; with cpu 0.75, memory 0.25
        //    -> 75: unchanged balance -> 75
        // b: without 0, 0 -> 100; with 0.25, 0.25 -> 100 -> 75
        let alloc = &[("cpu", "4"), ("memory", "8Gi")];
        let snap = cluster(
            vec![
                N::new("a").alloc(alloc).build(),
                N::new("b").alloc(alloc).build(),
            ],
            vec![("a", P::new("used").req(&[("cpu", "2")]).build())],
        );
        let pod = P::new("p").req(&[("cpu", "1"), ("memory", "2Gi")]).build();
        let s = score_all(&BalancedAllocation::default(), &pod, &snap);
        assert_eq!((s["a"], s["b"]), (75, 75));
        // A pod that evens a lopsided node out scores towards 100: on a
        // node holding 2 cpu of 4, a 0 cpu / 4Gi pod moves 0.5, 0 (75) to
        // 0.5, 0.5 (100): 50 + (50 + 25) / 2 = 87.
        let pod = P::new("p").req(&[("cpu", "0"), ("memory", "4Gi")]).build();
        let s = score_all(&BalancedAllocation::default(), &pod, &snap);
        assert_eq!(s["a"], 87);
        // The upstream cases' arithmetic: "nodes to reach min/max score".
        assert_eq!(improvement_score(100, 50), 100);
        assert_eq!(improvement_score(50, 100), 50);
        assert_eq!(improvement_score(82, 85), 73);
    }

    #[test]
    fn best_effort_pods_are_not_scored() {
        let alloc = &[("cpu", "4"), ("memory", "8Gi")];
        let snap = cluster(
            vec![N::new("a").alloc(alloc).build()],
            vec![("a", P::new("used").req(&[("cpu", "2")]).build())],
        );
        let s = score_all(&BalancedAllocation::default(), &P::new("p").build(), &snap);
        assert_eq!(s["a"], 0);
    }

    #[test]
    fn args() {
        let b = BalancedAllocation::from_args(Some(
            &json!({"resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu"}]}),
        ))
        .unwrap();
        assert_eq!(b.resources(), ["cpu", "nvidia.com/gpu"]);
        assert_eq!(
            BalancedAllocation::from_args(None).unwrap().resources(),
            ["cpu", "memory"]
        );
        let e = BalancedAllocation::from_args(Some(
            &json!({"resources": [{"name": "cpu", "weight": 2}]}),
        ))
        .unwrap_err();
        assert!(e.starts_with("resources[0].weight"), "{e}");
        let e = BalancedAllocation::from_args(Some(&json!({"resourcez": []}))).unwrap_err();
        assert!(e.starts_with("resourcez: unknown field"), "{e}");
    }
}
