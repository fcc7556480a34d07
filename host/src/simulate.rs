//! `wasmsched simulate`: runs the real scheduling framework over Nodes and
//! Pods read from manifests, on a virtual clock, and reports placements.

pub mod pod_groups;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::config::Scheduler;
use crate::framework::{
    Assumption, Attempt, Cache, Explanation, Framework, Nomination, Snapshot, WaitEnd,
};
use crate::manifest::Manifests;
use crate::model::budget::Budgets;
use crate::model::priority::PriorityClasses;
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
    /// Pod groups (when a profile runs Coscheduling): status, domains,
    /// members.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pod_groups: Vec<pod_groups::GroupReport>,
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
    let mut sim = Simulation {
        scheduler,
        opts,
        cache: Cache::default(),
        report: Report::default(),
        now: 0,
        last_failure: HashMap::new(),
        failed_at: HashMap::new(),
        futile_waits: 0,
    };
    sim.check_explain(&manifests)?;
    let groups = &scheduler.pod_groups;
    if groups.enabled() {
        groups.reset();
        sim.cache.queue.set_sort(groups.clone());
    }
    sim.load(manifests)?;
    sim.schedule_all();
    Ok(sim.finish())
}

/// A simulation in progress, on a virtual clock (milliseconds).
struct Simulation<'a> {
    scheduler: &'a Scheduler,
    opts: &'a Options,
    cache: Cache,
    report: Report,
    now: u64,
    /// uid -> (last failure message, profile).
    last_failure: HashMap<String, (String, String)>,
    /// uid -> the snapshot generation of the pod's last failed attempt.
    failed_at: HashMap<String, u64>,
    /// Permit waits that ended in a rejection since the last binding.
    futile_waits: u32,
}

/// Rounds of Permit waits that end in rejections with no pod bound in
/// between after which the simulation stops: members that reserve, wait,
/// time out and release the same capacity again would repeat forever on
/// the virtual clock (the pods left keep their last failure).
const MAX_FUTILE_WAITS: u32 = 3;

