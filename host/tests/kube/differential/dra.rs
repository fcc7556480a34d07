//! Dynamic resource allocation for the differential test, from a third
//! random stream (so that a seed's nodes, pods and resize state stay what
//! they were):
//!
//! - DeviceClasses (the same every seed): `gpu`; `fpga`, whose
//!   `extendedResourceName` is `example.com/fpga` (DRAExtendedResource);
//!   `nic`, asked for by its implicit name
//!   `deviceclass.resource.kubernetes.io/nic`;
//! - ResourceSlices on some nodes as a driver publishes them: GPUs of two
//!   models and memory sizes on two PCIe roots, some shared
//!   (`allowMultipleAllocations` with a memory capacity and a
//!   `requestPolicy`: DRAConsumableCapacity), some tainted in the slice;
//!   FPGAs; NICs. Some nodes advertise `example.com/fpga` themselves (a
//!   device plugin's resource, which wins over DRA on that node);
//! - DeviceTaintRules (DRADeviceTaintRules) on a device or a whole pool,
//!   NoSchedule or NoExecute;
//! - pending pods with ResourceClaims created just before them: `exactly`
//!   and `firstAvailable` requests, counts, `allocationMode: All`, CEL
//!   selectors on attributes and capacity, capacity requests (rounded by a
//!   shared device's policy), tolerations, `matchAttribute` and
//!   `distinctAttribute` constraints; claims of earlier pods shared; and
//!   extended resources served by DRA, whose claim the scheduler creates.
//!
//! Claims are kept for the whole seed (an unschedulable pod's claim stays
//! unallocated, and a later pod may share it), so a pod never waits for a
//! claim that is gone.

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::Client;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::generate::NAMESPACES;

pub const GPU_DRIVER: &str = "gpu.example.com";
const FPGA_DRIVER: &str = "fpga.example.com";
const NIC_DRIVER: &str = "nic.example.com";
/// The extended resource class `fpga` serves.
pub const FPGA: &str = "example.com/fpga";
/// The implicit extended resource of class `nic`.
const NIC: &str = "deviceclass.resource.kubernetes.io/nic";
/// What the generated cluster-scoped objects carry, for their cleanup.
use crate::env::DRA_LABEL as LABEL;
const TAINT_KEYS: [&str; 2] = ["example.com/maintenance", "example.com/degraded"];
const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

