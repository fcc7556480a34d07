//! Upstream's consumable-capacity and DeviceTaintRule allocator cases
//! (`structured/internal/allocatortesting`: `consumable-capacity-*`,
//! `allow-multiple-allocations-*`), through the store and the allocator
//! as the plugin drives them.

use serde_json::{json, Value};

use super::allocator::{allocate, Outcome};
use super::store::{Store, DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE};
use super::taint_rules::DEVICE_TAINT_RULE;
use crate::framework::objects::object_key;
use crate::framework::plugins::testutil::N;
use crate::model::dra::Claim;

const DRIVER: &str = "driver-a";

fn class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "class-a"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"driver-a\""}}]}})
}

/// A multi-allocatable device; `policy`: upstream's
/// `withCapacityRequestPolicyRange` (default 2, min 2, step 2, max 4).
fn device(name: &str, value: &str, policy: bool) -> Value {
    let mut cap = json!({"value": value});
    if policy {
        cap["requestPolicy"] =
            json!({"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}});
    }
    json!({"name": name, "allowMultipleAllocations": true, "capacity": {"capacity-0": cap}})
}

fn slice(devices: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "slice-1"},
        "spec": {"driver": DRIVER, "nodeName": "node-1",
            "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

/// A claim with one request `req-0` for one device, asking for
/// `capacity` of `capacity-0` when given.
fn claim(name: &str, capacity: Option<&str>) -> Value {
    let mut exactly = json!({"deviceClassName": "class-a"});
    if let Some(c) = capacity {
        exactly["capacity"] = json!({"requests": {"capacity-0": c}});
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}}})
}

/// A claim already allocated a share of `device` consuming `consumed`.
fn allocated(name: &str, device: &str, consumed: &str) -> Value {
    let mut c = claim(name, Some(consumed));
    c["status"] = json!({"allocation": {"devices": {"results": [{
        "request": "req-0", "driver": DRIVER, "pool": "pool-1", "device": device,
        "shareID": "2b4c0e5c-8a57-4f4e-9d1c-0d1f2a3b4c5d",
        "consumedCapacity": {"capacity-0": consumed}}]}}});
    c
}

fn store(objects: &[Value]) -> Store {
    let store = Store::default();
    for o in objects {
        let kind = match o["kind"].as_str() {
            Some("DeviceClass") => &DEVICE_CLASS,
            Some("ResourceSlice") => &RESOURCE_SLICE,
            Some("DeviceTaintRule") => &DEVICE_TAINT_RULE,
            _ => &RESOURCE_CLAIM,
        };
        store.apply(kind, "v1", o, &object_key(kind, o));
    }
    store
}

/// Per claim, the devices and consumed `capacity-0` (`-`: none
/// written), or `None` when the claims do not fit together.
fn run(store: &Store, claims: &[&str]) -> Result<Option<Vec<(String, String)>>, String> {
    let owned: Vec<Claim> = claims
        .iter()
        .map(|c| (*store.claim(&format!("default/{c}")).unwrap()).clone())
        .collect();
    let refs: Vec<&Claim> = owned.iter().collect();
    let node = N::new("node-1").build();
    match allocate(&store.inputs(), &node, &refs, None) {
        Err(e) => Err(e.0),
        Ok(Outcome::None { .. }) => Ok(None),
        Ok(Outcome::Allocated(rs)) => Ok(Some(
            rs.iter()
                .map(|r| {
                    let res = &r.allocation["devices"]["results"][0];
                    let consumed = res["consumedCapacity"]["capacity-0"]
                        .as_str()
                        .unwrap_or("-")
                        .to_string();
                    (
                        res["device"].as_str().unwrap_or_default().to_string(),
                        consumed,
                    )
                })
                .collect(),
        )),
    }
}

fn pairs(v: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
    Some(
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    )
}

/// A case: name, objects beside the class, the claims allocated
/// together, the expected (device, consumed) per claim.
type Case<'a> = (
    &'a str,
    Vec<Value>,
    Vec<&'a str>,
    Option<Vec<(String, String)>>,
);

fn check(cases: Vec<Case>) {
    for (name, objects, claims, want) in cases {
        let mut all = vec![class()];
        all.extend(objects);
        let s = store(&all);
        assert_eq!(run(&s, &claims), Ok(want), "{name}");
    }
}

