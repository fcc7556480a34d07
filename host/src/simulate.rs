//! `wasmsched simulate`: runs the real scheduling framework over Nodes and
//! Pods read from manifests, on a virtual clock, and reports placements.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::config::Scheduler;
use crate::framework::objects::ObjectEvent;
use crate::framework::plugins::dynamic_resources::store::{
    RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE,
};
use crate::framework::plugins::dynamic_resources::templates::claims_from_templates;
use crate::framework::{Cache, Explanation, Nomination, Snapshot};
use crate::manifest::Manifests;
use crate::model::budget::Budgets;
use crate::model::priority::PriorityClasses;
use crate::model::Pod;
use crate::scheduler::{Binding, Failure, FailureKind, Sink};

/// What to simulate.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Schedule every pending pod with the first profile, whatever its
    /// `schedulerName`.
    pub all_pods: bool,
    /// `namespace/name` of a pod to explain.
    pub explain: Option<String>,
    /// Node metrics (`--metrics FILE`), as `run`'s node-metrics source
    /// would hand them to plugins.
    pub metrics: Option<crate::node_metrics::snapshot::Snapshot>,
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
    /// The GPUs the pod got on a HAMi node (`hami.io/vgpu-devices-allocated`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<crate::gpu_sharing::GpuShare>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UnschedulablePod {
    pub namespace: String,
    pub pod: String,
    pub message: String,
    pub profile: String,
}

/// A pod held by its `spec.schedulingGates` (Kueue's admission gate,
/// for example): never attempted while a gate is left.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GatedPod {
    pub namespace: String,
    pub pod: String,
    /// The gates left, in spec order.
    pub gates: Vec<String>,
}

/// A preemption that happened in the run: the victims were evicted and
/// the preemptor nominated to the node (where it goes once they are gone,
/// unless something else changes).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Preemption {
    /// `namespace/name`.
    pub preemptor: String,
    pub node: String,
    /// `namespace/name` of each victim.
    pub victims: Vec<String>,
}

/// Plugin health after the run (failures by kind, skips).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginHealth {
    pub profile: String,
    pub plugin: String,
    pub failures: BTreeMap<&'static str, u64>,
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
    /// Pods held by scheduling gates (not attempted, not unschedulable).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gated: Vec<GatedPod>,
    /// Preemptions, in the order they happened.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preemptions: Vec<Preemption>,
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
    /// Every GPU of the HAMi nodes after the run, with what is left on it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_devices: Vec<crate::gpu_sharing::DeviceReport>,
    /// What plugins add (Coscheduling: each pod group's status, domains
    /// and members), each under its own key.
    #[serde(flatten)]
    pub plugins: BTreeMap<&'static str, serde_json::Value>,
    /// The same as tables, for the text output.
    #[serde(skip)]
    pub plugin_tables: Vec<crate::framework::objects::PluginReport>,
}

impl Report {
    /// A plugin's section, decoded.
    pub fn plugin<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.plugins
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
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
    use wasmsched_shared::locality::{traffic_report, PlacedPod, TopologyNode, PEERS_ANNOTATION};
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
    /// The GPUs it got on a HAMi node, and that node's GPUs with the pod
    /// placed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<crate::gpu_sharing::GpuShare>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_devices: Vec<crate::gpu_sharing::DeviceReport>,
    /// The live metrics each node had (`--metrics`): value, age, source.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_metrics: Vec<NodeMetricsReport>,
}

/// One node's metrics as the plugins got them.
#[derive(Debug, Clone, Serialize)]
pub struct NodeMetricsReport {
    pub node: String,
    /// Where the values came from (`file PATH`).
    pub source: String,
    pub metrics: Vec<NodeMetricValue>,
}

/// One node metric (`METRIC`, the node's mean, or `METRIC/DEVICE`).
#[derive(Debug, Clone, Serialize)]
pub struct NodeMetricValue {
    pub name: String,
    pub value: f64,
    /// Seconds before the newest sample of the source.
    pub age_seconds: f64,
}

/// The metrics of the explained nodes, in the explanation's order.
fn node_metrics_report(
    m: &crate::node_metrics::snapshot::Snapshot,
    e: &Explanation,
) -> Vec<NodeMetricsReport> {
    e.nodes
        .iter()
        .filter_map(|n| {
            let values = m.store.node(&n.node)?;
            Some(NodeMetricsReport {
                node: n.node.clone(),
                source: m.source.clone(),
                metrics: values
                    .iter()
                    .map(|(name, v)| NodeMetricValue {
                        name: name.clone(),
                        value: v.value,
                        age_seconds: (m.now - v.seen).max(0.0),
                    })
                    .collect(),
            })
        })
        .collect()
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
    /// A pod's priority cannot be resolved (its PriorityClass is missing).
    #[error("Pod {0}: {1}")]
    Priority(String, String),
}