fn resource(kind: &str) -> ApiResource {
    let plural = match kind {
        "DeviceClass" => "deviceclasses",
        "ResourceSlice" => "resourceslices",
        "DeviceTaintRule" => "devicetaintrules",
        _ => "resourceclaims",
    };
    ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The cluster-scoped DRA objects of one seed: classes, slices, taint
/// rules.
pub struct Devices {
    pub objects: Vec<Value>,
}

/// A seed's DRA stream.
pub struct Gen {
    rng: StdRng,
    /// Per namespace, the claims created so far (for sharing).
    claims: BTreeMap<String, Vec<String>>,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: StdRng::seed_from_u64(seed ^ 0x0d7a_c1a1_3500),
            claims: BTreeMap::new(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        *from.choose(&mut self.rng).expect("non-empty")
    }

    /// Classes, slices for some of `nodes` (some of which are given
    /// `example.com/fpga` as a device plugin's resource), taint rules.
    pub fn devices(&mut self, nodes: &mut [Value]) -> Devices {
        let mut objects = classes();
        let mut gpu_pools: Vec<(String, Vec<String>)> = Vec::new();
        for n in nodes.iter_mut() {
            let node = n["metadata"]["name"].as_str().unwrap().to_string();
            if self.chance(0.55) {
                let (slice, devices) = self.gpu_slice(&node);
                objects.push(slice);
                gpu_pools.push((format!("{node}-gpu"), devices));
            }
            if self.chance(0.3) {
                let devices: Vec<Value> = (0..self.rng.random_range(1..=2))
                    .map(|i| json!({"name": format!("fpga-{i}")}))
                    .collect();
                objects.push(slice_of(&node, "fpga", FPGA_DRIVER, devices));
            }
            if self.chance(0.25) {
                let devices: Vec<Value> = (0..self.rng.random_range(1..=3))
                    .map(|i| {
                        json!({"name": format!("nic-{i}"),
                        "attributes": {"speed": {"int": self.pick(&[25, 100])}}})
                    })
                    .collect();
                objects.push(slice_of(&node, "nic", NIC_DRIVER, devices));
            }
            if self.chance(0.12) {
                for key in ["allocatable", "capacity"] {
                    n["status"][key][FPGA] = json!("2");
                }
            }
        }
        for i in 0..self.rng.random_range(1..=3) {
            let Some((pool, devices)) = gpu_pools.choose(&mut self.rng).cloned() else {
                break;
            };
            let mut selector = json!({"driver": GPU_DRIVER, "pool": pool});
            if self.chance(0.7) {
                selector["device"] =
                    json!(self.pick(&devices.iter().map(String::as_str).collect::<Vec<_>>()));
            }
            let effect = self.pick(&["NoSchedule", "NoExecute", "None"]);
            objects.push(
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                "metadata": {"name": format!("rule-{i}"), "labels": {LABEL: "yes"}},
                "spec": {"deviceSelector": selector,
                    "taint": {"key": self.pick(&TAINT_KEYS), "value": "true", "effect": effect}}}),
            );
        }
        Devices { objects }
    }

    /// 1 to 4 GPUs; returns the slice and its devices' names.
    fn gpu_slice(&mut self, node: &str) -> (Value, Vec<String>) {
        let mut devices = Vec::new();
        let mut names = Vec::new();
        for i in 0..self.rng.random_range(1..=4) {
            let name = format!("gpu-{i}");
            let model = self.pick(&["A100", "H100"]);
            let mut d = json!({"name": name, "attributes": {
                "model": {"string": model},
                PCIE_ROOT: {"string": self.pick(&["pci0000:00", "pci0000:80"])}}});
            if self.chance(0.25) {
                // Shared up to its memory, in steps or in fixed sizes.
                d["allowMultipleAllocations"] = json!(true);
                let policy = if self.chance(0.6) {
                    json!({"default": "8Gi", "validRange": {"min": "4Gi", "step": "4Gi"}})
                } else {
                    json!({"default": "10Gi", "validValues": ["10Gi", "20Gi", "40Gi"]})
                };
                d["capacity"] = json!({"memory": {"value": "80Gi", "requestPolicy": policy}});
            } else {
                d["capacity"] = json!({"memory": {"value": self.pick(&["40Gi", "80Gi"])}});
            }
            if self.chance(0.2) {
                d["taints"] = json!([{"key": self.pick(&TAINT_KEYS), "value": "true",
                    "effect": self.pick(&["NoSchedule", "NoExecute", "None"])}]);
            }
            devices.push(d);
            names.push(name);
        }
        (slice_of(node, "gpu", GPU_DRIVER, devices), names)
    }

    /// Gives some pending pods claims or DRA-backed extended resources;
    /// returns the claims to create before the pod.
    pub fn pod(&mut self, pod: &mut Value) -> Vec<Value> {
        if !self.chance(0.3) {
            return Vec::new();
        }
        let ns = pod["metadata"]["namespace"].as_str().unwrap().to_string();
        let name = pod["metadata"]["name"].as_str().unwrap().to_string();
        let earlier = self.claims.get(&ns).cloned().unwrap_or_default();
        let roll = self.rng.random_range(0..20);
        if roll < 4 {
            // An extended resource, which DRA serves on nodes that do not
            // advertise it.
            let (resource, n) = if self.chance(0.6) {
                (FPGA, self.pick(&["1", "1", "2"]))
            } else {
                (NIC, self.pick(&["1", "2"]))
            };
            let c = &mut pod["spec"]["containers"][0]["resources"];
            for key in ["requests", "limits"] {
                if !c[key].is_object() {
                    c[key] = json!({});
                }
                c[key][resource] = json!(n);
            }
            return Vec::new();
        }
        let mut new = Vec::new();
        let mut refs: Vec<(String, String)> = Vec::new();
        if roll < 7 && !earlier.is_empty() {
            // Share an earlier pod's claim (allocated or not).
            let c = self.pick(&earlier.iter().map(String::as_str).collect::<Vec<_>>());
            refs.push(("shared".into(), c.to_string()));
        }
        let count = if refs.is_empty() || self.chance(0.3) {
            if self.chance(0.2) {
                2
            } else {
                1
            }
        } else {
            0
        };
        for i in 0..count {
            let claim = format!("{name}-c{i}");
            new.push(self.claim(&ns, &claim));
            refs.push((format!("c{i}"), claim.clone()));
            self.claims.entry(ns.clone()).or_default().push(claim);
        }
        let rc: Vec<Value> = refs
            .iter()
            .map(|(n, c)| json!({"name": n, "resourceClaimName": c}))
            .collect();
        let uses: Vec<Value> = refs.iter().map(|(n, _)| json!({"name": n})).collect();
        pod["spec"]["resourceClaims"] = Value::Array(rc);
        pod["spec"]["containers"][0]["resources"]["claims"] = Value::Array(uses);
        new
    }

    fn claim(&mut self, ns: &str, name: &str) -> Value {
        let requests: Vec<Value> = if self.chance(0.12) {
            let nic = json!({"name": "nic", "exactly": {"deviceClassName": "nic"}});
            vec![self.gpu_request("gpu"), nic]
        } else {
            vec![self.gpu_request("gpu")]
        };
        let mut spec = json!({"devices": {"requests": requests}});
        let counted = requests
            .iter()
            .any(|r| r["exactly"]["count"].as_i64().unwrap_or(1) > 1);
        if counted && self.chance(0.5) {
            let kind = self.pick(&["matchAttribute", "distinctAttribute"]);
            spec["devices"]["constraints"] =
                json!([{kind: self.pick(&[PCIE_ROOT, "gpu.example.com/model"])}]);
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns}, "spec": spec})
    }

    /// A request of class `gpu`: mostly `exactly`, now and then
    /// `firstAvailable`.
    fn gpu_request(&mut self, name: &str) -> Value {
        if self.chance(0.1) {
            let h100 = "device.attributes[\"gpu.example.com\"].model == \"H100\"";
            return json!({"name": name, "firstAvailable": [
                {"name": "two-h100", "deviceClassName": "gpu", "count": 2,
                 "selectors": [{"cel": {"expression": h100}}]},
                {"name": "one", "deviceClassName": "gpu"}]});
        }
        let mut e = json!({"deviceClassName": "gpu"});
        match self.rng.random_range(0..20) {
            0 => e["allocationMode"] = json!("All"),
            1..=4 => e["count"] = json!(2),
            5 => e["count"] = json!(3),
            _ => {}
        }
        if self.chance(0.3) {
            let expr = match self.rng.random_range(0..3) {
                0 => "device.attributes[\"gpu.example.com\"].model == \"A100\"",
                1 => "device.attributes[\"gpu.example.com\"].model == \"H100\"",
                _ => {
                    "device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0"
                }
            };
            e["selectors"] = json!([{"cel": {"expression": expr}}]);
        }
        if e.get("allocationMode").is_none() && self.chance(0.3) {
            // On a shared device a share (rounded by its policy); on
            // another, what its memory must hold.
            let m = self.pick(&["6Gi", "10Gi", "30Gi", "50Gi"]);
            e["capacity"] = json!({"requests": {"memory": m}});
        }
        if self.chance(0.25) {
            let mut t = json!({"key": self.pick(&TAINT_KEYS), "operator": "Exists"});
            if self.chance(0.5) {
                t["effect"] = json!(self.pick(&["NoSchedule", "NoExecute"]));
            }
            e["tolerations"] = json!([t]);
        }
        json!({"name": name, "exactly": e})
    }
}

