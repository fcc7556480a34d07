//! The scheduler's view of a Pod: validated once when it enters the
//! scheduler, so no plugin has to handle malformed input.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

pub use super::pod_requests::ResizeStatus;
use super::pod_requests::{Options, SpecContainer, SpecRequests};
use super::resources::{Resources, CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, MEMORY};
use super::validation::{self, Invalid};
use super::{pod_spec, ModelError};
use crate::escape;

pub use super::constraints::{
    tolerated, NodeAffinity, PodAffinity, PodAffinityTerm, SpreadConstraint, Toleration,
    TolerationOp, WhenUnsatisfiable,
};

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
    /// The reference's `apiVersion` (`apps/v1` for a ReplicaSet).
    pub api_version: String,
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
            api_version: r.api_version.clone(),
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
    /// server does, and the in-place resize state of `status` counted as
    /// kube-scheduler counts it ([`super::pod_requests`]): what the pod
    /// holds on its node.
    pub requests: Resources,
    /// The same from the spec alone: what NodeResourcesFit's Filter asks
    /// a node for (a pod being scheduled has no resize state).
    pub spec_requests: Resources,
    /// `status`'s resize state (allocated and actuated resources).
    pub resize: ResizeStatus,
    /// The declared node features the pod needs
    /// ([`super::declared_features`]), sorted.
    pub required_features: Vec<&'static str>,
    pub limits: Resources,
    /// cpu (milli) and memory requests with kube-scheduler's non-zero
    /// defaults, used only for scoring.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    /// The same, of the containers alone (pod-level requests ignored):
    /// what NodeResourcesFit scores the incoming pod with. kube-scheduler
    /// 1.37 builds that plugin's scorer without the PodLevelResources
    /// feature (`getScorer` in `noderesources/fit.go` never sets it), so
    /// its LeastAllocated and MostAllocated see the containers' requests
    /// with the non-zero defaults, while BalancedAllocation and the nodes'
    /// totals see the pod-level ones.
    pub containers_non_zero_milli_cpu: i64,
    pub containers_non_zero_memory: i64,
    pub tolerations: Vec<Toleration>,
    pub node_selector: BTreeMap<String, String>,
    pub node_affinity: NodeAffinity,
    pub pod_affinity: PodAffinity,
    pub spread: Vec<SpreadConstraint>,
    pub host_ports: Vec<HostPort>,
    /// The volumes the volume plugins read (claims, in-tree disks).
    pub volumes: Vec<super::pod_volume::PodVolume>,
    /// The images the pod runs, as ImageLocality reads them: init
    /// containers', containers' (`:latest` added to an untagged name) and
    /// image volumes' references, one entry each (repeats included).
    pub images: Vec<String>,
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
    /// `metadata.generation` (0 when unset): the `observedGeneration` of
    /// the conditions the scheduler writes.
    pub generation: i64,
    /// `spec.schedulingGates` by name: while any is left the pod is not
    /// scheduled.
    pub scheduling_gates: Vec<String>,
    /// `spec.resourceClaims` (Dynamic Resource Allocation), in order.
    pub resource_claims: Vec<PodClaim>,
    /// `status.resourceClaimStatuses`: the claim made from a template for
    /// each pod claim (`None`: deliberately none), by pod claim name.
    pub claim_statuses: BTreeMap<String, Option<String>>,
    /// Per container (init containers first), what DRA may serve as
    /// extended resources; empty when no container asks for any
    /// (`model::dra_extended`).
    pub extended_containers: Vec<super::dra_extended::Container>,
}