/// Sharing without a policy, defaults.
#[test]
fn consumable_capacity_upstream_cases() {
    check(vec![
        (
            "multi-allocatable-device-with-missing-capacity-request",
            vec![
                slice(
                    json!([{"name": "device-1", "allowMultipleAllocations": true, "capacity": {"capacity-1": {"value": "1"}}}]),
                ),
                claim("claim-0", Some("1")),
            ],
            vec!["claim-0"],
            None,
        ),
        (
            "multi-allocatable-device-without-capacity-without-capacity-request",
            vec![
                slice(json!([{"name": "device-1", "allowMultipleAllocations": true}])),
                claim("claim-0", None),
                claim("claim-1", None),
            ],
            vec!["claim-0", "claim-1"],
            pairs(&[("device-1", "-"), ("device-1", "-")]),
        ),
        (
            "multi-allocatable-device-without-policy-without-capacity-request",
            vec![
                slice(json!([
                    device("device-1", "1", false),
                    device("device-2", "1", false)
                ])),
                claim("claim-0", None),
                claim("claim-1", None),
            ],
            vec!["claim-0", "claim-1"],
            pairs(&[("device-1", "1"), ("device-2", "1")]),
        ),
        (
            "multi-allocatable-device-without-policy-without-capacity-request-block",
            vec![
                slice(json!([device("device-1", "2", false)])),
                claim("claim-0", None),
                claim("claim-1", None),
            ],
            vec!["claim-0", "claim-1"],
            None,
        ),
        (
            "multi-allocatable-device-without-policy-with-capacity-request",
            vec![
                slice(json!([device("device-1", "2", false)])),
                claim("claim-0", Some("1")),
                claim("claim-1", Some("1")),
            ],
            vec!["claim-0", "claim-1"],
            pairs(&[("device-1", "1"), ("device-1", "1")]),
        ),
        (
            "multi-allocatable-device-with-policy-without-capacity-request",
            vec![
                slice(json!([device("device-1", "4", true)])),
                claim("claim-0", None),
                claim("claim-1", None),
            ],
            vec!["claim-0", "claim-1"],
            pairs(&[("device-1", "2"), ("device-1", "2")]),
        ),
    ]);
}

