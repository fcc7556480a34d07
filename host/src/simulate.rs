//! `wasmsched simulate`: runs the real scheduling framework over Nodes and
//! Pods read from manifests, on a virtual clock, and reports placements.

use std::sync::Arc;

use serde::Serialize;

use crate::config::Scheduler;
use crate::framework::queue::SchedulingQueue;
use crate::framework::{Explanation, Framework, Outcome, Snapshot};
use crate::manifest::Manifests;
use crate::model::Pod;

/// What to simulate.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Schedule every pending pod with the first profile, whatever its
    /// `schedulerName`.
    pub all_pods: bool,
    /// `namespace/name` of a pod to explain.
    pub explain: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ScheduledPod {
    pub namespace: String,
    pub pod: String,
    pub node: String,
    /// Weighted total; null when only one node was feasible (scoring is
    /// skipped then, as upstream).
    pub score: Option<i64>,
    pub profile: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UnschedulablePod {
    pub namespace: String,
    pub pod: String,
    pub message: String,
    pub profile: String,
}

/// Plugin health after the run (failures by kind, skips).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginHealth {
    pub profile: String,
    pub plugin: String,
    pub failures: std::collections::BTreeMap<&'static str, u64>,
    pub skips: u64,
    /// Instances started, the first included (each failure replaces one).
    pub instances: u64,
    /// The most recent failure, with its cause.
    pub last_failure: Option<String>,
}

/// The result of a simulation.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Report {
    pub scheduled: Vec<ScheduledPod>,
    pub unschedulable: Vec<UnschedulablePod>,
    /// Pending pods no profile serves (left alone).
    pub ignored: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<ExplainReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plugin_health: Vec<PluginHealth>,
    /// Estimated traffic between declared network peers (the
    /// `network.wasmsched.io/peers` annotation) after the run; absent when
    /// no pod declares peers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
}

/// Weighted peer pairs of the final placement, by distance.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct Traffic {
    pub same_node: u64,
    pub same_zone: u64,
    pub cross_zone: u64,
    pub cross_region: u64,
    pub unknown: u64,
}

impl Traffic {
    pub fn total(&self) -> u64 {
        self.same_node + self.same_zone + self.cross_zone + self.cross_region + self.unknown
    }

    /// The share of traffic that leaves its zone (cross zone, cross
    /// region, or unknown), in percent.
    pub fn cross_zone_percent(&self) -> f64 {
        match self.total() {
            0 => 0.0,
            t => 100.0 * (self.cross_zone + self.cross_region + self.unknown) as f64 / t as f64,
        }
    }
}

/// The traffic report over every placed pod of the snapshot.
fn traffic(snapshot: &Snapshot) -> Option<Traffic> {
    use network_locality::locality::{traffic_report, PlacedPod, TopologyNode, PEERS_ANNOTATION};
    let declares = snapshot.nodes().any(|n| {
        n.pods
            .iter()
            .any(|p| p.annotations.contains_key(PEERS_ANNOTATION))
    });
    if !declares {
        return None;
    }
    let nodes: Vec<TopologyNode> = snapshot
        .nodes()
        .map(|n| TopologyNode {
            name: &n.node.name,
            labels: &n.node.labels,
        })
        .collect();
    let pods: Vec<PlacedPod> = snapshot
        .nodes()
        .flat_map(|n| {
            n.pods.iter().map(move |p| PlacedPod {
                namespace: &p.namespace,
                labels: &p.labels,
                annotations: &p.annotations,
                node: &n.node.name,
            })
        })
        .collect();
    let r = traffic_report(&nodes, &pods);
    Some(Traffic {
        same_node: r.same_node,
        same_zone: r.same_zone,
        cross_zone: r.cross_zone,
        cross_region: r.cross_region,
        unknown: r.unknown,
    })
}

/// `--explain` output for one pod.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainReport {
    pub namespace: String,
    pub pod: String,
    pub profile: String,
    /// Where the pod went (null if unschedulable).
    pub node: Option<String>,
    #[serde(flatten)]
    pub explanation: Explanation,
}

/// Errors about the request itself (not about pods).
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("--explain {0}: no such pod in the manifests")]
    NoSuchPod(String),
    #[error("--explain {0}: the pod is not pending (it is bound to {1})")]
    NotPending(String, String),
    #[error("--explain {0}: no profile serves schedulerName {1:?} (use --all-pods)")]
    NotServed(String, String),
}