/// The three classes (the same every seed).
fn classes() -> Vec<Value> {
    let class = |name: &str, driver: &str, extended: Option<&str>| {
        let mut spec = json!({"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]});
        if let Some(e) = extended {
            spec["extendedResourceName"] = json!(e);
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "labels": {LABEL: "yes"}}, "spec": spec})
    };
    vec![
        class("gpu", GPU_DRIVER, None),
        class("fpga", FPGA_DRIVER, Some(FPGA)),
        class("nic", NIC_DRIVER, None),
    ]
}

/// A one-slice pool `<node>-<what>` of `driver` on `node`.
fn slice_of(node: &str, what: &str, driver: &str, devices: Vec<Value>) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-{what}"), "labels": {LABEL: "yes"}},
        "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": format!("{node}-{what}"), "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

fn api(client: &Client, o: &Value) -> Api<DynamicObject> {
    let r = resource(o["kind"].as_str().unwrap());
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

/// Creates a DRA object.
pub async fn create(client: &Client, o: &Value) {
    let obj: DynamicObject = serde_json::from_value(o.clone()).unwrap();
    api(client, o)
        .create(&Default::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {} {}: {e}", o["kind"], o["metadata"]["name"]));
}

/// Every DRA object on the server, as `simulate` reads them from a dump:
/// classes, slices, taint rules, and the claims of the test namespaces
/// with their status (allocations and reservations).
pub async fn state(client: &Client) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |list: Vec<DynamicObject>, kind: &str| {
        for o in list {
            let mut v = super::plain(&o);
            v["apiVersion"] = json!("resource.k8s.io/v1");
            v["kind"] = json!(kind);
            out.push(v);
        }
    };
    for kind in ["DeviceClass", "ResourceSlice", "DeviceTaintRule"] {
        let a: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
        push(a.list(&ListParams::default()).await.unwrap().items, kind);
    }
    for ns in NAMESPACES {
        let a: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &resource("ResourceClaim"));
        push(
            a.list(&ListParams::default()).await.unwrap().items,
            "ResourceClaim",
        );
    }
    out
}