/// Range policies, allocated shares, dedicated devices.
#[test]
fn consumable_capacity_upstream_policy_cases() {
    check(vec![
        (
            "multi-allocatable-device-with-range-policy-with-capacity-request",
            vec![
                slice(json!([device("device-1", "4", true)])),
                claim("claim-0", Some("1")),
                claim("claim-1", Some("1")),
            ],
            vec!["claim-0", "claim-1"],
            pairs(&[("device-1", "2"), ("device-1", "2")]),
        ),
        (
            "multi-allocatable-device-with-range-policy-step",
            vec![
                slice(json!([device("device-1", "4", true)])),
                claim("claim-0", Some("3")),
            ],
            vec!["claim-0"],
            pairs(&[("device-1", "4")]),
        ),
        (
            "multi-allocatable-device-with-exceeded-consumable-capacity-request",
            vec![
                slice(json!([device("device-1", "2", true)])),
                claim("claim-0", Some("1")),
                claim("claim-1", Some("2")),
            ],
            vec!["claim-0", "claim-1"],
            None,
        ),
        (
            "multi-allocatable-device-with-request-over-max-sharing-policy",
            vec![
                slice(json!([device("device-1", "10", true)])),
                claim("claim-0", Some("6")),
            ],
            vec!["claim-0"],
            None,
        ),
        (
            "multi-allocatable-device-with-allocated-capacity-use-remaining",
            vec![
                slice(json!([device("device-1", "4", true)])),
                allocated("other", "device-1", "2"),
                claim("claim-0", Some("2")),
            ],
            vec!["claim-0"],
            pairs(&[("device-1", "2")]),
        ),
        (
            "multi-allocatable-device-with-allocated-capacity-next-device",
            vec![
                slice(json!([
                    device("device-1", "2", true),
                    device("device-2", "2", true)
                ])),
                allocated("other", "device-1", "2"),
                claim("claim-0", Some("2")),
            ],
            vec!["claim-0"],
            pairs(&[("device-2", "2")]),
        ),
        (
            "dedicated-device-with-consumable-capacity-request",
            vec![
                slice(json!([{"name": "device-1", "capacity": {"capacity-0": {"value": "1"}}}])),
                claim("claim-0", Some("1")),
            ],
            vec!["claim-0"],
            pairs(&[("device-1", "-")]),
        ),
        (
            "dedicated-device-with-multiple-consumable-capacity-request",
            vec![
                slice(
                    json!([{"name": "device-1", "capacity": {"capacity-0": {"value": "2",
                "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}}}}]),
                ),
                claim("claim-0", Some("1")),
                claim("claim-1", Some("1")),
            ],
            vec!["claim-0", "claim-1"],
            None,
        ),
        (
            "dedicated device, request over its capacity",
            vec![
                slice(json!([{"name": "device-1", "capacity": {"capacity-0": {"value": "1"}}}])),
                claim("claim-0", Some("2")),
            ],
            vec!["claim-0"],
            None,
        ),
    ]);
}

/// `consumable-capacity-range-policy-overflow-aborts-not-skip`: a request
/// the range arithmetic cannot represent is an error, not a skipped
/// device.
#[test]
fn unrepresentable_capacity_request_aborts() {
    let s = store(&[
        class(),
        slice(json!([device("device-1", "4", true)])),
        claim("claim-0", Some("18446744073709551619")),
    ]);
    let e = run(&s, &["claim-0"]).unwrap_err();
    assert!(
        e.starts_with("claim default/claim-0, request req-0: checking capacity for device driver-a/pool-1/device-1: capacity \"capacity-0\": capacity request cannot be represented"),
        "{e}"
    );
}

/// The written allocation: a share id per result, the consumed capacity
/// in the step's format; the in-flight share counts against the next pod.
#[test]
fn allocation_records_share_and_capacity() {
    let mut d = device("gpu-0", "80Gi", false);
    d["capacity"]["capacity-0"]["requestPolicy"] =
        json!({"default": "8Gi", "validRange": {"min": "4Gi", "step": "4Gi"}});
    let s = store(&[
        class(),
        slice(json!([d])),
        claim("a", Some("30Gi")),
        claim("b", Some("50Gi")),
    ]);
    let a = (*s.claim("default/a").unwrap()).clone();
    let node = N::new("node-1").build();
    let Ok(Outcome::Allocated(rs)) = allocate(&s.inputs(), &node, &[&a], None) else {
        panic!("not allocated");
    };
    let r = &rs[0].allocation["devices"]["results"][0];
    assert_eq!(r["consumedCapacity"], json!({"capacity-0": "32Gi"}));
    assert_eq!(r["shareID"].as_str().map(str::len), Some(36));
    assert_eq!(rs[0].shares.len(), 1);
    // Reserved: 32Gi of 80Gi taken, 50Gi (52Gi rounded) no longer fits.
    assert!(s.reserve(&a, "pod-a", Vec::new(), rs[0].shares.clone()));
    assert_eq!(run(&s, &["b"]), Ok(None));
    s.unreserve("pod-a");
    assert_eq!(run(&s, &["b"]), Ok(pairs(&[("gpu-0", "52Gi")])));
}

/// DeviceTaintRules: a NoSchedule rule keeps claims without a toleration
/// off the device; one with it gets the device; the rule's deletion
/// frees it (`tainted-*` cases with the taint from a rule).
#[test]
fn device_taint_rules_taint_selected_devices() {
    let devices = json!([{"name": "device-1"}, {"name": "device-2"}]);
    let rule = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": "pool-1", "device": "device-1"},
                 "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}}});
    let mut tolerant = claim("tolerant", None);
    tolerant["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] =
        json!([{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]);
    let s = store(&[
        class(),
        slice(devices),
        rule.clone(),
        claim("plain", None),
        tolerant,
    ]);
    assert_eq!(run(&s, &["plain"]), Ok(pairs(&[("device-2", "-")])));
    assert_eq!(run(&s, &["tolerant"]), Ok(pairs(&[("device-1", "-")])));
    // Both devices tainted: the plain claim has none left.
    let mut all = rule.clone();
    all["metadata"]["name"] = json!("all");
    all["spec"]["deviceSelector"] = json!({"driver": DRIVER});
    s.apply(&DEVICE_TAINT_RULE, "v1", &all, "all");
    assert_eq!(run(&s, &["plain"]), Ok(None));
    s.delete(&DEVICE_TAINT_RULE, "all");
    s.delete(&DEVICE_TAINT_RULE, "r");
    assert_eq!(run(&s, &["plain"]), Ok(pairs(&[("device-1", "-")])));
}

/// Device rankers see a shared device holding shares of other claims as
/// allocated (and one without shares as free), so a policy can fill
/// fractional GPUs in use first.
#[test]
fn rankers_see_shared_devices_in_use_as_allocated() {
    let s = store(&[
        class(),
        slice(json!([
            device("device-1", "4", true),
            device("device-2", "4", true)
        ])),
        allocated("other", "device-1", "2"),
        claim("claim-0", Some("2")),
    ]);
    let c = (*s.claim("default/claim-0").unwrap()).clone();
    let node = N::new("node-1").build();
    let mut seen = Vec::new();
    let out = super::allocator::allocate_ranked(
        &s.inputs(),
        &node,
        &[&c],
        None,
        4,
        |input, _| {
            seen = input.allocated.clone();
            0
        },
        true,
    );
    assert!(matches!(out, Ok(Outcome::Allocated(_))), "{out:?}");
    assert_eq!(seen, [true, false]);
}