impl<'a> Simulation<'a> {
    fn profile_for(&self, scheduler_name: &str) -> Option<&'a Framework> {
        if self.opts.all_pods {
            self.scheduler.profiles.first()
        } else {
            self.scheduler.profile(scheduler_name)
        }
    }

    fn check_explain(&self, manifests: &Manifests) -> Result<(), SimulateError> {
        let Some(key) = &self.opts.explain else {
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
        if self.profile_for(&pod.scheduler_name).is_none() {
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
    fn load(&mut self, manifests: Manifests) -> Result<(), SimulateError> {
        let groups = &self.scheduler.pod_groups;
        if groups.enabled() {
            for g in manifests.pod_groups {
                groups.apply_group(&g.key(), Ok(g));
            }
            for pod in &manifests.pods {
                groups.apply_pod(pod, false);
            }
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
            if matches!(pod.phase.as_str(), "Succeeded" | "Failed") {
                continue;
            }
            if let Some(node) = &pod.node_name {
                if self.cache.snapshot.index_of(node).is_none() {
                    tracing::warn!(pod = %pod.key(), %node, "pod is bound to a node not in the manifests; ignored");
                    continue;
                }
            } else if self.profile_for(&pod.scheduler_name).is_none() {
                self.report.ignored += 1;
                continue;
            }
            let all = self.opts.all_pods;
            let sched = self.scheduler;
            self.cache
                .pod_applied(pod, false, |n| all || sched.profile(n).is_some(), 0);
        }
        Ok(())
    }

    /// Attempts pods until none can make progress.
    fn schedule_all(&mut self) {
        loop {
            self.end_waits();
            if self.futile_waits >= MAX_FUTILE_WAITS {
                break;
            }
            let groups = &self.scheduler.pod_groups;
            if groups.enabled() {
                let activate = groups.take_activations(self.now);
                self.cache.queue.activate(&activate);
            }
            let Some(pod) = self.cache.pop(self.now) else {
                match self.next_event() {
                    Some(t) => {
                        self.now = self.now.max(t);
                        continue;
                    }
                    None => break,
                }
            };
            self.attempt(pod);
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
            .filter(|(uid, _)| self.failed_at.get(*uid) != Some(&generation))
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

    fn attempt(&mut self, pod: Arc<Pod>) {
        let fw = self
            .profile_for(&pod.scheduler_name)
            .expect("queued pods have a profile");
        // Every attempt is explained; the last one (where the pod went, or
        // its final failure) is what the report keeps.
        let explaining = self.opts.explain.as_deref() == Some(pod.key().as_str());
        let mut explanation = explaining.then(Explanation::default);
        let attempt = fw.schedule_pod(pod.clone(), &mut self.cache, self.now, explanation.as_mut());
        if let Some(mut explanation) = explanation {
            // The attempt that preempted stays explained after the one
            // that placed the pod.
            if explanation.preemption.is_none() {
                let earlier = self.report.explain.take();
                explanation.preemption = earlier.and_then(|e| e.explanation.preemption);
            }
            let (node, gpus) = match &attempt {
                Attempt::Bind(a) => (
                    Some(a.placement.node.clone()),
                    crate::gpu_sharing::pod_gpus(&a.pod),
                ),
                _ => (None, Vec::new()),
            };
            let gpu_devices = node
                .as_deref()
                .and_then(|n| self.cache.snapshot.by_name(n))
                .map(crate::gpu_sharing::node_devices)
                .unwrap_or_default();
            self.report.explain = Some(ExplainReport {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                profile: fw.scheduler_name().to_string(),
                node,
                explanation,
                gpus,
                gpu_devices,
            });
        }
        let profile = fw.scheduler_name().to_string();
        match attempt {
            Attempt::Bind(a) => self.bind(fw, a),
            Attempt::Waiting { .. } => {}
            Attempt::Unschedulable {
                pod,
                fit,
                nomination,
            } => {
                self.failed(&pod, fit.message(), profile);
                if let Some(n) = nomination {
                    self.preempt(&pod, n);
                }
            }
            Attempt::Error { pod, message } => {
                self.failed(&pod, format!("error: {message}"), profile)
            }
        }
    }

    fn failed(&mut self, pod: &Pod, message: String, profile: String) {
        self.failed_at
            .insert(pod.uid.clone(), self.cache.snapshot.generation());
        self.last_failure
            .insert(pod.uid.clone(), (message, profile));
    }

    /// Evicts the victims at once (the virtual clock does not model
    /// graceful termination); the preemptor, nominated to the node, is
    /// placed in a later attempt.
    fn preempt(&mut self, pod: &Pod, n: Nomination) {
        for v in &n.victims {
            for fw in &self.scheduler.profiles {
                if let Some(a) = fw.waiting.remove(&v.uid) {
                    fw.unreserve(&a.pod, &a.state, &a.placement.node);
                }
            }
            self.cache.pod_deleted(&v.uid, self.now);
            // Evicted: no longer where the report placed it.
            self.report
                .scheduled
                .retain(|s| !(s.namespace == v.namespace && s.pod == v.name));
        }
        self.report.preemptions.push(Preemption {
            preemptor: pod.key(),
            node: n.node,
            victims: n.victims.iter().map(|v| v.key()).collect(),
        });
    }

    /// The binding cycle, simulated: PreBind output is already on the
    /// assumed pod; volume bindings are written as the API server and PV
    /// controller would; the binding is confirmed as the watch would.
    fn bind(&mut self, fw: &Framework, a: Box<Assumption>) {
        crate::framework::volumes::simulated::apply(self.cache.snapshot.volumes(), &a.actions);
        let uid = a.pod.uid.clone();
        self.cache.finish_binding(&uid, self.now);
        self.cache
            .pod_applied((*a.pod).clone(), false, |_| true, self.now);
        self.cache.snapshot.compact_log();
        fw.bound(&a);
        self.futile_waits = 0;
        self.last_failure.remove(&uid);
        self.report.scheduled.push(ScheduledPod {
            namespace: a.pod.namespace.clone(),
            pod: a.pod.name.clone(),
            node: a.placement.node.clone(),
            score: a.placement.score,
            profile: fw.scheduler_name().to_string(),
            gpus: crate::gpu_sharing::pod_gpus(&a.pod),
        });
    }

    /// Pods whose Permit wait ended: bound, or unreserved.
    fn end_waits(&mut self) {
        let mut rejected = false;
        for fw in &self.scheduler.profiles {
            for (a, end) in fw.waiting.take_decided(self.now) {
                match end {
                    WaitEnd::Allowed => self.bind(fw, a),
                    WaitEnd::Rejected(reason) => {
                        fw.unassume(&a, &mut self.cache, self.now, true);
                        let profile = fw.scheduler_name().to_string();
                        self.failed(&a.pod, reason, profile);
                        rejected = true;
                    }
                }
            }
        }
        if rejected {
            self.futile_waits += 1;
        }
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
        for pod in left {
            let (message, profile) = self.last_failure.get(&pod.uid).cloned().unwrap_or_default();
            self.report.unschedulable.push(UnschedulablePod {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                message,
                profile,
            });
        }
        let mut gated: Vec<&Arc<Pod>> = self.cache.queue.gated_pods().collect();
        gated.sort_by_key(|p| p.key());
        self.report.gated = gated
            .into_iter()
            .map(|p| GatedPod {
                namespace: p.namespace.clone(),
                pod: p.name.clone(),
                gates: p.scheduling_gates.clone(),
            })
            .collect();
        self.report.plugin_health = plugin_health(self.scheduler);
        self.report.traffic = traffic(&self.cache.snapshot);
        self.report.gpu_devices = crate::gpu_sharing::devices(&self.cache.snapshot);
        if self.scheduler.pod_groups.enabled() {
            self.report.pod_groups =
                pod_groups::report(&self.scheduler.pod_groups, &self.cache.snapshot);
        }
        self.report
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