/// Deletes the claims of the test namespaces and the labelled
/// cluster-scoped objects.
pub async fn clean(client: &Client) {
    for ns in NAMESPACES {
        let a: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &resource("ResourceClaim"));
        crate::env::delete_claims(&a).await;
    }
    let labelled = ListParams::default().labels(&format!("{LABEL}=yes"));
    for kind in ["ResourceSlice", "DeviceTaintRule", "DeviceClass"] {
        let a: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
        let _ = a
            .delete_collection(&DeleteParams::default(), &labelled)
            .await;
    }
    crate::env::wait_until(
        "the DRA objects' deletion",
        std::time::Duration::from_secs(60),
        || async {
            let mut left = 0;
            for ns in NAMESPACES {
                let a: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), ns, &resource("ResourceClaim"));
                left += a
                    .list(&ListParams::default())
                    .await
                    .map_or(1, |l| l.items.len());
            }
            for kind in ["ResourceSlice", "DeviceTaintRule", "DeviceClass"] {
                let a: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
                left += a.list(&labelled).await.map_or(1, |l| l.items.len());
            }
            left == 0
        },
    )
    .await;
}

/// `request=driver/pool/device[capacity=amount,...]`, sorted, of a
/// claim's allocation on the server.
fn server_devices(claim: &Value) -> Vec<String> {
    let mut out: Vec<String> = claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            device_line(
                r["request"].as_str().unwrap_or(""),
                &format!(
                    "{}/{}/{}",
                    r["driver"].as_str().unwrap_or(""),
                    r["pool"].as_str().unwrap_or(""),
                    r["device"].as_str().unwrap_or("")
                ),
                &r["consumedCapacity"],
            )
        })
        .collect();
    out.sort();
    out
}

/// `request=device`, with `[capacity=amount,...]` of a `consumed` map
/// that is not empty.
fn device_line(request: &str, device: &str, consumed: &Value) -> String {
    let consumed: Vec<String> = consumed
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if consumed.is_empty() {
        format!("{request}={device}")
    } else {
        format!("{request}={device}[{}]", consumed.join(","))
    }
}

/// The devices kube-scheduler allocated for a bound pod, by the pod's
/// claim name (`extended` for the claim it created for extended
/// resources); empty for a pod without claims.
pub async fn kube_devices(client: &Client, ns: &str, pod: &Value) -> BTreeMap<String, Vec<String>> {
    let a: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource("ResourceClaim"));
    let mut out = BTreeMap::new();
    let mut named: Vec<(String, String)> = pod["spec"]["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c["name"].as_str()?.to_string(),
                c["resourceClaimName"].as_str()?.to_string(),
            ))
        })
        .collect();
    if let Some(c) = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"].as_str() {
        named.push(("extended".into(), c.to_string()));
    }
    for (pod_claim, claim) in named {
        let c = a
            .get(&claim)
            .await
            .unwrap_or_else(|e| panic!("claim {ns}/{claim}: {e}"));
        out.insert(pod_claim, server_devices(&super::plain(&c)));
    }
    out
}

/// The devices wasmsched allocated for the pod in `simulate`'s report,
/// in [`kube_devices`]'s form.
pub fn simulated_devices(report: &Value, pod: &Value) -> BTreeMap<String, Vec<String>> {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("");
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let claims: Vec<&Value> = report["resource_claims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["namespace"] == ns)
        .collect();
    let lines = |c: &Value| -> Vec<String> {
        let mut out: Vec<String> = c["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                device_line(
                    d["request"].as_str().unwrap_or(""),
                    d["device"].as_str().unwrap_or(""),
                    &d["consumed"],
                )
            })
            .collect();
        out.sort();
        out
    };
    let mut out = BTreeMap::new();
    let mut named = Vec::new();
    for c in pod["spec"]["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (Some(pc), Some(claim)) = (c["name"].as_str(), c["resourceClaimName"].as_str()) else {
            continue;
        };
        named.push(claim);
        if let Some(r) = claims.iter().find(|r| r["name"] == claim) {
            out.insert(pc.to_string(), lines(r));
        }
    }
    // The claim made for the pod's extended resources: reserved for it,
    // not one it names.
    if let Some(r) = claims.iter().find(|r| {
        !named.contains(&r["name"].as_str().unwrap_or(""))
            && r["reservedFor"]
                .as_array()
                .is_some_and(|l| l.iter().any(|u| u == name))
    }) {
        out.insert("extended".into(), lines(r));
    }
    out
}
