//! Preemption advice (`preemptWholeDomains`): among the candidates the
//! host ranked, those whose victims leave the pod GPUs in as few NVLink
//! domains as its size allows come first, so evictions free a whole
//! domain rather than scattered GPUs. The host's order is kept otherwise.

use wasmsched_plugin_sdk::types::{Candidate, Delta, Placement as PodPlacement};
use wasmsched_plugin_sdk::{Cluster, NodeState};

use crate::{Demand, GpuTopology};

/// The candidate's node with its victims gone (a one-node cluster).
fn without_victims(ns: &NodeState, c: &Candidate) -> Cluster {
    let mut out = Cluster::default();
    out.apply(Delta::NodeSet((ns.index, ns.node.clone())));
    for pod in &ns.pods {
        if c.victims.iter().all(|v| v.pod.uid != pod.uid) {
            out.apply(Delta::PodAdd(PodPlacement {
                node: ns.index,
                pod: pod.clone(),
            }));
        }
    }
    out
}

impl GpuTopology {
    /// NVLink domains the pod's GPUs would span beyond the fewest
    /// possible once `c`'s victims are gone (`u32::MAX`: it would not fit).
    fn extra_domains_after(&self, d: &Demand, c: &Candidate, cluster: &Cluster) -> u32 {
        let Some(ns) = cluster.node(c.node) else {
            return u32::MAX;
        };
        let what_if = without_victims(ns, c);
        what_if
            .node(c.node)
            .and_then(|n| self.place(d, n).ok())
            .map_or(u32::MAX, |p| p.extra_domains)
    }

    /// The ranking for `candidates` (positions, best first); empty for a
    /// pod without whole GPUs or when the rule is off.
    pub fn preemption_ranking(
        &self,
        demand: Option<&Demand>,
        candidates: &[Candidate],
        cluster: &Cluster,
    ) -> Vec<u32> {
        let Some(d) = demand.filter(|d| d.whole > 0 && self.config().preempt_whole_domains) else {
            return Vec::new();
        };
        let mut order: Vec<(u32, u32)> = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| (self.extra_domains_after(d, c, cluster), i as u32))
            .collect();
        order.sort_by_key(|(extra, _)| *extra);
        order.into_iter().map(|(_, i)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use wasmsched_plugin_sdk::types::{Node, Pod, ResourceAmount, Victim};

    use super::*;
    use crate::{
        Config, ANN_ASSIGNED, ANN_TOPOLOGY, GPU_RESOURCE, LABEL_COUNT, LABEL_MEMORY, LABEL_MODEL,
    };

    fn gpus(n: i64) -> Vec<ResourceAmount> {
        vec![ResourceAmount {
            name: GPU_RESOURCE.into(),
            amount: n,
        }]
    }

    fn node(name: &str) -> Node {
        let mut labels = vec![
            (LABEL_COUNT.to_string(), "8".to_string()),
            (LABEL_MEMORY.to_string(), "40960".to_string()),
            (LABEL_MODEL.to_string(), "A100".to_string()),
        ];
        labels.sort();
        Node {
            name: name.into(),
            labels,
            annotations: vec![(ANN_TOPOLOGY.into(), "0,1,2,3;4,5,6,7".into())],
            allocatable: gpus(8),
            taints: vec![],
            unschedulable: false,
            metrics: vec![],
        }
    }

    fn pod(name: &str, n: i64, assigned: Option<&str>) -> Pod {
        Pod {
            uid: name.into(),
            namespace: "default".into(),
            name: name.into(),
            labels: vec![],
            annotations: assigned
                .map(|a| vec![(ANN_ASSIGNED.to_string(), a.to_string())])
                .unwrap_or_default(),
            requests: gpus(n),
            limits: gpus(n),
            tolerations: vec![],
            priority: 0,
            creation_timestamp_ms: 0,
            owner: None,
            node_name: None,
        }
    }

    /// Two full nodes: on `a` the victims hold GPUs in both domains, on
    /// `b` one whole domain.
    fn scene() -> (Cluster, Vec<Candidate>) {
        let mut cluster = Cluster::default();
        let placed = [
            (0, "a-01", "0,1"),
            (0, "a-23", "2,3"),
            (0, "a-45", "4,5"),
            (0, "a-67", "6,7"),
            (1, "b-01", "0,1"),
            (1, "b-23", "2,3"),
            (1, "b-47", "4,5,6,7"),
        ];
        for (i, name) in ["a", "b"].iter().enumerate() {
            cluster.apply(Delta::NodeSet((i as u32, node(name))));
        }
        for (n, name, a) in placed {
            let count = a.split(',').count() as i64;
            cluster.apply(Delta::PodAdd(PodPlacement {
                node: n,
                pod: pod(name, count, Some(a)),
            }));
        }
        let cand = |node: u32, victims: &[&str]| Candidate {
            node,
            victims: victims
                .iter()
                .map(|v| Victim {
                    pod: pod(v, 2, None),
                    deletion_cost: 0,
                    start_time_ms: 0,
                    violates_budget: false,
                })
                .collect(),
            budget_violations: 0,
        };
        (
            cluster,
            vec![cand(0, &["a-01", "a-45"]), cand(1, &["b-01", "b-23"])],
        )
    }

    #[test]
    fn whole_domains_first_when_asked() {
        let (cluster, candidates) = scene();
        let preemptor = pod("p", 4, None);
        let on = GpuTopology::new(Config::parse(r#"{"preemptWholeDomains": true}"#).unwrap());
        let d = on.demand(&preemptor).unwrap();
        assert_eq!(
            on.preemption_ranking(d.as_ref(), &candidates, &cluster),
            [1, 0]
        );
        let off = GpuTopology::new(Config::parse("{}").unwrap());
        assert!(off
            .preemption_ranking(d.as_ref(), &candidates, &cluster)
            .is_empty());
        // A pod without GPUs: no opinion.
        assert!(on
            .preemption_ranking(None, &candidates, &cluster)
            .is_empty());
        assert!(Config::parse(r#"{"preemptWholeDomains": 1}"#)
            .unwrap_err()
            .contains("preemptWholeDomains"));
    }
}
