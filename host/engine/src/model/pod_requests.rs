//! What a pod requests, as kube-scheduler 1.37 counts it: upstream's
//! `PodRequests` (`k8s.io/component-helpers/resource/helpers.go`) with
//! its options, including the in-place resize state of a running pod
//! (`UseStatusResources`, gate InPlacePodVerticalScaling, GA, and
//! `InPlacePodLevelResourcesVerticalScalingEnabled`, beta and on).
//!
//! With the resize state, a pod counts the largest of three aggregates:
//! what its spec asks, what the kubelet allocated
//! (`status.containerStatuses[].allocatedResources`) and what it actuated
//! (`...resources.requests`), each aggregated over containers, init
//! containers and sidecars as the spec is; the pod-level status maps
//! (`status.allocatedResources` and `status.resources.requests`) stand for
//! the containers' when both are set. A resize the kubelet marked
//! infeasible (condition `PodResizePending`, reason `Infeasible`) leaves
//! the spec out. Pod-level requests (`spec.resources`) likewise take the
//! largest of spec and pod-level status.
//!
//! Upstream reads the resize state for pods in the cache (a node's
//! requested totals) and in BalancedAllocation's score; NodeResourcesFit's
//! Filter and its Score of the incoming pod read the spec alone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::resources::Resources;
use super::validation::{self, Invalid};

/// One container of the spec: its requests after the API server's
/// defaulting from limits.
#[derive(Debug, Clone)]
pub(crate) struct SpecContainer {
    pub name: String,
    pub requests: Resources,
    /// A native sidecar (`restartPolicy: Always` init container).
    pub sidecar: bool,
}

/// The spec side of [`pod_requests`].
pub(crate) struct SpecRequests<'a> {
    pub apps: &'a [SpecContainer],
    pub inits: &'a [SpecContainer],
    /// `spec.resources.requests` of the resources it may set (cpu,
    /// memory, hugepages-*), defaulted from its limits; empty when unset.
    pub pod_level: &'a Resources,
    pub overhead: Option<&'a Resources>,
}

/// One container's resize state.
#[derive(Debug, Clone, Default, PartialEq)]
struct ContainerStatus {
    /// `allocatedResources`.
    allocated: Option<Resources>,
    /// `resources.requests`: what the kubelet actuated.
    actuated: Option<Resources>,
}

/// A pod's resize state (`status`), as upstream reads it. A map that is
/// empty counts as absent: the API server never sends an empty one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResizeStatus {
    /// Condition `PodResizePending` with reason `Infeasible`.
    infeasible: bool,
    /// By container name: `containerStatuses`, then
    /// `initContainerStatuses` (the first of a name counts).
    containers: Vec<(String, ContainerStatus)>,
    /// `status.allocatedResources`.
    pod_allocated: Option<Resources>,
    /// `status.resources` is set.
    pod_resources: bool,
    /// `status.resources.requests`.
    pod_actuated: Option<Resources>,
}

/// A resource list of the status, `None` when absent or empty; a bad
/// quantity names its field.
fn list(l: Option<&BTreeMap<String, Quantity>>, path: &str) -> Result<Option<Resources>, Invalid> {
    let Some(l) = l.filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    validation::resources(Some(l), path)?;
    Resources::from_k8s(l)
        .map(Some)
        .map_err(|(res, e)| (format!("{path}.{res}"), e.to_string()))
}

impl ResizeStatus {
    /// Reads `status`; an error names the field (`status.containerStatuses[0].allocatedResources.cpu`).
    pub fn read(status: Option<&k8s::PodStatus>) -> Result<Self, Invalid> {
        let Some(s) = status else {
            return Ok(Self::default());
        };
        let infeasible = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodResizePending")
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
        let mut containers = Vec::new();
        for (key, statuses) in [
            ("containerStatuses", &s.container_statuses),
            ("initContainerStatuses", &s.init_container_statuses),
        ] {
            for (i, c) in statuses.iter().flatten().enumerate() {
                let path = format!("status.{key}[{i}]");
                let allocated = list(
                    c.allocated_resources.as_ref(),
                    &format!("{path}.allocatedResources"),
                )?;
                let actuated = list(
                    c.resources.as_ref().and_then(|r| r.requests.as_ref()),
                    &format!("{path}.resources.requests"),
                )?;
                // A status without resources still hides a later one of
                // the same name.
                containers.push((
                    c.name.clone(),
                    ContainerStatus {
                        allocated,
                        actuated,
                    },
                ));
            }
        }
        Ok(Self {
            infeasible,
            containers,
            pod_allocated: list(s.allocated_resources.as_ref(), "status.allocatedResources")?,
            pod_resources: s.resources.is_some(),
            pod_actuated: list(
                s.resources.as_ref().and_then(|r| r.requests.as_ref()),
                "status.resources.requests",
            )?,
        })
    }

    /// Whether the status says anything [`pod_requests`] reads: without,
    /// the resize state changes nothing.
    pub fn is_empty(&self) -> bool {
        !self.infeasible
            && !self.pod_resources
            && self.pod_allocated.is_none()
            && self
                .containers
                .iter()
                .all(|(_, c)| c.allocated.is_none() && c.actuated.is_none())
    }

