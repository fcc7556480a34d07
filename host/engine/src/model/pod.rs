//! The scheduler's view of a Pod: validated once when it enters the
//! scheduler, so no plugin has to handle malformed input.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

use super::node::Taint;
use super::resources::{Resources, CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, MEMORY};
use super::selector::{LabelSelector, NodeSelectorTerm};
use super::validation::{self, Invalid};
use super::{pod_spec, ModelError, TaintEffect};
use crate::escape;

/// How a toleration compares values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOp {
    Equal,
    Exists,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// `None`: with `Exists`, tolerates every key.
    pub key: Option<String>,
    pub op: TolerationOp,
    pub value: String,
    /// `None` matches every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Upstream `Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.as_ref().is_some_and(|k| *k != taint.key) {
            return false;
        }
        match self.op {
            TolerationOp::Exists => true,
            TolerationOp::Equal => self.value == taint.value,
        }
    }
}

/// `true` when some toleration in `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// Required and preferred node affinity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAffinity {
    /// ORed terms; `None` when no required affinity is set.
    pub required: Option<Vec<NodeSelectorTerm>>,
    pub preferred: Vec<(i32, NodeSelectorTerm)>,
}

/// One pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq)]
pub struct PodAffinityTerm {
    /// `None`: the term's selector was absent, which matches no pod.
    pub selector: Option<LabelSelector>,
    /// Namespaces the term looks in; empty with `all_namespaces` false
    /// means the pod's own namespace (resolved at parse time).
    pub namespaces: Vec<String>,
    /// `namespaceSelector: {}`: every namespace.
    pub all_namespaces: bool,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether `other` (a placed pod) is matched by this term of a pod in
    /// `ns`.
    pub fn matches(&self, other: &Pod) -> bool {
        (self.all_namespaces || self.namespaces.contains(&other.namespace))
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&other.labels))
    }
}

/// Inter-pod affinity and anti-affinity, required and preferred.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodAffinity {
    pub required_affinity: Vec<PodAffinityTerm>,
    pub required_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_affinity: Vec<(i32, PodAffinityTerm)>,
    pub preferred_anti_affinity: Vec<(i32, PodAffinityTerm)>,
}

impl PodAffinity {
    pub fn is_empty(&self) -> bool {
        self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }
}

/// What to do when a spread constraint cannot be met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// A `topologySpreadConstraints[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub selector: Option<LabelSelector>,
}

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

/// The controller owning a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub kind: String,
    pub name: String,
}

impl Owner {
    /// The owner reference marked `controller`.
    fn controller_of(
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Option<Self> {
        let r = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))?;
        Some(Self {
            kind: r.kind.clone(),
            name: r.name.clone(),
        })
    }
}

/// A pod as the framework uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub node_name: Option<String>,
    pub scheduler_name: String,
    pub priority: i32,
    pub creation_ms: i64,
    pub owner: Option<Owner>,
    pub phase: String,
    /// Effective requests: max(sum of containers, largest init container)
    /// plus overhead, with requests defaulted from limits as the API
    /// server does.
    pub requests: Resources,
    pub limits: Resources,
    /// cpu (milli) and memory requests with kube-scheduler's non-zero
    /// defaults, used only for scoring.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    pub tolerations: Vec<Toleration>,
    pub node_selector: BTreeMap<String, String>,
    pub node_affinity: NodeAffinity,
    pub pod_affinity: PodAffinity,
    pub spread: Vec<SpreadConstraint>,
    pub host_ports: Vec<HostPort>,
    /// The volumes the volume plugins read (claims, in-tree disks).
    pub volumes: Vec<super::pod_volume::PodVolume>,
    /// Set when the pod uses something this scheduler cannot honour; the
    /// pod is then reported unschedulable with this message rather than
    /// placed wrongly.
    pub unsupported: Option<String>,
    /// Extended resources per container, init containers first, as
    /// plugins receive it in `wasmsched.io/container-resources`
    /// (`model::container_resources`); `None` when no container asks for
    /// an extended resource.
    pub container_resources: Option<String>,
    /// `spec.priorityClassName`, when set.
    pub priority_class: Option<String>,
    /// `spec.priority` was set (by the user or the Priority admission
    /// plugin); when not, `priority` is resolved from PriorityClasses.
    pub priority_given: bool,
    /// `spec.preemptionPolicy`; `None`: unset (the PriorityClass's, else
    /// `PreemptLowerPriority`).
    pub preemption_policy: Option<PreemptionPolicy>,
    /// `status.nominatedNodeName`: where an earlier preemption made room.
    pub nominated_node: Option<String>,
    /// `status.startTime` in milliseconds since the epoch (kubelet sets it).
    pub start_ms: Option<i64>,
    /// `metadata.deletionTimestamp` is set: the pod is terminating (a bound
    /// one still holds its node's resources until it is gone).
    pub terminating: bool,
}