/// Runs the simulation.
pub fn run(
    scheduler: &Scheduler,
    manifests: Manifests,
    opts: &Options,
) -> Result<Report, SimulateError> {
    let mut snapshot = Snapshot::default();
    for n in manifests.nodes {
        snapshot.set_node(n);
    }
    let mut queue = SchedulingQueue::new();
    let mut report = Report::default();
    let profile_for = |pod: &Pod| -> Option<&Framework> {
        if opts.all_pods {
            scheduler.profiles.first()
        } else {
            scheduler.profile(&pod.scheduler_name)
        }
    };
    if let Some(key) = &opts.explain {
        let pod = manifests
            .pods
            .iter()
            .find(|p| p.key() == *key)
            .ok_or_else(|| SimulateError::NoSuchPod(key.clone()))?;
        if let Some(n) = &pod.node_name {
            return Err(SimulateError::NotPending(key.clone(), n.clone()));
        }
        if profile_for(pod).is_none() {
            return Err(SimulateError::NotServed(
                key.clone(),
                pod.scheduler_name.clone(),
            ));
        }
    }
    for pod in manifests.pods {
        if matches!(pod.phase.as_str(), "Succeeded" | "Failed") {
            continue;
        }
        match &pod.node_name {
            Some(node) => match snapshot.index_of(node) {
                Some(i) => {
                    snapshot.add_pod(i, Arc::new(pod));
                }
                None => {
                    tracing::warn!(pod = %pod.key(), %node, "pod is bound to a node not in the manifests; ignored")
                }
            },
            None if profile_for(&pod).is_some() => queue.add(Arc::new(pod)),
            None => report.ignored += 1,
        }
    }

    // Virtual clock: when only backing-off pods remain, jump to the end of
    // the earliest backoff.
    let mut now = 0u64;
    let mut last_failure: std::collections::HashMap<String, (String, String)> = Default::default();
    loop {
        let Some(pod) = queue.pop(now) else {
            match queue.next_backoff_ready() {
                Some(t) => {
                    now = now.max(t);
                    continue;
                }
                None => break,
            }
        };
        let fw = profile_for(&pod).expect("queued pods have a profile");
        let profile = fw.scheduler_name().to_string();
        // Every attempt is explained; the last one (where the pod went, or its
        // final failure) is what the report keeps.
        let explaining = opts.explain.as_deref() == Some(pod.key().as_str());
        let explanation = explaining.then(|| fw.explain(&pod, &snapshot));
        let outcome = fw.schedule(&pod, &snapshot);
        if let Some(explanation) = explanation {
            report.explain = Some(ExplainReport {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                profile: profile.clone(),
                node: match &outcome {
                    Outcome::Scheduled(p) => Some(p.node.clone()),
                    _ => None,
                },
                explanation,
            });
        }
        match outcome {
            Outcome::Scheduled(placement) => {
                let mut bound = (*pod).clone();
                bound.node_name = Some(placement.node.clone());
                snapshot.add_pod(placement.node_index, Arc::new(bound));
                snapshot.compact_log();
                queue.done(&pod.uid);
                last_failure.remove(&pod.uid);
                report.scheduled.push(ScheduledPod {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    node: placement.node,
                    score: placement.score,
                    profile,
                });
                queue.on_cluster_event(now);
            }
            Outcome::Unschedulable(fit) => {
                last_failure.insert(pod.uid.clone(), (fit.message(), profile));
                queue.add_unschedulable(pod);
            }
            Outcome::Error(msg) => {
                last_failure.insert(pod.uid.clone(), (format!("error: {msg}"), profile));
                queue.add_unschedulable(pod);
            }
        }
    }
    let mut left: Vec<&Arc<Pod>> = queue.unschedulable_pods().collect();
    left.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.creation_ms.cmp(&b.creation_ms))
            .then(a.key().cmp(&b.key()))
    });
    for pod in left {
        let (message, profile) = last_failure.get(&pod.uid).cloned().unwrap_or_default();
        report.unschedulable.push(UnschedulablePod {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
            message,
            profile,
        });
    }
    for fw in &scheduler.profiles {
        for w in fw.profile().wasm_plugins() {
            let failures = w.stats.failures();
            let skips = w.stats.skips.load(std::sync::atomic::Ordering::Relaxed);
            if !failures.is_empty() || skips > 0 {
                report.plugin_health.push(PluginHealth {
                    profile: fw.scheduler_name().to_string(),
                    plugin: w.name.clone(),
                    failures,
                    skips,
                    instances: w
                        .stats
                        .instances_created
                        .load(std::sync::atomic::Ordering::Relaxed),
                    last_failure: w.stats.last_failure.lock().clone(),
                });
            }
        }
    }
    report.traffic = traffic(&snapshot);
    Ok(report)
}