    /// Upstream `IsPodResizeInfeasible`.
    pub fn infeasible(&self) -> bool {
        self.infeasible
    }

    fn find(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }
}

/// Upstream's `PodResourcesOptions`, the part wasmsched uses.
#[derive(Clone, Copy, Default)]
pub(crate) struct Options<'a> {
    /// `UseStatusResources` (with `InPlacePodLevelResourcesVerticalScalingEnabled`).
    pub status: Option<&'a ResizeStatus>,
    /// `NonMissingContainerRequests`: what a container that does not ask
    /// for a resource counts instead.
    pub non_missing: &'a [(&'static str, i64)],
    /// `SkipPodLevelResources`.
    pub skip_pod_level: bool,
}

/// Upstream `applyNonMissing`: `r` (none: nothing) with each missing
/// resource of `non_missing` added.
fn fill(r: Option<&Resources>, non_missing: &[(&'static str, i64)]) -> Resources {
    let mut out = r.cloned().unwrap_or_default();
    for (k, v) in non_missing {
        if !out.has(k) {
            out.set(k, *v);
        }
    }
    out
}

/// Which requests of a container an aggregate reads.
#[derive(Clone, Copy)]
enum Source {
    Spec,
    /// `containerAllocatedRequests`.
    Allocated,
    /// `containerActuatedRequests`.
    Actuated,
}

fn container_requests<'a>(
    c: &'a SpecContainer,
    status: Option<&'a ContainerStatus>,
    infeasible: bool,
    source: Source,
) -> Option<&'a Resources> {
    let allocated = status.and_then(|s| s.allocated.as_ref());
    let actuated = status.and_then(|s| s.actuated.as_ref());
    let spec = (!infeasible).then_some(&c.requests);
    match source {
        Source::Spec => Some(&c.requests),
        Source::Allocated => allocated.or(spec),
        Source::Actuated => actuated.or(allocated).or(spec),
    }
}

/// Upstream `aggregateContainerResourcesByFn` (the sidecar KEP's
/// formula): the app containers and the native sidecars summed; each
/// init container while it runs uses itself plus the sidecars started
/// before it; the pod needs the larger of the two.
fn aggregate(spec: &SpecRequests, opts: &Options, source: Source) -> Resources {
    let infeasible = opts.status.is_some_and(ResizeStatus::infeasible);
    let of = |c: &SpecContainer| {
        let status = opts.status.and_then(|s| s.find(&c.name));
        let r = container_requests(c, status, infeasible, source);
        if opts.non_missing.is_empty() {
            r.cloned().unwrap_or_default()
        } else {
            fill(r, opts.non_missing)
        }
    };
    let mut result = Resources::default();
    for c in spec.apps {
        result.add(&of(c));
    }
    let mut sidecars = Resources::default();
    let mut init = Resources::default();
    for c in spec.inits {
        let r = of(c);
        let running = if c.sidecar {
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

/// Upstream `AggregateContainerRequests`.
fn containers(spec: &SpecRequests, opts: &Options) -> Resources {
    let spec_requests = aggregate(spec, opts, Source::Spec);
    let Some(status) = opts.status.filter(|s| !s.is_empty()) else {
        // Without a resize state every aggregate is the spec's.
        return spec_requests;
    };
    let (allocated, actuated) = match (&status.pod_allocated, &status.pod_actuated) {
        // The pod-level status maps already hold the containers' totals.
        (Some(allocated), Some(actuated)) => (allocated.clone(), actuated.clone()),
        _ => (
            aggregate(spec, opts, Source::Allocated),
            aggregate(spec, opts, Source::Actuated),
        ),
    };
    let mut out = if status.infeasible {
        Resources::default()
    } else {
        spec_requests
    };
    out.max_with(&actuated);
    out.max_with(&allocated);
    out
}

/// Whether a pod-level resource may be set (upstream
/// `IsSupportedPodLevelResource`).
pub(crate) fn pod_level_supported(name: &str) -> bool {
    name == super::resources::CPU
        || name == super::resources::MEMORY
        || name.starts_with("hugepages-")
}

/// Upstream `PodRequests`: the containers' aggregate, replaced per
/// resource by the pod-level requests where they are set (with the
/// resize state, the largest of spec and pod-level status), plus the
/// overhead.
pub(crate) fn pod_requests(spec: &SpecRequests, opts: &Options) -> Resources {
    let mut reqs = containers(spec, opts);
    if !opts.skip_pod_level && spec.pod_level.iter().next().is_some() {
        match opts.status.filter(|s| s.pod_resources) {
            Some(status) => {
                // Upstream `effectivePodLevelResources`.
                let mut effective = if status.infeasible {
                    Resources::default()
                } else {
                    spec.pod_level.clone()
                };
                for r in [&status.pod_actuated, &status.pod_allocated]
                    .into_iter()
                    .flatten()
                {
                    effective.max_with(r);
                }
                for (k, v) in effective.iter() {
                    if pod_level_supported(k) {
                        reqs.set(k, v);
                    }
                }
            }
            None => reqs.apply_pod_level(spec.pod_level),
        }
    }
    if let Some(o) = spec.overhead {
        reqs.add(o);
    }
    reqs
}

#[cfg(test)]
#[path = "pod_requests_tests.rs"]
mod tests;