/// `spec.preemptionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionPolicy {
    PreemptLowerPriority,
    Never,
}

impl PreemptionPolicy {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "PreemptLowerPriority" => Ok(Self::PreemptLowerPriority),
            "Never" => Ok(Self::Never),
            o => Err(format!(
                "unknown value {o:?} (expected PreemptLowerPriority or Never)"
            )),
        }
    }
}

impl Pod {
    /// `namespace/name`, the way events and logs name pods.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod may preempt others (`preemptionPolicy` is not
    /// `Never`).
    pub fn may_preempt(&self) -> bool {
        self.preemption_policy != Some(PreemptionPolicy::Never)
    }

    pub fn from_k8s(pod: &k8s::Pod) -> Result<Self, ModelError> {
        let meta = &pod.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let object = format!("Pod {}/{}", escape::name(&namespace), escape::name(&name));
        let err = |field: &str, cause: String| ModelError {
            object: object.clone(),
            field: field.to_string(),
            cause,
        };
        validation::pod(pod).map_err(|(field, cause)| err(&field, cause))?;
        let Some(spec) = pod.spec.as_ref() else {
            return Err(err("spec", "missing".into()));
        };
        if spec.containers.is_empty() {
            return Err(err(
                "spec.containers",
                "a pod needs at least one container".into(),
            ));
        }

        let container_resources =
            |c: &k8s::Container, path: &str| resources_of(c, path).map_err(|(f, c)| err(&f, c));

        let mut requests = Resources::default();
        let mut limits = Resources::default();
        let mut host_ports = Vec::new();
        let (mut non_zero_milli_cpu, mut non_zero_memory) = (0i64, 0i64);
        let (mut init_extended, mut app_extended) = (Vec::new(), Vec::new());
        for (i, c) in spec.containers.iter().enumerate() {
            let (req, lim) = container_resources(c, &format!("spec.containers[{i}]"))?;
            app_extended.push(super::container_resources::extended(false, &req));
            non_zero_milli_cpu += non_zero_request(&req, CPU, DEFAULT_MILLI_CPU_REQUEST);
            non_zero_memory += non_zero_request(&req, MEMORY, DEFAULT_MEMORY_REQUEST);
            requests.add(&req);
            limits.add(&lim);
            host_ports.extend(host_ports_of(c));
        }
        for (i, c) in spec.init_containers.iter().flatten().enumerate() {
            let (req, lim) = container_resources(c, &format!("spec.initContainers[{i}]"))?;
            init_extended.push(super::container_resources::extended(true, &req));
            requests.max_with(&req);
            limits.max_with(&lim);
            // Upstream's non-zero requests also take the largest init container.
            non_zero_milli_cpu =
                non_zero_milli_cpu.max(non_zero_request(&req, CPU, DEFAULT_MILLI_CPU_REQUEST));
            non_zero_memory =
                non_zero_memory.max(non_zero_request(&req, MEMORY, DEFAULT_MEMORY_REQUEST));
        }
        if let Some(overhead) = &spec.overhead {
            let o = Resources::from_k8s(overhead)
                .map_err(|(res, e)| err(&format!("spec.overhead.{res}"), e.to_string()))?;
            requests.add(&o);
            non_zero_milli_cpu += o.get(CPU);
            non_zero_memory += o.get(MEMORY);
            if !limits.is_empty() {
                limits.add(&o);
            }
        }

        let field = |(f, c): Invalid| err(&f, c);
        let tolerations = pod_spec::tolerations(spec).map_err(field)?;
        let affinity = spec.affinity.as_ref();
        let node_affinity =
            pod_spec::node_affinity(affinity.and_then(|a| a.node_affinity.as_ref()))
                .map_err(field)?;
        let pod_affinity = pod_spec::pod_affinity(affinity, &namespace).map_err(field)?;
        let spread = pod_spec::spread(spec).map_err(field)?;

        let volumes = super::pod_volume::pod_volumes(spec).map_err(|(f, c)| err(&f, c))?;
        let unsupported = super::pod_volume::unsupported(&volumes);

        let prio = PriorityFields::read(pod).map_err(|c| err("spec.preemptionPolicy", c))?;
        let status = pod.status.as_ref();

        let owner = Owner::controller_of(meta);
        // Without a uid (a manifest), the key stands in for it.
        let uid = meta.uid.clone().filter(|u| !u.is_empty());
        let uid = uid.unwrap_or_else(|| format!("{namespace}/{name}"));

        Ok(Self {
            uid,
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            scheduler_name: spec
                .scheduler_name
                .clone()
                .unwrap_or_else(|| "default-scheduler".into()),
            priority: spec.priority.unwrap_or(0),
            creation_ms: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond())
                .unwrap_or(0),
            owner,
            phase: status
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
            requests,
            limits,
            non_zero_milli_cpu,
            non_zero_memory,
            tolerations,
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            node_affinity,
            pod_affinity,
            spread,
            host_ports,
            volumes,
            unsupported,
            container_resources: super::container_resources::annotation(
                init_extended,
                app_extended,
            ),
            priority_class: prio.class,
            priority_given: prio.given,
            preemption_policy: prio.policy,
            nominated_node: prio.nominated,
            start_ms: prio.start_ms,
            terminating: prio.terminating,
            namespace,
            name,
        })
    }
}

