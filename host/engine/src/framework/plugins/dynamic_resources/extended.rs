//! Extended resources backed by DRA (DRAExtendedResource, GA in
//! kube-scheduler 1.37; upstream's `extendeddynamicresources.go`): a pod
//! asking for an extended resource (`example.com/gpu: 1`, or a class's
//! implicit `deviceclass.resource.kubernetes.io/<class>`) that a
//! DeviceClass names in `spec.extendedResourceName` is served by that
//! class's devices on nodes that do not advertise the resource in
//! `status.allocatable` (a device plugin's resource wins where the node
//! lists it).
//!
//! - PreFilter ([`prepare`]): the DRA-backed resources the pod requests,
//!   and the claim an earlier cycle made for the pod, if any.
//! - Filter ([`for_node`]): which resources the node must serve through
//!   DRA; a claim for them, with one request per container and resource
//!   ([`requests_and_mappings`]), allocated with the pod's other claims.
//! - PreBind: an [`ExtendedClaimBinding`]: the runtime's binder creates
//!   the claim (owned by the pod, annotated
//!   `resource.kubernetes.io/extended-resource-claim: "true"`, named from
//!   `<pod>-extended-resources-`), writes its allocation and reservation,
//!   and records it in the pod's `status.extendedResourceClaimStatus`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::Store;
use crate::framework::{NodeInfo, Rejection};
use crate::model::dra::{Claim, EXTENDED_RESOURCE_CLAIM};
use crate::model::dra_extended::{is_dra_extended_name, Container};
use crate::model::Pod;

/// The name of the claim while it exists only in this scheduler's memory
/// (upstream's `specialClaimInMemName`, not a valid object name).
pub const IN_MEMORY_NAME: &str = "<extended-resources>";

/// Filter's reasons (upstream's).
pub const STALE_CLAIM: &str = "cannot schedule extended resource claim";
pub const CANNOT_FIT: &str = "cannot fit resource";

/// One of `status.extendedResourceClaimStatus.requestMappings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub container: String,
    pub resource: String,
    pub request: String,
}

impl Mapping {
    pub fn to_json(&self) -> Value {
        json!({"containerName": self.container, "resourceName": self.resource, "requestName": self.request})
    }
}

/// One device request of the claim: `exactly` a count of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    pub name: String,
    pub class: String,
    pub count: i64,
}

/// The pod's part, found in PreFilter.
#[derive(Debug)]
pub(crate) struct Prep {
    /// DRA-backed extended resources the pod requests (all of its nonzero
    /// requests of such names; Filter sorts out which the node serves).
    resources: Vec<(String, i64)>,
    /// The claim an earlier cycle created for the pod.
    existing: Option<Arc<Claim>>,
    /// The in-memory claim's uid (for the reservation in flight).
    pub uid: String,
}

/// The claim for one node: what to allocate, and the mappings to record.
#[derive(Debug, Clone)]
pub struct NodeClaim {
    pub claim: Arc<Claim>,
    pub requests: Vec<DeviceRequest>,
    pub mappings: Vec<Mapping>,
}

/// Which extended resources DRA can serve, for NodeResourcesFit (upstream's
/// `shouldDelegateResourceToDRA`): the DRA store when DynamicResources
/// shares one.
#[derive(Clone, Default)]
pub struct Resolver(Option<Arc<Store>>);

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

impl Resolver {
    pub fn new(store: Arc<Store>) -> Self {
        Self(Some(store))
    }

    /// Whether a DeviceClass serves `resource`.
    pub fn backed(&self, resource: &str) -> bool {
        is_dra_extended_name(resource)
            && self
                .0
                .as_ref()
                .is_some_and(|s| s.class_for_resource(resource).is_some())
    }
}

pub use super::store::in_memory_uid;