/// One of `spec.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    /// `resourceClaimName`.
    pub claim: Option<String>,
    /// `resourceClaimTemplateName`.
    pub template: Option<String>,
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

        let resize = ResizeStatus::read(pod.status.as_ref()).map_err(|(f, c)| err(&f, c))?;
        let res = pod_resources(spec, &resize).map_err(|(f, c)| err(&f, c))?;

        let field = |(f, c): Invalid| err(&f, c);
        let tolerations = pod_spec::tolerations(spec).map_err(field)?;
        let affinity = spec.affinity.as_ref();
        let node_affinity =
            pod_spec::node_affinity(affinity.and_then(|a| a.node_affinity.as_ref()))
                .map_err(field)?;
        let labels = meta.labels.clone().unwrap_or_default();
        let pod_affinity = pod_spec::pod_affinity(affinity, &namespace, &labels).map_err(field)?;
        let spread = pod_spec::spread(spec, &labels).map_err(field)?;

        let volumes = super::pod_volume::pod_volumes(spec).map_err(|(f, c)| err(&f, c))?;
        let images = images_of(spec);
        let unsupported = super::pod_volume::unsupported(&volumes);

        let prio = PriorityFields::read(pod).map_err(|c| err("spec.preemptionPolicy", c))?;
        let status = pod.status.as_ref();

        let owner = Owner::controller_of(meta);
        // Without a uid (a manifest), the key stands in for it.
        let uid = meta.uid.clone().filter(|u| !u.is_empty());
        let uid = uid.unwrap_or_else(|| format!("{namespace}/{name}"));

        Ok(Self {
            uid,
            labels,
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
            requests: res.requests,
            spec_requests: res.spec_requests,
            resize,
            required_features: super::declared_features::required(spec),
            limits: res.limits,
            non_zero_milli_cpu: res.non_zero_milli_cpu,
            non_zero_memory: res.non_zero_memory,
            containers_non_zero_milli_cpu: res.containers_non_zero.0,
            containers_non_zero_memory: res.containers_non_zero.1,
            tolerations,
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            node_affinity,
            pod_affinity,
            spread,
            host_ports: res.host_ports,
            volumes,
            images,
            unsupported,
            container_resources: super::container_resources::annotation(
                res.init_extended,
                res.app_extended,
            ),
            priority_class: prio.class,
            priority_given: prio.given,
            preemption_policy: prio.policy,
            nominated_node: prio.nominated,
            start_ms: prio.start_ms,
            terminating: prio.terminating,
            generation: pod.metadata.generation.unwrap_or(0),
            scheduling_gates: spec
                .scheduling_gates
                .iter()
                .flatten()
                .map(|g| g.name.clone())
                .collect(),
            resource_claims: spec
                .resource_claims
                .iter()
                .flatten()
                .map(|c| PodClaim {
                    name: c.name.clone(),
                    claim: c.resource_claim_name.clone(),
                    template: c.resource_claim_template_name.clone(),
                })
                .collect(),
            claim_statuses: status
                .and_then(|s| s.resource_claim_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| (c.name.clone(), c.resource_claim_name.clone()))
                .collect(),
            extended_containers: super::dra_extended::containers(res.extended_containers),
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

/// Upstream ImageLocality's `normalizedImageName`: a name with no tag
/// after its last `/` gets `:latest`.
pub fn normalized_image_name(name: &str) -> String {
    let tag = name.rfind(':').map_or(-1, |i| i as i64);
    let slash = name.rfind('/').map_or(-1, |i| i as i64);
    if tag <= slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

/// The pod's images in ImageLocality's order: init containers,
/// containers, then image volumes, each name normalized.
fn images_of(spec: &k8s::PodSpec) -> Vec<String> {
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    let mut out: Vec<String> = containers
        .map(|c| normalized_image_name(c.image.as_deref().unwrap_or("")))
        .collect();
    for v in spec.volumes.iter().flatten() {
        if let Some(image) = &v.image {
            out.push(normalized_image_name(
                image.reference.as_deref().unwrap_or(""),
            ));
        }
    }
    out
}

/// What a pod's containers ask for, aggregated as upstream does.
struct PodResources {
    requests: Resources,
    spec_requests: Resources,
    limits: Resources,
    non_zero_milli_cpu: i64,
    non_zero_memory: i64,
    containers_non_zero: (i64, i64),
    host_ports: Vec<HostPort>,
    init_extended: Vec<wasmsched_shared::hami::request::ContainerResources>,
    app_extended: Vec<wasmsched_shared::hami::request::ContainerResources>,
    extended_containers: Vec<super::dra_extended::Container>,
}

/// kube-scheduler's non-zero defaults for a container that requests no
/// cpu or memory (upstream `schedutil.DefaultMilliCPURequest` and
/// `DefaultMemoryRequest`).
const NON_ZERO_DEFAULTS: [(&str, i64); 2] = [
    (CPU, DEFAULT_MILLI_CPU_REQUEST),
    (MEMORY, DEFAULT_MEMORY_REQUEST),
];

/// The pod's requests (upstream's `PodRequests`, [`super::pod_requests`]:
/// app containers and native sidecars, init containers, pod-level
/// resources, overhead, the resize state of `status`), limits, scoring's
/// non-zero cpu and memory, host ports and per-container extended
/// resources.
fn pod_resources(spec: &k8s::PodSpec, status: &ResizeStatus) -> Result<PodResources, Invalid> {
    let mut host_ports = Vec::new();
    let (mut init_extended, mut app_extended) = (Vec::new(), Vec::new());
    let mut apps = Vec::with_capacity(spec.containers.len());
    let mut app_limits = Vec::with_capacity(spec.containers.len());
    for (i, c) in spec.containers.iter().enumerate() {
        let (req, lim) = resources_of(c, &format!("spec.containers[{i}]"))?;
        app_extended.push(super::container_resources::extended(false, &req));
        host_ports.extend(host_ports_of(c));
        apps.push(SpecContainer {
            name: c.name.clone(),
            requests: req,
            sidecar: false,
        });
        app_limits.push(lim);
    }
    let mut inits = Vec::new();
    let mut init_limits = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let (req, lim) = resources_of(c, &format!("spec.initContainers[{i}]"))?;
        init_extended.push(super::container_resources::extended(true, &req));
        // A native sidecar (`restartPolicy: Always`) runs beside the
        // app containers.
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        if sidecar {
            host_ports.extend(host_ports_of(c));
        }
        inits.push(SpecContainer {
            name: c.name.clone(),
            requests: req,
            sidecar,
        });
        init_limits.push((lim, sidecar));
    }
    let (pod_requests, pod_limits) = pod_level(spec)?;
    let overhead = spec
        .overhead
        .as_ref()
        .map(|o| {
            Resources::from_k8s(o)
                .map_err(|(res, e)| (format!("spec.overhead.{res}"), e.to_string()))
        })
        .transpose()?;
    let parts = SpecRequests {
        apps: &apps,
        inits: &inits,
        pod_level: &pod_requests,
        overhead: overhead.as_ref(),
    };
    // NodeResourcesFit's PreFilter: the spec alone.
    let spec_requests = super::pod_requests::pod_requests(&parts, &Options::default());
    // The cache's and BalancedAllocation's view (upstream
    // `PodInfo.CalculateResource`): with the resize state.
    let with_status = Options {
        status: Some(status),
        ..Options::default()
    };
    let requests = super::pod_requests::pod_requests(&parts, &with_status);
    // Scoring's non-zero requests (upstream's `CalculateResource` and
    // `getNonMissingContainerRequests`): 100m cpu and 200Mi memory for
    // each container that requests none, or, with pod-level requests,
    // only for what the pod does not request at all.
    let defaults: Vec<(&'static str, i64)> = if pod_requests.iter().next().is_none() {
        NON_ZERO_DEFAULTS.to_vec()
    } else {
        NON_ZERO_DEFAULTS
            .into_iter()
            .filter(|(k, _)| !requests.has(k))
            .collect()
    };
    let non_zero = if defaults.is_empty() {
        requests.clone()
    } else {
        super::pod_requests::pod_requests(
            &parts,
            &Options {
                non_missing: &defaults,
                ..with_status
            },
        )
    };
    // NodeResourcesFit's scorer: the spec's containers alone, defaulted
    // (kube-scheduler 1.37 builds it with no feature on).
    let containers = super::pod_requests::pod_requests(
        &parts,
        &Options {
            non_missing: &NON_ZERO_DEFAULTS,
            skip_pod_level: true,
            ..Options::default()
        },
    );
    let mut limits = aggregate(app_limits.into_iter(), init_limits.into_iter());
    limits.apply_pod_level(&pod_limits);
    if let Some(o) = &overhead {
        if !limits.is_empty() {
            limits.add(o);
        }
    }
    Ok(PodResources {
        requests,
        spec_requests,
        limits,
        non_zero_milli_cpu: non_zero.get(CPU),
        non_zero_memory: non_zero.get(MEMORY),
        containers_non_zero: (containers.get(CPU), containers.get(MEMORY)),
        host_ports,
        init_extended,
        app_extended,
        // Init containers first, then the app containers, as upstream
        // numbers them.
        extended_containers: inits
            .iter()
            .map(|c| super::dra_extended::Container::new(&c.name, !c.sidecar, &c.requests))
            .chain(
                apps.iter()
                    .map(|c| super::dra_extended::Container::new(&c.name, false, &c.requests)),
            )
            .collect(),
    })
}

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

/// Upstream's `aggregateContainerResourcesByFn` (the sidecar KEP's
/// formula): the app containers and the native sidecars summed; each
/// init container while it runs uses itself plus the sidecars started
/// before it; the pod needs the larger of the two.
fn aggregate(
    apps: impl Iterator<Item = Resources>,
    inits: impl Iterator<Item = (Resources, bool)>,
) -> Resources {
    let mut result = Resources::default();
    apps.for_each(|r| result.add(&r));
    let mut sidecars = Resources::default();
    let mut init = Resources::default();
    for (r, sidecar) in inits {
        let running = if sidecar {
            result.add(&r);
            sidecars.add(&r);
            sidecars.clone()
        } else {
            let mut with = r;
            with.add(&sidecars);
            with
        };
        init.max_with(&running);
    }
    result.max_with(&init);
    result
}

/// `spec.resources` (pod-level resources, on by default since 1.34):
/// the requests and limits of the resources it may set (cpu, memory,
/// hugepages-*), requests defaulted from limits as the API server does.
fn pod_level(spec: &k8s::PodSpec) -> Result<(Resources, Resources), Invalid> {
    let Some(r) = &spec.resources else {
        return Ok(Default::default());
    };
    let supported = |k: &str| k == CPU || k == MEMORY || k.starts_with("hugepages-");
    let read = |list: &Option<
        BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
                path: &str| {
        let list: BTreeMap<_, _> = list
            .iter()
            .flatten()
            .filter(|(k, _)| supported(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Resources::from_k8s(&list).map_err(|(res, e)| (format!("{path}.{res}"), e.to_string()))
    };
    let limits = read(&r.limits, "spec.resources.limits")?;
    let mut requests = read(&r.requests, "spec.resources.requests")?;
    for (k, v) in limits.iter() {
        if !requests.has(k) {
            requests.set(k, v);
        }
    }
    Ok((requests, limits))
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

    fn cpu(c: &str) -> serde_json::Value {
        container(json!({"requests": {"cpu": c}}))
    }

    fn sidecar(c: &str) -> serde_json::Value {
        json!({"name": "s", "image": "x", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": c}}})
    }

    fn with_pod_level(spec: serde_json::Value) -> Pod {
        let p: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"}, "spec": spec
        }))
        .unwrap();
        Pod::from_k8s(&p).unwrap()
    }

    // component-helpers resource/helpers_test.go, TestPodResourceRequests.
    #[test]
    fn sidecars_count_as_upstream_counts_them() {
        // "restartable init container": restartable init + regular container.
        let p = pod(json!([cpu("1")]), json!([sidecar("2")]));
        assert_eq!(p.requests.get(CPU), 3000);
        // "multiple restartable init containers":
        // max(5, restartable init containers(3+2+1) + regular(1)) = 7.
        let p = pod(
            json!([cpu("1")]),
            json!([cpu("5"), sidecar("1"), sidecar("2"), sidecar("3")]),
        );
        assert_eq!(p.requests.get(CPU), 7000);
        // "multiple restartable and regular init containers": init-2
        // requires 5 + the sidecars before it (1+2) = 8; the sidecar that
        // starts after it does not count.
        let p = pod(
            json!([cpu("1")]),
            json!([cpu("5"), sidecar("1"), sidecar("2"), cpu("5"), sidecar("3")]),
        );
        assert_eq!(p.requests.get(CPU), 8000);
        // The pods: a 1500m app with a 600m sidecar needs 2100m;
        // followed by an 1800m init container, 2400m.
        let p = pod(json!([cpu("1500m")]), json!([sidecar("600m")]));
        assert_eq!(p.requests.get(CPU), 2100);
        let p = pod(
            json!([cpu("1500m")]),
            json!([sidecar("600m"), cpu("1800m")]),
        );
        assert_eq!(p.requests.get(CPU), 2400);
        // Scoring's non-zero requests count the sidecar too (and 200Mi
        // memory for each of the two containers that request none).
        let p = pod(json!([cpu("1500m")]), json!([sidecar("600m")]));
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (2100, 400 << 20));
    }

    #[test]
    fn pod_level_resources_replace_the_containers_sum() {
        // "pod-level resources, container-level resources, init and
        // sidecar container set": the pod level wins.
        let p = with_pod_level(json!({
            "resources": {"requests": {"memory": "15Mi", "cpu": "18m"}},
            "containers": [container(json!({"requests": {"memory": "3Mi", "cpu": "2m"}}))],
            "initContainers": [
                {"name": "s", "image": "x", "restartPolicy": "Always",
                 "resources": {"requests": {"memory": "5Mi", "cpu": "4m"}}},
                container(json!({"requests": {"memory": "6Mi", "cpu": "8m"}}))
            ]
        }));
        assert_eq!(
            (p.requests.get(CPU), p.requests.get(MEMORY)),
            (18, 15 << 20)
        );
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (18, 15 << 20));
        // "pod level memory and container level cpu resources": each
        // resource from the level that sets it; requests default from
        // pod-level limits; unsupported pod-level resources are ignored.
        let p = with_pod_level(json!({
            "resources": {"limits": {"memory": "1Gi", "example.com/x": "1"}},
            "containers": [cpu("500m")],
        }));
        assert_eq!(
            (p.requests.get(CPU), p.requests.get(MEMORY)),
            (500, 1 << 30)
        );
        assert_eq!(p.requests.get("example.com/x"), 0);
        // Non-zero defaults with pod-level requests: only for what neither
        // level requests (upstream's getNonMissingContainerRequests).
        let p = with_pod_level(json!({
            "resources": {"requests": {"memory": "1Gi"}},
            "containers": [container(json!({})), container(json!({}))],
        }));
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (200, 1 << 30));
        // NodeResourcesFit's score sees the containers alone, each
        // defaulted (200m, 400Mi), as kube-scheduler 1.37 does.
        assert_eq!(
            (
                p.containers_non_zero_milli_cpu,
                p.containers_non_zero_memory
            ),
            (200, 400 << 20)
        );
        // Overhead comes on top of the pod level, and of the containers.
        let p = with_pod_level(json!({
            "resources": {"requests": {"cpu": "1"}},
            "overhead": {"cpu": "250m"},
            "containers": [cpu("100m")],
        }));
        assert_eq!(p.requests.get(CPU), 1250);
        assert_eq!(p.containers_non_zero_milli_cpu, 350);
        // A bad pod-level quantity names its field.
        let p: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"resources": {"requests": {"cpu": "-1"}}, "containers": [cpu("1")]}
        }))
        .unwrap();
        let e = Pod::from_k8s(&p).unwrap_err().to_string();
        assert!(e.contains("spec.resources.requests.cpu"), "{e}");
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