/// What preemption reads of a pod, besides its priority.
struct PriorityFields {
    class: Option<String>,
    given: bool,
    policy: Option<PreemptionPolicy>,
    nominated: Option<String>,
    start_ms: Option<i64>,
    terminating: bool,
}

impl PriorityFields {
    fn read(pod: &k8s::Pod) -> Result<Self, String> {
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let policy = spec
            .and_then(|s| s.preemption_policy.as_deref())
            .filter(|p| !p.is_empty())
            .map(PreemptionPolicy::parse)
            .transpose()?;
        Ok(Self {
            class: spec
                .and_then(|s| s.priority_class_name.clone())
                .filter(|n| !n.is_empty()),
            given: spec.is_some_and(|s| s.priority.is_some()),
            policy,
            nominated: status
                .and_then(|s| s.nominated_node_name.clone())
                .filter(|n| !n.is_empty()),
            start_ms: status
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0.as_millisecond()),
            terminating: pod.metadata.deletion_timestamp.is_some(),
        })
    }
}

/// Upstream `GetNonzeroRequestForResource`: a container's request of
/// `name` for scoring, `default` when it requests none, but an explicit
/// zero kept ("override if un-set, but not if explicitly set to zero").
/// `requests` are after API-server defaulting from limits.
/// A container's requests and limits, with the API server's defaulting
/// (a limit without a request sets the request).
fn resources_of(c: &k8s::Container, path: &str) -> Result<(Resources, Resources), Invalid> {
    let r = c.resources.clone().unwrap_or_default();
    let limits = Resources::from_k8s(&r.limits.unwrap_or_default())
        .map_err(|(res, e)| (format!("{path}.resources.limits.{res}"), e.to_string()))?;
    let mut requests = Resources::from_k8s(&r.requests.unwrap_or_default())
        .map_err(|(res, e)| (format!("{path}.resources.requests.{res}"), e.to_string()))?;
    for (k, v) in limits.iter() {
        if !r_has(&c.resources, k) {
            requests.set(k, v);
        }
    }
    Ok((requests, limits))
}

/// The host ports a container asks for.
fn host_ports_of(c: &k8s::Container) -> impl Iterator<Item = HostPort> + '_ {
    c.ports.iter().flatten().filter_map(|p| {
        let port = p.host_port.filter(|p| *p > 0)?;
        Some(HostPort {
            ip: p
                .host_ip
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "0.0.0.0".into()),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port,
        })
    })
}

fn non_zero_request(requests: &Resources, name: &str, default: i64) -> i64 {
    if requests.iter().any(|(k, _)| k == name) {
        requests.get(name)
    } else {
        default
    }
}

fn r_has(res: &Option<k8s::ResourceRequirements>, name: &str) -> bool {
    res.as_ref()
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|m| m.contains_key(name))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(containers: serde_json::Value, init: serde_json::Value) -> Pod {
        let p: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": containers, "initContainers": init}
        }))
        .unwrap();
        Pod::from_k8s(&p).unwrap()
    }

    fn container(resources: serde_json::Value) -> serde_json::Value {
        json!({"name": "c", "image": "x", "resources": resources})
    }

    #[test]
    fn non_zero_requests_default_only_what_is_not_requested() {
        // Nothing requested: kube-scheduler's 100m / 200Mi.
        let p = pod(json!([container(json!({}))]), json!([]));
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (100, 200 << 20));
        // An explicit zero stays zero (upstream non_zero.go: "override if
        // un-set, but not if explicitly set to zero").
        let p = pod(
            json!([container(json!({"requests": {"cpu": "0", "memory": "0"}}))]),
            json!([]),
        );
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (0, 0));
        // Per resource and per container: cpu explicit zero, memory unset;
        // the second container sets memory only.
        let p = pod(
            json!([
                container(json!({"requests": {"cpu": "0"}})),
                container(json!({"requests": {"memory": "1Gi"}}))
            ]),
            json!([]),
        );
        assert_eq!(
            (p.non_zero_milli_cpu, p.non_zero_memory),
            (100, (200 << 20) + (1 << 30))
        );
        // A zero limit without a request defaults the request to zero.
        let p = pod(
            json!([container(json!({"limits": {"cpu": "0"}}))]),
            json!([]),
        );
        assert_eq!(p.non_zero_milli_cpu, 0);
        // Init containers: the largest one, with the same rule.
        let p = pod(
            json!([container(json!({"requests": {"cpu": "0", "memory": "0"}}))]),
            json!([container(json!({"requests": {"cpu": "0"}}))]),
        );
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (0, 200 << 20));
    }
}