/// Runs the simulation.
pub fn run(
    scheduler: &Scheduler,
    manifests: Manifests,
    opts: &Options,
) -> Result<Report, SimulateError> {
    scheduler.set_all_pods(opts.all_pods);
    let mut sim = Simulation {
        scheduler,
        cache: scheduler.new_cache(),
        now: 0,
        out: Outcomes {
            explain: opts.explain.clone(),
            ..Outcomes::default()
        },
        metrics: opts.metrics.as_ref(),
    };
    sim.check_explain(&manifests)?;
    scheduler.reset_informers();
    sim.load(manifests)?;
    sim.schedule_all();
    Ok(sim.finish())
}

/// A simulation in progress, on a virtual clock (milliseconds).
struct Simulation<'a> {
    scheduler: &'a Scheduler,
    cache: Cache,
    now: u64,
    /// What the scheduler decided (the simulation's sink).
    out: Outcomes,
    metrics: Option<&'a crate::node_metrics::snapshot::Snapshot>,
}

/// The simulation's [`Sink`]: the report in the making, and what a turn
/// left for the simulation to carry out (bindings, evictions).
#[derive(Default)]
struct Outcomes {
    /// `namespace/name` of the pod to explain.
    explain: Option<String>,
    report: Report,
    /// uid -> (last failure message, profile).
    last_failure: HashMap<String, (String, String)>,
    /// uids that failed in this turn (their snapshot generation is noted
    /// after it).
    failed_now: Vec<String>,
    /// uid -> the snapshot generation of the pod's last failed attempt.
    failed_at: HashMap<String, u64>,
    /// Permit waits that ended in a rejection in this turn.
    rejected: bool,
    /// Permit waits that ended in rejections since the last binding.
    futile_waits: u32,
    /// Bindings to carry out after the turn.
    binds: Vec<Binding>,
    /// Preemptions to carry out after the turn.
    preemptions: Vec<(Arc<Pod>, Nomination)>,
    /// The explained attempt of this turn: pod, profile, node, what the
    /// cycle saw.
    explained: Option<(Arc<Pod>, String, Option<String>, Explanation)>,
}

impl Sink for Outcomes {
    fn bind(&mut self, binding: Binding) {
        self.binds.push(binding);
    }

    fn failed(&mut self, f: Failure) {
        if matches!(f.kind, FailureKind::Rejected(_)) {
            self.rejected = true;
        }
        let message = f.message();
        verbose_failure(&f, &message);
        self.failed_now.push(f.pod.uid.clone());
        self.last_failure
            .insert(f.pod.uid.clone(), (message, f.profile));
    }

    fn waiting(&mut self, pod: &Arc<Pod>, _node: &str, message: &str, _profile: &str) {
        crate::logging::waiting(&pod.key(), message);
    }

    fn preempt(&mut self, pod: &Arc<Pod>, nomination: &Nomination, _profile: &str) -> bool {
        self.preemptions.push((pod.clone(), nomination.clone()));
        false
    }

    fn explains(&self, pod: &Pod) -> bool {
        self.explain.as_deref() == Some(pod.key().as_str())
    }

    fn explained(
        &mut self,
        pod: &Arc<Pod>,
        profile: &str,
        node: Option<&str>,
        explanation: Explanation,
    ) {
        self.explained = Some((
            pod.clone(),
            profile.to_string(),
            node.map(str::to_string),
            explanation,
        ));
    }
}

/// `-v=2`'s line for a failed attempt, and `-v=4`'s for each plugin that
/// rejected the pod, as `run` logs them (kube-scheduler's lines).
fn verbose_failure(f: &Failure, message: &str) {
    crate::logging::unschedulable(&f.pod.key(), &f.profile, message);
    crate::logging::rejected(f);
}

/// Rounds of Permit waits that end in rejections with no pod bound in
/// between after which the simulation stops: members that reserve, wait,
/// time out and release the same capacity again would repeat forever on
/// the virtual clock (the pods left keep their last failure).
const MAX_FUTILE_WAITS: u32 = 3;

impl<'a> Simulation<'a> {
    fn check_explain(&self, manifests: &Manifests) -> Result<(), SimulateError> {
        let Some(key) = &self.out.explain else {
            return Ok(());
        };
        let pod = manifests
            .pods
            .iter()
            .find(|p| p.key() == *key)
            .ok_or_else(|| SimulateError::NoSuchPod(key.clone()))?;
        if let Some(n) = &pod.node_name {
            return Err(SimulateError::NotPending(key.clone(), n.clone()));
        }
        if self.scheduler.route(pod).is_none() {
            return Err(SimulateError::NotServed(
                key.clone(),
                pod.scheduler_name.clone(),
            ));
        }
        Ok(())
    }

