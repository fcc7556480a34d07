//! Upstream's DRA scheduler_perf workload on the real API server
//! (`BENCH_WORKLOAD=dra`, `scripts/bench-kube`):
//! `SchedulingWithResourceClaimTemplate/5000pods_500nodes` of
//! `test/integration/scheduler_perf/dra/performance-config.yaml` (1.37).
//! Nodes of 4 cpu each publish one ResourceSlice of 10 devices
//! (`basic-device-N`, upstream's attributes, two PCIe roots); half of the
//! devices are held beforehand by claims allocated directly (upstream's
//! `allocResourceClaims`), and the measured pods each get a claim for one
//! device of `test-class` from a ResourceClaimTemplate, created by the real
//! kube-controller-manager before the scheduler starts. The measured pods
//! fill the other half exactly. After each run, every claim must hold a
//! device no other claim holds, on the node its pod is bound to.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::dra::resource;
use crate::env::*;

pub const DRIVER: &str = "test-driver.cdi.k8s.io";
/// Where the claims allocated beforehand live (upstream: `init`).
pub const INIT_NS: &str = "bench-init";
const DEVICES: usize = 10;

pub fn node_name(i: usize) -> String {
    format!("dra-{i:05}")
}

/// `templates/node-with-dra-test-driver.yaml`.
pub fn node(i: usize) -> Value {
    json!({"metadata": {"name": node_name(i), "labels": {
            "kubernetes.io/hostname": node_name(i), "node-with-dra": "true"}},
        "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}})
}

/// `templates/resourceslice-basic-devices.yaml` (10 devices, 2 PCIe roots).
fn slice(i: usize) -> Value {
    let devices: Vec<Value> = (0..DEVICES)
        .map(|d| {
            let root = d % 2;
            json!({"name": format!("basic-device-{d}"), "attributes": {
                "driver": {"string": "xe"},
                "driverVersion": {"version": "1.2.3"},
                "resource.k8s.io/pciRoot": {"string": root.to_string()},
                "family": {"string": "Arc Pro B-Series"},
                "health": {"string": "Healthy"},
                "model": {"string": "B60"},
                "pciAddress": {"string": format!("0000:0{d}:00.0")},
                "pciId": {"string": "0xe211"},
                "pciRoot": {"string": format!("0{root}")},
                "resource.kubernetes.io/pciBusID": {"string": format!("0000:0{d}:00.0")},
                "resource.kubernetes.io/pciRoot": {"string": format!("pci0000:0{root}")},
                "sriov": {"bool": true},
                "type": {"string": "gpu"}},
                "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("resourceslice-{i}")},
        "spec": {"driver": DRIVER, "nodeName": node_name(i),
            "pool": {"name": format!("resourceslice-{i}"), "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

fn device_class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "test-class"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}})
}

fn template(ns: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "test-claim-template", "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}})
}

/// `templates/pod-with-claim-template.yaml`, under `scheduler`.
pub fn pod(name: &str, ns: &str, scheduler: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": scheduler,
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                "resources": {"claims": [{"name": "resource"}]}}],
            "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}]}})
}

/// Claim `i` allocated beforehand: device `i / nodes` of node `i % nodes`
/// (spread evenly, as upstream's allocator spreads them over empty nodes).
fn init_claim(i: usize, nodes: usize) -> (Value, Value) {
    let node = i % nodes;
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": format!("test-claim-{i}"), "namespace": INIT_NS},
        "spec": {"devices": {"requests": [
            {"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}});
    let status = json!({"status": {"allocation": {
        "devices": {"results": [{"request": "req-0", "driver": DRIVER,
            "pool": format!("resourceslice-{node}"), "device": format!("basic-device-{}", i / nodes)}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name(node)]}]}]}}}});
    (claim, status)
}

fn api(client: &Client, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let r = resource(kind, plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

async fn create(api: &Api<DynamicObject>, objects: &[Value]) {
    use futures::StreamExt;
    futures::stream::iter(objects)
        .for_each_concurrent(32, |o| async move {
            let object: DynamicObject = serde_json::from_value(o.clone()).unwrap();
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("creating {}: {e}", o["metadata"]["name"]));
        })
        .await;
}

/// Deletes every claim of `ns`, finalizers (the scheduler's delete
/// protection) removed first, and waits until they are gone.
async fn delete_claims(client: &Client, ns: &str) {
    let claims = api(client, "ResourceClaim", "resourceclaims", Some(ns));
    let _ = claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    wait_until("claims deleted", Duration::from_secs(300), || async {
        let left = claims.list(&ListParams::default()).await.map(|l| l.items);
        let left = left.unwrap_or_default();
        for c in &left {
            if !c.metadata.finalizers.clone().unwrap_or_default().is_empty() {
                let patch = json!({"metadata": {"finalizers": null}});
                let name = c.metadata.name.as_deref().unwrap_or_default();
                let _ = claims
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
        }
        left.is_empty()
    })
    .await;
}

/// Removes what an earlier run left: claims, templates, slices, the class.
pub async fn clean(client: &Client, ns: &str) {
    for n in [ns, INIT_NS] {
        delete_claims(client, n).await;
        let _ = api(
            client,
            "ResourceClaimTemplate",
            "resourceclaimtemplates",
            Some(n),
        )
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    }
    let _ = api(client, "ResourceSlice", "resourceslices", None)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let _ = api(client, "DeviceClass", "deviceclasses", None)
        .delete("test-class", &DeleteParams::default())
        .await;
}

/// The workload's objects besides nodes and pods: the class, a slice per
/// node, `init` claims allocated, and the template pods of `ns` use.
pub async fn create_devices(client: &Client, ns: &str, nodes: usize, init: usize) {
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": INIT_NS}})).unwrap();
    let _ = ns_api.create(&PostParams::default(), &namespace).await;
    create(
        &api(client, "DeviceClass", "deviceclasses", None),
        &[device_class()],
    )
    .await;
    let slices: Vec<Value> = (0..nodes).map(slice).collect();
    create(
        &api(client, "ResourceSlice", "resourceslices", None),
        &slices,
    )
    .await;
    let claims_api = api(client, "ResourceClaim", "resourceclaims", Some(INIT_NS));
    let init: Vec<(Value, Value)> = (0..init).map(|i| init_claim(i, nodes)).collect();
    let claims: Vec<Value> = init.iter().map(|(c, _)| c.clone()).collect();
    create(&claims_api, &claims).await;
    use futures::StreamExt;
    futures::stream::iter(&init)
        .for_each_concurrent(32, |(c, status)| {
            let claims_api = claims_api.clone();
            async move {
                let name = c["metadata"]["name"].as_str().unwrap();
                claims_api
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .unwrap_or_else(|e| panic!("allocating {name}: {e}"));
            }
        })
        .await;
    create(
        &api(
            client,
            "ResourceClaimTemplate",
            "resourceclaimtemplates",
            Some(ns),
        ),
        &[template(ns)],
    )
    .await;
}

/// Waits until kube-controller-manager created a claim for each of the
/// `pods` pending pods of `ns` and wrote its name into the pod's status.
pub async fn wait_for_claims(client: &Client, ns: &str, pods: usize) {
    let claims = api(client, "ResourceClaim", "resourceclaims", Some(ns));
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    wait_until(
        "kube-controller-manager's claims for every pod",
        Duration::from_secs(900),
        || async {
            // Lists of thousands of objects: not ten times a second.
            tokio::time::sleep(Duration::from_millis(900)).await;
            let created = claims.list_metadata(&ListParams::default()).await;
            if created.map_or(0, |l| l.items.len()) < pods {
                return false;
            }
            let listed = pod_api.list(&ListParams::default()).await;
            listed.is_ok_and(|l| {
                l.items.iter().all(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.resource_claim_statuses.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.resource_claim_name.is_some()))
                })
            })
        },
    )
    .await;
}

/// Every claim (the init ones and the pods') holds a device no other claim
/// holds; each pod's claim is allocated on the pod's node and reserved
/// for it. Returns the number of pods checked.
pub async fn check_allocations(client: &Client, ns: &str) -> usize {
    let mut held: HashSet<(String, String)> = HashSet::new();
    let mut node_of_claim: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for n in [INIT_NS, ns] {
        let claims = api(client, "ResourceClaim", "resourceclaims", Some(n));
        for c in claims.list(&ListParams::default()).await.unwrap().items {
            let name = c.metadata.name.clone().unwrap_or_default();
            let status = &c.data["status"];
            let results = status["allocation"]["devices"]["results"]
                .as_array()
                .unwrap_or_else(|| panic!("claim {n}/{name} is not allocated"));
            for r in results {
                let key = (
                    r["pool"].as_str().unwrap_or_default().to_string(),
                    r["device"].as_str().unwrap_or_default().to_string(),
                );
                assert!(held.insert(key.clone()), "device {key:?} allocated twice");
            }
            let node = status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"]
                [0]["values"][0]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let pool = results[0]["pool"].as_str().unwrap_or_default();
            assert_eq!(
                pool.strip_prefix("resourceslice-")
                    .map(|i| node_name(i.parse().unwrap())),
                Some(node.clone()),
                "claim {n}/{name}: the device is not on the selected node"
            );
            let reserved = status["reservedFor"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(|r| r["name"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            node_of_claim.insert(format!("{n}/{name}"), (node, reserved));
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut checked = 0;
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let bound_to = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let claim = p
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.resource_claim_name.clone())
            .unwrap_or_else(|| panic!("pod {name} has no claim"));
        let (node, reserved) = &node_of_claim[&format!("{ns}/{claim}")];
        assert_eq!(
            bound_to.as_ref(),
            Some(node),
            "pod {name}: claim {claim} on another node"
        );
        assert!(
            reserved.contains(&name),
            "claim {claim} is not reserved for {name}"
        );
        checked += 1;
    }
    checked
}