/// PreFilter: `None` when no extended resource the pod requests maps to
/// a class (upstream's `hasDeviceClassMappedExtendedResource`).
pub(crate) fn prepare(store: &Store, pod: &Pod) -> Option<Prep> {
    if pod.extended_containers.is_empty() {
        return None;
    }
    let resources: Vec<(String, i64)> = pod
        .requests
        .iter()
        .filter(|(k, v)| *v != 0 && is_dra_extended_name(k))
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if !resources
        .iter()
        .any(|(r, _)| store.class_for_resource(r).is_some())
    {
        return None;
    }
    let existing = store.claims().into_iter().find(|c| {
        c.extended && c.namespace == pod.namespace && c.owner_uid.as_deref() == Some(&pod.uid)
    });
    Some(Prep {
        resources,
        existing,
        uid: in_memory_uid(&pod.uid),
    })
}

impl Prep {
    /// The claim made by an earlier cycle.
    pub(crate) fn existing(&self) -> Option<&Arc<Claim>> {
        self.existing.as_ref()
    }
}

/// Filter (upstream's `filterExtendedResources`): `Ok(None)` when the node
/// serves every resource through its device plugin (NodeResourcesFit
/// checks those), else the claim to allocate on it.
pub(crate) fn for_node(
    prep: &Prep,
    store: &Store,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<Option<NodeClaim>, Rejection> {
    if let Some(c) = &prep.existing {
        if !c.requests.is_empty() {
            // Made by an earlier cycle: PostFilter deletes it and the pod
            // is tried anew.
            return Err(Rejection::unresolvable(STALE_CLAIM));
        }
    }
    let allocatable = &node.node.allocatable;
    let mut served = Vec::new();
    for (r, _) in &prep.resources {
        let class = store.class_for_resource(r);
        match class {
            Some(class) if allocatable.get(r) == 0 => served.push((r.clone(), class)),
            _ if !allocatable.has(r) => return Err(Rejection::unresolvable(CANNOT_FIT)),
            _ => {}
        }
    }
    if served.is_empty() || prep.existing.is_some() {
        return Ok(None);
    }
    let resolve = |r: &str| {
        served
            .iter()
            .find(|(name, _)| name == r)
            .map(|(_, c)| c.clone())
    };
    let names: Vec<String> = served.iter().map(|(r, _)| r.clone()).collect();
    let (requests, mappings) = requests_and_mappings(&pod.extended_containers, &names, &resolve);
    let claim = to_claim(pod, &prep.uid, &requests).map_err(Rejection::error)?;
    Ok(Some(NodeClaim {
        claim: Arc::new(claim),
        requests,
        mappings,
    }))
}

/// The claim's `spec` as the binder creates it.
pub fn spec(requests: &[DeviceRequest]) -> Value {
    let requests: Vec<Value> = requests
        .iter()
        .map(|r| {
            json!({"name": r.name, "exactly": {
                "deviceClassName": r.class,
                "allocationMode": "ExactCount",
                "count": r.count,
            }})
        })
        .collect();
    json!({"devices": {"requests": requests}})
}

/// The claim's metadata as the binder creates it (upstream's
/// `preFilterExtendedResources`): a generated name, the pod as
/// controlling owner, the annotation.
pub fn metadata(pod_namespace: &str, pod_name: &str, pod_uid: &str) -> Value {
    json!({
        "namespace": pod_namespace,
        "generateName": format!("{pod_name}-extended-resources-"),
        "ownerReferences": [{
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod_name,
            "uid": pod_uid,
            "controller": true,
        }],
        "annotations": {EXTENDED_RESOURCE_CLAIM: "true"},
    })
}

/// The in-memory claim, read through the same model as API claims.
fn to_claim(pod: &Pod, uid: &str, requests: &[DeviceRequest]) -> Result<Claim, String> {
    let mut meta = metadata(&pod.namespace, &pod.name, &pod.uid);
    meta["name"] = json!(IN_MEMORY_NAME);
    meta["uid"] = json!(uid);
    let object = json!({"metadata": meta, "spec": spec(requests)});
    let api: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(object)
        .map_err(|e| format!("pod {}: extended resource claim: {e}", pod.key()))?;
    Claim::from_api(&api).map_err(|e| format!("pod {}: extended resource claim: {e}", pod.key()))
}

/// Upstream's `createResourceRequestAndMappings` for container `index`.
fn container_request(
    index: usize,
    c: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<Mapping>) {
    let mut mappings = Vec::new();
    let wanted = c.request(resource);
    if wanted == 0 {
        return (None, mappings);
    }
    let mut sum = 0;
    for r in reusable.iter().flatten() {
        sum += r.count;
        mappings.push(Mapping {
            container: c.name.clone(),
            resource: resource.to_string(),
            request: r.name.clone(),
        });
        if sum >= wanted {
            return (None, mappings);
        }
    }
    let ridx = c.keys.iter().position(|k| k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{ridx}");
    mappings.push(Mapping {
        container: c.name.clone(),
        resource: resource.to_string(),
        request: name.clone(),
    });
    (
        Some(DeviceRequest {
            name,
            class: class.to_string(),
            count: wanted - sum,
        }),
        mappings,
    )
}

/// Upstream's `createRequestsAndMappings`: for each resource (by name) the
/// node serves through DRA, one request per long-lived container (app
/// containers and sidecars) that asks for it, and one for the init
/// containers that run alone, sized for the largest of them after what
/// the later long-lived containers' requests already hold; requests
/// sorted by name.
pub fn requests_and_mappings(
    containers: &[Container],
    resources: &[String],
    class_of: &dyn Fn(&str) -> Option<String>,
) -> (Vec<DeviceRequest>, Vec<Mapping>) {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    let mut names: Vec<&String> = resources.iter().collect();
    names.sort();
    for resource in names {
        let Some(class) = class_of(resource) else {
            continue;
        };
        let mut long_lived: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.short_lived)
        {
            let (r, m) = container_request(i, c, resource, &class, &[]);
            long_lived[i] = r;
            long_mappings.extend(m);
        }
        let mut max_short: Option<DeviceRequest> = None;
        let mut short_names: Vec<String> = Vec::new();
        let mut short_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(_, c)| c.short_lived) {
            let (r, m) = container_request(i, c, resource, &class, &long_lived[i..]);
            if let Some(r) = r {
                if !short_names.contains(&r.name) {
                    short_names.push(r.name.clone());
                }
                if max_short.as_ref().is_none_or(|m| m.count < r.count) {
                    max_short = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(max) = &max_short {
            if short_names.len() > 1 {
                for m in &mut short_mappings {
                    if m.request != max.name && short_names.contains(&m.request) {
                        m.request = max.name.clone();
                    }
                }
            }
        }
        requests.extend(max_short);
        requests.extend(long_lived.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

#[cfg(test)]
mod tests {
    //! Upstream's `Test_createRequestsAndMappings_requests` and
    //! `_mappings` (extendeddynamicresources_test.go).
    use super::*;
    use crate::model::Resources;

    const ER: &str = "example.com/gpu";

    fn c(name: &str, short_lived: bool, reqs: &[(&str, i64)]) -> Container {
        Container::new(
            name,
            short_lived,
            &Resources::from_pairs(reqs.iter().map(|(k, v)| (*k, *v))),
        )
    }

    fn er(suffix: &str) -> String {
        format!("{ER}{suffix}")
    }

    fn pod1() -> Vec<Container> {
        vec![c("con0", false, &[(ER, 1), (&er("1"), 2)])]
    }
    fn pod2() -> Vec<Container> {
        vec![
            c("con0", false, &[(ER, 1)]),
            c("con1", false, &[(&er("1"), 2)]),
        ]
    }
    /// Init containers first, as upstream numbers them.
    fn pod_init() -> Vec<Container> {
        vec![
            c("init-con0", true, &[(&er("init"), 2)]),
            c("con0", false, &[(ER, 1)]),
        ]
    }
    fn pod_init2() -> Vec<Container> {
        vec![
            c("init-con0", true, &[(&er("init"), 1)]),
            c("init-con1", true, &[(&er("init"), 2)]),
            c("con0", false, &[(ER, 1)]),
        ]
    }
    fn pod_init3() -> Vec<Container> {
        vec![
            c("init-con0", true, &[(&er("init"), 1)]),
            c("sidecar-con1", false, &[(&er("init"), 1)]),
            c("init-con2", true, &[(&er("init"), 2)]),
            c("con0", false, &[(ER, 1)]),
        ]
    }
    const IMPLICIT: &str = "deviceclass.resource.kubernetes.io/classInit";
    fn pod1_init_implicit() -> Vec<Container> {
        vec![c("init-con0", true, &[(&er("init"), 1), (IMPLICIT, 2)])]
    }
    fn pod_init_implicit() -> Vec<Container> {
        vec![
            c("init-con0", true, &[(&er("init"), 1)]),
            c("init-con1", true, &[(IMPLICIT, 2)]),
            c("con0", false, &[(ER, 1)]),
        ]
    }

    fn map(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |r: &str| pairs.iter().find(|(k, _)| k == r).map(|(_, v)| v.clone())
    }

    fn dev_map() -> impl Fn(&str) -> Option<String> {
        map(&[(ER, "class")])
    }
    fn dev_map2() -> Vec<(String, String)> {
        vec![(ER.into(), "class".into()), (er("1"), "class1".into())]
    }
    fn dev_map_init() -> Vec<(String, String)> {
        vec![
            (ER.into(), "class".into()),
            (er("init"), "classInit".into()),
            (IMPLICIT.into(), "classInit".into()),
        ]
    }
    fn resolver(m: Vec<(String, String)>) -> impl Fn(&str) -> Option<String> {
        move |r: &str| m.iter().find(|(k, _)| k == r).map(|(_, v)| v.clone())
    }

    fn req(name: &str, class: &str, count: i64) -> DeviceRequest {
        DeviceRequest {
            name: name.into(),
            class: class.into(),
            count,
        }
    }

    fn requests(
        pod: Vec<Container>,
        resources: &[String],
        class_of: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<DeviceRequest> {
        requests_and_mappings(&pod, resources, class_of).0
    }

    #[test]
    fn requests_as_upstream() {
        let res = vec![ER.to_string()];
        let res2 = vec![ER.to_string(), er("1")];
        let res_init = vec![ER.to_string(), er("init")];
        let none = |_: &str| None;
        assert!(requests(pod1(), &[], &none).is_empty(), "nil");
        assert_eq!(
            requests(pod1(), &res, &dev_map()),
            [req("container-0-request-0", "class", 1)],
            "one resource match"
        );
        assert_eq!(
            requests(pod1(), &res2, &dev_map()),
            [req("container-0-request-0", "class", 1)],
            "one resource match, one resource not match"
        );
        assert_eq!(
            requests(pod1(), &res2, &resolver(dev_map2())),
            [
                req("container-0-request-0", "class", 1),
                req("container-0-request-1", "class1", 2)
            ],
            "two resources match"
        );
        assert_eq!(
            requests(pod2(), &res2, &resolver(dev_map2())),
            [
                req("container-0-request-0", "class", 1),
                req("container-1-request-0", "class1", 2)
            ],
            "two containers match"
        );
        assert_eq!(
            requests(pod_init(), &res_init, &resolver(dev_map_init())),
            [
                req("container-0-request-0", "classInit", 2),
                req("container-1-request-0", "class", 1)
            ],
            "one init container, one regular container"
        );
        assert_eq!(
            requests(pod_init2(), &res_init, &resolver(dev_map_init())),
            [
                req("container-1-request-0", "classInit", 2),
                req("container-2-request-0", "class", 1)
            ],
            "two init containers, one regular container"
        );
        assert_eq!(
            requests(pod_init3(), &res_init, &resolver(dev_map_init())),
            [
                req("container-1-request-0", "classInit", 1),
                req("container-2-request-0", "classInit", 2),
                req("container-3-request-0", "class", 1)
            ],
            "three init containers, one sidecar, one regular container"
        );
    }

    fn mapping(container: &str, resource: &str, request: &str) -> Mapping {
        Mapping {
            container: container.into(),
            resource: resource.into(),
            request: request.into(),
        }
    }

    /// Sorted by request name, then container, as upstream's test does.
    fn mappings(
        pod: Vec<Container>,
        resources: &[String],
        class_of: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<Mapping> {
        let mut m = requests_and_mappings(&pod, resources, class_of).1;
        m.sort_by(|a, b| (&a.request, &a.container).cmp(&(&b.request, &b.container)));
        m
    }

    #[test]
    fn mappings_as_upstream() {
        let res = vec![ER.to_string(), er("1")];
        let res_init = vec![ER.to_string(), er("init")];
        let res_init_implicit = vec![ER.to_string(), er("init"), IMPLICIT.to_string()];
        let init = er("init");
        assert_eq!(
            mappings(pod1(), &res, &resolver(dev_map2())),
            [
                mapping("con0", ER, "container-0-request-0"),
                mapping("con0", &er("1"), "container-0-request-1")
            ],
            "one container, two requests"
        );
        assert_eq!(
            mappings(
                pod1_init_implicit(),
                &res_init_implicit,
                &resolver(dev_map_init())
            ),
            [
                mapping("init-con0", IMPLICIT, "container-0-request-0"),
                mapping("init-con0", &init, "container-0-request-1")
            ],
            "one container, one explicit and one implicit request"
        );
        assert_eq!(
            mappings(pod2(), &res, &resolver(dev_map2())),
            [
                mapping("con0", ER, "container-0-request-0"),
                mapping("con1", &er("1"), "container-1-request-0")
            ],
            "two containers, two requests"
        );
        assert_eq!(
            mappings(pod_init(), &res_init, &resolver(dev_map_init())),
            [
                mapping("init-con0", &init, "container-0-request-0"),
                mapping("con0", ER, "container-1-request-0")
            ],
            "one init container, one regular container, one request"
        );
        assert_eq!(
            mappings(pod_init2(), &res_init, &resolver(dev_map_init())),
            [
                mapping("init-con0", &init, "container-1-request-0"),
                mapping("init-con1", &init, "container-1-request-0"),
                mapping("con0", ER, "container-2-request-0")
            ],
            "three containers (two are init container), two requests"
        );
        assert_eq!(
            mappings(
                pod_init_implicit(),
                &res_init_implicit,
                &resolver(dev_map_init())
            ),
            [
                mapping("init-con0", &init, "container-0-request-0"),
                mapping("init-con1", IMPLICIT, "container-1-request-0"),
                mapping("con0", ER, "container-2-request-0")
            ],
            "three containers (two are init container), both explicit and implicit resources"
        );
        assert_eq!(
            mappings(pod_init3(), &res_init, &resolver(dev_map_init())),
            [
                mapping("init-con0", &init, "container-1-request-0"),
                mapping("sidecar-con1", &init, "container-1-request-0"),
                mapping("init-con2", &init, "container-2-request-0"),
                mapping("con0", ER, "container-3-request-0")
            ],
            "four containers (two are init container, one sidecar), three requests"
        );
    }

    #[test]
    fn the_claim_is_owned_by_the_pod_and_annotated() {
        let m = metadata("ns", "p", "uid-1");
        assert_eq!(m["generateName"], "p-extended-resources-");
        assert_eq!(m["ownerReferences"][0]["controller"], true);
        assert_eq!(m["annotations"][EXTENDED_RESOURCE_CLAIM], "true");
        let s = spec(&[req("container-0-request-0", "gpu", 2)]);
        assert_eq!(
            s["devices"]["requests"][0]["exactly"],
            json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2})
        );
    }
}