    /// Nodes, bound pods and the pending pods a profile serves, into the
    /// cache as the watches would deliver them; priorities resolved from
    /// the PriorityClasses as admission would; the PodDisruptionBudgets.
    fn load(&mut self, mut manifests: Manifests) -> Result<(), SimulateError> {
        // kube-controller-manager's resourceclaim controller, emulated:
        // pods that name a ResourceClaimTemplate get their claims.
        let templates: Vec<(&str, &serde_json::Value)> = manifests
            .objects
            .iter()
            .filter(|o| o.kind == RESOURCE_CLAIM_TEMPLATE)
            .map(|o| (o.version, &o.value))
            .collect();
        let made = claims_from_templates(&mut manifests.pods, &templates);
        for claim in &made {
            let event = ObjectEvent::Applied {
                version: "v1",
                object: claim,
            };
            self.scheduler
                .object_event(&mut self.cache, &RESOURCE_CLAIM, event, 0);
        }
        for o in &manifests.objects {
            let event = ObjectEvent::Applied {
                version: o.version,
                object: &o.value,
            };
            self.scheduler
                .object_event(&mut self.cache, &o.kind, event, 0);
        }
        if let Some(m) = self.metrics {
            self.cache.replace_node_metrics(m.store.node_metrics());
        }
        for n in manifests.nodes {
            self.cache.node_applied(n, 0);
        }
        for v in manifests.volumes.objects {
            self.cache.volume_applied(v, 0);
        }
        self.cache.snapshot.budgets = Budgets::complete(manifests.budgets);
        // A pod's namespace exists on a server; one not in the manifests
        // has only the label the server gives every namespace.
        let mut namespaces = manifests.namespaces;
        for pod in &manifests.pods {
            if !namespaces.contains(&pod.namespace) {
                let name = BTreeMap::from([(
                    crate::manifest::NAMESPACE_NAME_LABEL.to_string(),
                    pod.namespace.clone(),
                )]);
                namespaces.set(&pod.namespace, name);
            }
        }
        self.cache.snapshot.namespaces = Arc::new(namespaces);
        self.cache.snapshot.workloads = Arc::new(manifests.workloads);
        let classes = PriorityClasses::new(manifests.priority_classes);
        for mut pod in manifests.pods {
            classes
                .resolve(&mut pod)
                .map_err(|e| SimulateError::Priority(pod.key(), e))?;
            let terminal = matches!(pod.phase.as_str(), "Succeeded" | "Failed");
            if let Some(node) = pod.node_name.as_deref().filter(|_| !terminal) {
                if self.cache.snapshot.index_of(node).is_none() {
                    tracing::warn!(pod = %pod.key(), %node, "pod is bound to a node not in the manifests; ignored");
                }
            } else if !terminal && !self.scheduler.serves(&pod.scheduler_name) {
                self.report().ignored += 1;
            }
            self.scheduler.pod_applied(&mut self.cache, pod, false, 0);
        }
        Ok(())
    }

    fn report(&mut self) -> &mut Report {
        &mut self.out.report
    }

    /// Attempts pods until none can make progress.
    fn schedule_all(&mut self) {
        loop {
            let attempted = self
                .scheduler
                .schedule_one(&mut self.cache, self.now, &mut self.out);
            self.carry_out();
            if self.out.futile_waits >= MAX_FUTILE_WAITS {
                break;
            }
            if attempted {
                continue;
            }
            match self.next_event() {
                Some(t) => self.now = self.now.max(t),
                None => break,
            }
        }
    }

    /// What the turn left: the explanation, bindings, evictions.
    fn carry_out(&mut self) {
        let generation = self.cache.snapshot.generation();
        for uid in std::mem::take(&mut self.out.failed_now) {
            self.out.failed_at.insert(uid, generation);
        }
        if let Some((pod, profile, node, explanation)) = self.out.explained.take() {
            self.explain(&pod, profile, node, explanation);
        }
        for b in std::mem::take(&mut self.out.binds) {
            self.bind(b);
        }
        if std::mem::take(&mut self.out.rejected) {
            self.out.futile_waits += 1;
        }
        for (pod, n) in std::mem::take(&mut self.out.preemptions) {
            self.preempt(&pod, n);
        }
    }

    /// When something can change next: a backoff ends for a pod that may
    /// now fare differently (the cluster changed since its failure), or a
    /// Permit wait ends. `None`: nothing can.
    fn next_event(&self) -> Option<u64> {
        let generation = self.cache.snapshot.generation();
        let backoff = self
            .cache
            .queue
            .backoff_pods()
            .filter(|(uid, _)| self.out.failed_at.get(*uid) != Some(&generation))
            .map(|(_, t)| t)
            .min();
        let waits = self
            .scheduler
            .profiles
            .iter()
            .filter_map(|fw| fw.waiting.next_deadline())
            .min();
        backoff.into_iter().chain(waits).min()
    }

    /// Keeps the explained attempt (the last one: where the pod went, or
    /// its final failure).
    fn explain(
        &mut self,
        pod: &Pod,
        profile: String,
        node: Option<String>,
        mut explanation: Explanation,
    ) {
        // The attempt that preempted stays explained after the one that
        // placed the pod.
        if explanation.preemption.is_none() {
            let earlier = self.report().explain.take();
            explanation.preemption = earlier.and_then(|e| e.explanation.preemption);
        }
        let assumed = node
            .as_ref()
            .and_then(|_| self.out.binds.iter().find(|b| b.pod().uid == pod.uid));
        let gpus = assumed
            .map(|b| crate::gpu_sharing::pod_gpus(b.pod()))
            .unwrap_or_default();
        let gpu_devices = node
            .as_deref()
            .and_then(|n| self.cache.snapshot.by_name(n))
            .map(crate::gpu_sharing::node_devices)
            .unwrap_or_default();
        let node_metrics = self
            .metrics
            .map(|m| node_metrics_report(m, &explanation))
            .unwrap_or_default();
        self.report().explain = Some(ExplainReport {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
            profile,
            node,
            explanation,
            gpus,
            gpu_devices,
            node_metrics,
        });
    }

    /// Evicts the victims at once (the virtual clock does not model
    /// graceful termination); the preemptor, nominated to the node, is
    /// placed in a later attempt.
    fn preempt(&mut self, pod: &Pod, n: Nomination) {
        for v in &n.victims {
            self.scheduler
                .pod_deleted(&mut self.cache, &v.uid, self.now);
            // Evicted: no longer where the report placed it.
            self.report()
                .scheduled
                .retain(|s| !(s.namespace == v.namespace && s.pod == v.name));
        }
        self.report().preemptions.push(Preemption {
            preemptor: pod.key(),
            node: n.node,
            victims: n.victims.iter().map(|v| v.key()).collect(),
        });
    }

    /// The binding cycle, simulated: PreBind output is already on the
    /// assumed pod; volume bindings are written as the API server and PV
    /// controller would; the binding is confirmed as the watch would.
    fn bind(&mut self, b: Binding) {
        self.scheduler.bind_at_once(&mut self.cache, &b, self.now);
        let a = &b.assumption;
        self.out.futile_waits = 0;
        self.out.last_failure.remove(&a.pod.uid);
        let scheduled = ScheduledPod {
            namespace: a.pod.namespace.clone(),
            pod: a.pod.name.clone(),
            node: a.placement.node.clone(),
            score: a.placement.score,
            profile: b.profile.clone(),
            gpus: crate::gpu_sharing::pod_gpus(&a.pod),
        };
        crate::logging::bound(&a.pod.key(), &scheduled.node, &scheduled.profile);
        self.report().scheduled.push(scheduled);
    }

    /// The report: pods left unscheduled with their last failure, plugin
    /// health, traffic.
    fn finish(mut self) -> Report {
        let mut left: Vec<&Arc<Pod>> = self.cache.queue.pods().collect();
        left.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then(a.creation_ms.cmp(&b.creation_ms))
                .then(a.key().cmp(&b.key()))
        });
        let mut report = std::mem::take(&mut self.out.report);
        for pod in left {
            let (message, profile) = self
                .out
                .last_failure
                .get(&pod.uid)
                .cloned()
                .unwrap_or_default();
            report.unschedulable.push(UnschedulablePod {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                message,
                profile,
            });
        }
        let mut gated: Vec<&Arc<Pod>> = self.cache.queue.gated_pods().collect();
        gated.sort_by_key(|p| p.key());
        report.gated = gated
            .into_iter()
            .map(|p| GatedPod {
                namespace: p.namespace.clone(),
                pod: p.name.clone(),
                gates: p.scheduling_gates.clone(),
            })
            .collect();
        report.plugin_health = plugin_health(self.scheduler);
        report.traffic = traffic(&self.cache.snapshot);
        report.gpu_devices = crate::gpu_sharing::devices(&self.cache.snapshot);
        for r in self.scheduler.plugin_reports(&self.cache) {
            report.plugins.insert(r.key, r.json.clone());
            report.plugin_tables.push(r);
        }
        report
    }
}

/// Plugins that failed or were skipped during the run.
fn plugin_health(scheduler: &Scheduler) -> Vec<PluginHealth> {
    let mut out = Vec::new();
    for fw in &scheduler.profiles {
        for p in &fw.profile().members {
            let Some(h) = p.health() else { continue };
            if h.failures.is_empty() && h.skips == 0 {
                continue;
            }
            out.push(PluginHealth {
                profile: fw.scheduler_name().to_string(),
                plugin: p.name().to_string(),
                failures: h.failures,
                skips: h.skips,
                instances: h.instances,
                last_failure: h.last_failure,
            });
        }
    }
    out
}
