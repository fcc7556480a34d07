//! Upstream's allocator and plugin test cases
//! (`structured/internal/allocatortesting`, `dynamicresources_test.go`),
//! through the store and the allocator as the plugin drives them.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::allocator::{allocate, Outcome};
use super::store::{DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE};
use super::*;
use crate::framework::objects::object_key;
use crate::framework::plugins::testutil::N;
use crate::framework::DeviceSet;
use crate::model::dra::Claim;
use crate::model::Node;

fn class(name: &str, driver: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}})
}

fn slice(name: &str, node: &str, pool: &str, driver: &str, devices: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

fn claim(name: &str, requests: Value, constraints: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": requests, "constraints": constraints}}})
}

fn exactly(name: &str, class: &str, extra: Value) -> Value {
    let mut e = json!({"deviceClassName": class});
    if let (Some(e), Some(x)) = (e.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({"name": name, "exactly": e})
}

/// Numbers below `n`, the same sequence for the same seed (a linear
/// congruential generator).
fn pseudo_random(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    }
}

struct World {
    store: Store,
}

impl World {
    fn new(objects: &[Value]) -> Self {
        let store = Store::default();
        for o in objects {
            let kind = match o["kind"].as_str() {
                Some("DeviceClass") => &DEVICE_CLASS,
                Some("ResourceSlice") => &RESOURCE_SLICE,
                _ => &RESOURCE_CLAIM,
            };
            store.apply(kind, "v1", o, &object_key(kind, o));
        }
        Self { store }
    }

    fn claim(&self, name: &str) -> Claim {
        (*self.store.claim(&format!("default/{name}")).unwrap()).clone()
    }

    /// The devices each claim gets on `node`, or `None`.
    fn allocate(&self, node: &str, claims: &[&str]) -> Result<Option<Vec<Vec<String>>>, String> {
        let inputs = self.store.inputs();
        let owned: Vec<Claim> = claims.iter().map(|c| self.claim(c)).collect();
        let refs: Vec<&Claim> = owned.iter().collect();
        let node: Node = N::new(node).labels(&[("region", "region-1")]).build();
        match allocate(&inputs, &node, &refs, None) {
            Err(e) => Err(e.0),
            Ok(Outcome::None { .. }) => Ok(None),
            Ok(Outcome::Allocated(rs)) => Ok(Some(rs.into_iter().map(|r| r.devices).collect())),
        }
    }

    fn allocation(&self, node: &str, c: &str) -> Value {
        let inputs = self.store.inputs();
        let claim = self.claim(c);
        let node: Node = N::new(node).build();
        match allocate(&inputs, &node, &[&claim], None) {
            Ok(Outcome::Allocated(rs)) => rs[0].allocation.clone(),
            other => panic!("{other:?}"),
        }
    }
}

fn dev(name: &str, attrs: Value, caps: Value) -> Value {
    json!({"name": name, "attributes": attrs, "capacity": caps})
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn simple_and_other_node() {
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-b",
            json!([dev("device-1", json!({}), json!({}))]),
        ),
        slice(
            "slice-2",
            "node-2",
            "pool-2",
            "driver-a",
            json!([dev("device-1", json!({}), json!({}))]),
        ),
        claim(
            "claim-0",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
    ]);
    assert_eq!(w.allocate("node-1", &["claim-0"]), Ok(None));
    assert_eq!(
        w.allocate("node-2", &["claim-0"]),
        Ok(Some(vec![ids(&["driver-a/pool-2/device-1"])]))
    );
    let a = w.allocation("node-2", "claim-0");
    assert_eq!(
        a["nodeSelector"],
        json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]})
    );
    assert_eq!(
        a["devices"]["results"],
        json!([{"request": "req-0", "driver": "driver-a", "pool": "pool-2", "device": "device-1"}])
    );
}

fn sized(name: &str, mem: &str) -> Value {
    dev(name, json!({}), json!({"memory": {"value": mem}}))
}

fn at_least(req: &str, mem: &str) -> Value {
    exactly(
        req,
        "class-a",
        json!({"selectors": [{"cel": {"expression": format!("device.capacity[\"driver-a\"].memory.compareTo(quantity(\"{mem}\")) >= 0")}}]}),
    )
}

#[test]
fn cel_on_capacity_with_backtracking_over_requests_and_claims() {
    // Small and large, listed large first: the first try (req-0 takes the
    // large device) fails req-1, so the search goes back.
    let objects = |devices: Value| {
        vec![
            class("class-a", "driver-a"),
            slice("slice-1", "node-1", "pool-1", "driver-a", devices),
            claim(
                "both",
                json!([at_least("req-0", "1Gi"), at_least("req-1", "2Gi")]),
                json!([]),
            ),
            claim("small", json!([at_least("req-0", "1Gi")]), json!([])),
            claim("large", json!([at_least("req-0", "2Gi")]), json!([])),
        ]
    };
    for devices in [
        json!([sized("device-1", "1Gi"), sized("device-2", "2Gi")]),
        json!([sized("device-2", "2Gi"), sized("device-1", "1Gi")]),
    ] {
        let w = World::new(&objects(devices));
        assert_eq!(
            w.allocate("node-1", &["both"]),
            Ok(Some(vec![ids(&[
                "driver-a/pool-1/device-1",
                "driver-a/pool-1/device-2"
            ])]))
        );
        assert_eq!(
            w.allocate("node-1", &["small", "large"]),
            Ok(Some(vec![
                ids(&["driver-a/pool-1/device-1"]),
                ids(&["driver-a/pool-1/device-2"])
            ]))
        );
    }
}

#[test]
fn match_attribute_constraints() {
    let d = |name: &str, version: &str, s: &str| {
        dev(
            name,
            json!({"driverVersion": {"version": version}, "stringAttribute": {"string": s}}),
            json!({}),
        )
    };
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-a",
            json!([
                d("device-1", "1.0.0", "a"),
                d("device-2", "2.0.0", "b"),
                d("device-3", "3.0.0", "b")
            ]),
        ),
        claim(
            "claim-0",
            json!([
                exactly("req-0", "class-a", json!({})),
                exactly("req-1", "class-a", json!({}))
            ]),
            json!([
                {"requests": ["req-0"], "matchAttribute": "driver-a/driverVersion"},
                {"matchAttribute": "driver-a/stringAttribute"}
            ]),
        ),
        claim(
            "numa",
            json!([exactly("req-0", "class-a", json!({"count": 2}))]),
            json!([{"matchAttribute": "driver-a/driverVersion"}]),
        ),
        claim(
            "numa-all",
            json!([exactly(
                "req-0",
                "class-a",
                json!({"allocationMode": "All"})
            )]),
            json!([{"matchAttribute": "driver-a/driverVersion"}]),
        ),
    ]);
    // Upstream's "with-constraint-for-request-retry".
    assert_eq!(
        w.allocate("node-1", &["claim-0"]),
        Ok(Some(vec![ids(&[
            "driver-a/pool-1/device-2",
            "driver-a/pool-1/device-3"
        ])]))
    );
    assert_eq!(w.allocate("node-1", &["numa"]), Ok(None));
    assert_eq!(
        w.allocate("node-1", &["numa-all"]),
        Err("claim default/numa-all, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied".into())
    );
}

#[test]
fn all_mode_and_incomplete_pools() {
    let mut incomplete = slice(
        "slice-2",
        "node-2",
        "pool-2",
        "driver-a",
        json!([dev("device-1", json!({}), json!({}))]),
    );
    incomplete["spec"]["pool"]["resourceSliceCount"] = json!(2);
    let w = World::new(&[
        class("class-a", "driver-a"),
        class("class-b", "driver-b"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-a",
            json!([
                dev("device-1", json!({}), json!({})),
                dev("device-2", json!({}), json!({}))
            ]),
        ),
        slice(
            "slice-b",
            "node-1",
            "pool-1",
            "driver-b",
            json!([dev("device-1", json!({}), json!({}))]),
        ),
        incomplete,
        claim(
            "all",
            json!([exactly(
                "req-0",
                "class-a",
                json!({"allocationMode": "All"})
            )]),
            json!([]),
        ),
        claim(
            "one-b",
            json!([exactly("req-0", "class-b", json!({}))]),
            json!([]),
        ),
        claim(
            "one-a",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
    ]);
    assert_eq!(
        w.allocate("node-1", &["all", "one-b"]),
        Ok(Some(vec![
            ids(&["driver-a/pool-1/device-1", "driver-a/pool-1/device-2"]),
            ids(&["driver-b/pool-1/device-1"])
        ]))
    );
    assert_eq!(
        w.allocate("node-2", &["all"]),
        Err("claim default/all, request req-0: asks for all devices, but resource pool driver-a/pool-2 is currently being updated".into())
    );
    // ExactCount skips the incomplete pool.
    assert_eq!(w.allocate("node-2", &["one-a"]), Ok(None));
    // All with no matching device fails without an error.
    assert_eq!(w.allocate("node-3", &["all"]), Ok(None));
}

#[test]
fn first_available_with_backtracking_and_its_score() {
    let sub = |name: &str, mem: &str| json!({"name": name, "deviceClassName": "class-a", "selectors": [{"cel": {"expression": format!("device.capacity[\"driver-a\"].memory.compareTo(quantity(\"{mem}\")) >= 0")}}]});
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-a",
            json!([sized("device-1", "8Gi")]),
        ),
        slice(
            "slice-2",
            "node-1",
            "pool-2",
            "driver-a",
            json!([sized("device-2", "4Gi")]),
        ),
        claim(
            "claim-0",
            json!([
                {"name": "req-0", "firstAvailable": [sub("subReq-0", "8Gi"), sub("subReq-1", "4Gi")]},
                at_least("req-1", "8Gi")
            ]),
            json!([]),
        ),
    ]);
    assert_eq!(
        w.allocate("node-1", &["claim-0"]),
        Ok(Some(vec![ids(&[
            "driver-a/pool-2/device-2",
            "driver-a/pool-1/device-1"
        ])]))
    );
    let a = w.allocation("node-1", "claim-0");
    assert_eq!(a["devices"]["results"][0]["request"], "req-0/subReq-1");
    let inputs = w.store.inputs();
    let c = w.claim("claim-0");
    let Ok(Outcome::Allocated(rs)) = allocate(&inputs, &N::new("node-1").build(), &[&c], None)
    else {
        panic!()
    };
    assert_eq!(rs[0].score, 8 - 1, "the second alternative scores 7");
    // Enumerating sets for rankers (choosing the first) allocates the
    // same: the subrequest, its score and the allocation's config.
    let mut seen = 0;
    let Ok(Outcome::Allocated(ranked)) = allocator::allocate_ranked(
        &inputs,
        &N::new("node-1").build(),
        &[&c],
        None,
        32,
        |input, ids| {
            seen = input.sets.len();
            assert_eq!(ids.len(), input.devices.len());
            0
        },
        true,
    ) else {
        panic!()
    };
    assert_eq!(seen, 1, "one way to allocate");
    assert_eq!(ranked, rs);
}

#[test]
fn partitionable_devices_share_counters() {
    let mut s = slice(
        "slice-1",
        "node-1",
        "pool-1",
        "driver-a",
        json!([
            {"name": "device-1", "consumesCounters": [{"counterSet": "gpu", "counters": {"memory": {"value": "4Gi"}}}]},
            {"name": "device-2", "consumesCounters": [{"counterSet": "gpu", "counters": {"memory": {"value": "6Gi"}}}]},
            {"name": "device-3", "consumesCounters": [{"counterSet": "gpu", "counters": {"memory": {"value": "4Gi"}}}]}
        ]),
    );
    s["spec"]["sharedCounters"] =
        json!([{"name": "gpu", "counters": {"memory": {"value": "8Gi"}}}]);
    let w = World::new(&[
        class("class-a", "driver-a"),
        s,
        claim(
            "claim-0",
            json!([
                exactly("req-0", "class-a", json!({})),
                exactly("req-1", "class-a", json!({}))
            ]),
            json!([]),
        ),
    ]);
    assert_eq!(
        w.allocate("node-1", &["claim-0"]),
        Ok(Some(vec![ids(&[
            "driver-a/pool-1/device-1",
            "driver-a/pool-1/device-3"
        ])]))
    );
}

#[test]
fn taints_tolerations_and_admin_access() {
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-a",
            json!([
                {"name": "device-1", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
                {"name": "device-2", "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}
            ]),
        ),
        claim(
            "plain",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
        claim(
            "tolerating",
            json!([exactly(
                "req-0",
                "class-a",
                json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute"}]})
            )]),
            json!([]),
        ),
        claim(
            "admin",
            json!([exactly("req-0", "class-a", json!({"adminAccess": true}))]),
            json!([]),
        ),
    ]);
    assert_eq!(w.allocate("node-1", &["plain"]), Ok(None));
    assert_eq!(
        w.allocate("node-1", &["tolerating"]),
        Ok(Some(vec![ids(&["driver-a/pool-1/device-2"])]))
    );
    let a = w.allocation("node-1", "tolerating");
    assert_eq!(
        a["devices"]["results"][0]["tolerations"],
        json!([{"key": "k", "operator": "Exists", "effect": "NoExecute"}])
    );
    assert_eq!(
        w.allocate("node-1", &["admin"]),
        Ok(None),
        "admin access does not bypass taints"
    );
}

#[test]
fn devices_in_use_are_skipped_but_admin_access_shares_them() {
    let mut taken = claim(
        "taken",
        json!([exactly("req-0", "class-a", json!({}))]),
        json!([]),
    );
    taken["status"] = json!({"allocation": {"devices": {"results": [
        {"request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": "device-1"}]}}});
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-a",
            json!([dev("device-1", json!({}), json!({}))]),
        ),
        taken,
        claim(
            "mine",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
        claim(
            "admin",
            json!([exactly("req-0", "class-a", json!({"adminAccess": true}))]),
            json!([]),
        ),
    ]);
    assert_eq!(w.allocate("node-1", &["mine"]), Ok(None));
    assert_eq!(
        w.allocate("node-1", &["admin"]),
        Ok(Some(vec![ids(&["driver-a/pool-1/device-1"])]))
    );
}

#[test]
fn a_reserved_allocation_is_in_use_for_the_next_pod() {
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "node-1",
            "pool-1",
            "driver-a",
            json!([dev("device-1", json!({}), json!({}))]),
        ),
        claim(
            "first",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
        claim(
            "second",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
    ]);
    let first = w.claim("first");
    assert!(w.store.reserve(
        &first,
        "pod-1",
        ids(&["driver-a/pool-1/device-1"]),
        Vec::new()
    ));
    assert_eq!(w.allocate("node-1", &["second"]), Ok(None), "in flight");
    w.store.unreserve("pod-1");
    assert_eq!(
        w.allocate("node-1", &["second"]),
        Ok(Some(vec![ids(&["driver-a/pool-1/device-1"])]))
    );
}

#[test]
fn cel_runtime_errors_name_the_claim_selector_and_device() {
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice(
            "slice-1",
            "worker",
            "worker",
            "driver-a",
            json!([dev("instance-1", json!({}), json!({}))]),
        ),
        claim(
            "my-pod-my-resource",
            json!([exactly(
                "req-1",
                "class-a",
                json!({"selectors": [{"cel": {"expression": "device.attributes[\"driver-a\"].healthy"}}]})
            )]),
            json!([]),
        ),
    ]);
    assert_eq!(
        w.allocate("worker", &["my-pod-my-resource"]),
        Err("claim default/my-pod-my-resource: selector #0 on device driver-a/worker/instance-1: CEL runtime error: no such key: healthy. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields".into())
    );
}

#[test]
fn network_attached_devices_merge_their_selectors() {
    let net = |name: &str, pool: &str, sel: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "driver-a", "nodeSelector": {"nodeSelectorTerms": [sel]},
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "device-1"}]}})
    };
    let region =
        json!({"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]});
    let w = World::new(&[
        class("class-a", "driver-a"),
        net("s1", "pool-1", region.clone()),
        net("s2", "pool-2", region.clone()),
        claim(
            "c",
            json!([exactly("req-0", "class-a", json!({"count": 2}))]),
            json!([]),
        ),
    ]);
    assert_eq!(
        w.allocate("node-1", &["c"]),
        Ok(Some(vec![ids(&[
            "driver-a/pool-1/device-1",
            "driver-a/pool-2/device-1"
        ])]))
    );
    let inputs = w.store.inputs();
    let c = w.claim("c");
    let n = N::new("node-1").labels(&[("region", "region-1")]).build();
    let Ok(Outcome::Allocated(rs)) = allocate(&inputs, &n, &[&c], None) else {
        panic!()
    };
    assert_eq!(
        rs[0].allocation["nodeSelector"],
        json!({"nodeSelectorTerms": [region]})
    );
}

#[test]
fn v1beta1_objects_are_read_as_v1() {
    let store = Store::default();
    let slice = json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "basic": {"attributes": {"model": {"string": "A100"}}}}]}});
    let claim = json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default", "uid": "u"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu", "count": 2}]}}});
    store.apply(&RESOURCE_SLICE, "v1beta1", &slice, "s");
    store.apply(&RESOURCE_CLAIM, "v1beta1", &claim, "default/c");
    let c = store.claim("default/c").unwrap();
    assert_eq!(c.requests[0].alternatives[0].class, "gpu");
    assert_eq!(
        c.requests[0].alternatives[0].mode,
        crate::model::dra::Mode::ExactCount(2)
    );
    let inputs = store.inputs();
    assert_eq!(inputs.slices[0].slice.devices[0].attributes.len(), 1);
    let seen: HashSet<String> = HashSet::new();
    store.retain(&RESOURCE_SLICE, &seen);
    assert!(store.inputs().slices.is_empty());
}

#[test]
fn bad_objects_are_one_message_for_the_pods_that_use_them() {
    let bad = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x", "count": "two"}}]}}});
    assert!(check_claim(&bad)
        .unwrap_err()
        .starts_with("spec.devices.requests[0].exactly.count"));
    let store = Store::default();
    store.apply(&RESOURCE_CLAIM, "v1", &bad, "default/c");
    let pod = crate::framework::plugins::testutil::P::new("p")
        .spec(
            "resourceClaims",
            json!([{"name": "gpu", "resourceClaimName": "c"}]),
        )
        .build();
    let e = resolve(&store, &pod).unwrap_err();
    assert!(
        e.starts_with(
            "ResourceClaim default/c cannot be used: spec.devices.requests[0].exactly.count"
        ),
        "{e}"
    );
}

/// PreEnqueue's refusal names what can lift it: the claim at fault
/// (missing, invalid, being deleted, another pod's), or only the pod's
/// update (a template's claim not in its status yet).
#[test]
fn a_pod_held_for_its_claims_waits_for_the_claim_at_fault() {
    use crate::framework::points::Release;
    use crate::framework::PreEnqueuePlugin;
    let plugin = DynamicResources {
        store: Arc::new(Store::default()),
        filter_timeout: None,
        binding_timeout: binding_conditions::DEFAULT_BINDING_TIMEOUT,
        ranked_sets: 0,
    };
    let apply = |o: Value| {
        let kind = if o["kind"] == "DeviceClass" {
            &DEVICE_CLASS
        } else {
            &RESOURCE_CLAIM
        };
        plugin.store.apply(kind, "v1", &o, &object_key(kind, &o));
    };
    apply(class("class-a", "driver-a"));
    let on_claim = |key: &str| Release::Object {
        kind: "ResourceClaim",
        key: key.into(),
    };
    let named = crate::framework::plugins::testutil::P::new("p")
        .spec(
            "resourceClaims",
            json!([{"name": "a", "resourceClaimName": "ca"}, {"name": "b", "resourceClaimName": "cb"}]),
        )
        .build();
    assert!(plugin.pre_enqueue(&named).is_err());
    assert_eq!(plugin.released_by(&named), on_claim("default/ca"));
    apply(claim(
        "ca",
        json!([exactly("r", "class-a", json!({}))]),
        json!([]),
    ));
    assert_eq!(plugin.released_by(&named), on_claim("default/cb"));
    apply(claim(
        "cb",
        json!([exactly("r", "class-a", json!({}))]),
        json!([]),
    ));
    assert_eq!(plugin.pre_enqueue(&named), Ok(()));
    let templated = crate::framework::plugins::testutil::P::new("q")
        .spec(
            "resourceClaims",
            json!([{"name": "a", "resourceClaimTemplateName": "t"}]),
        )
        .build();
    assert!(plugin.pre_enqueue(&templated).is_err());
    assert_eq!(plugin.released_by(&templated), Release::PodUpdate);
}

/// The devices taken are kept as claims and reservations change (not
/// rebuilt per cycle): after every step of a long pseudo-random sequence
/// of claim updates, deletions, reservations and unreservations they equal
/// what the claims and the reservations in flight say; and a new slice is
/// seen by the next allocation (the index is rebuilt).
#[test]
fn the_devices_taken_follow_claims_and_reservations() {
    let devices: Vec<Value> = (0..4)
        .map(|d| dev(&format!("d{d}"), json!({}), json!({})))
        .collect();
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice("slice-1", "node-1", "pool-1", "driver-a", json!(devices)),
    ]);
    let id = |d: u64| format!("driver-a/pool-1/d{d}");
    // The model: claim -> (allocated device, admin); claim uid -> (pod, device) in flight.
    let mut allocated: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    let mut flight: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut present: HashSet<u64> = HashSet::new();
    let mut next = pseudo_random(7);
    for step in 0..600 {
        let c = next(5);
        let name = format!("c{c}");
        match next(5) {
            0 | 1 => {
                let mut o = claim(
                    &name,
                    json!([exactly("req-0", "class-a", json!({}))]),
                    json!([]),
                );
                if next(2) == 0 {
                    let (d, admin) = (next(4), next(4) == 0);
                    o["status"] = json!({"allocation": {"devices": {"results": [
                        {"request": "req-0", "driver": "driver-a", "pool": "pool-1",
                         "device": format!("d{d}"), "adminAccess": admin}]}}});
                    allocated.insert(c, (d, admin));
                    flight.remove(&c);
                } else {
                    allocated.remove(&c);
                }
                w.store
                    .apply(&RESOURCE_CLAIM, "v1", &o, &format!("default/{name}"));
                present.insert(c);
            }
            2 => {
                w.store.delete(&RESOURCE_CLAIM, &format!("default/{name}"));
                allocated.remove(&c);
                flight.remove(&c);
                present.remove(&c);
            }
            3 if present.contains(&c) => {
                let (pod, d) = (next(3), next(4));
                let ok = w.store.reserve(
                    &w.claim(&name),
                    &format!("pod-{pod}"),
                    vec![id(d)],
                    Vec::new(),
                );
                let expected = flight.get(&c).is_none_or(|(p, _)| *p == pod);
                assert_eq!(ok, expected, "step {step}: reserve c{c} for pod-{pod}");
                flight.entry(c).or_insert((pod, d));
            }
            _ => {
                let pod = next(3);
                w.store.unreserve(&format!("pod-{pod}"));
                flight.retain(|_, (p, _)| *p != pod);
            }
        }
        let mut expected: Vec<String> = allocated
            .values()
            .filter(|(_, admin)| !admin)
            .map(|(d, _)| id(*d))
            .chain(flight.values().map(|(_, d)| id(*d)))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        expected.sort();
        let mut taken: Vec<String> = w.store.inputs().in_use.iter().cloned().collect();
        taken.sort();
        assert_eq!(taken, expected, "step {step}");
    }
    // A second slice on another node: the next allocation sees it.
    w.store.apply(
        &RESOURCE_SLICE,
        "v1",
        &slice(
            "slice-2",
            "node-2",
            "pool-2",
            "driver-a",
            json!([dev("e0", json!({}), json!({}))]),
        ),
        "slice-2",
    );
    w.store.apply(
        &RESOURCE_CLAIM,
        "v1",
        &claim(
            "fresh",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
        "default/fresh",
    );
    assert_eq!(
        w.allocate("node-2", &["fresh"]),
        Ok(Some(vec![ids(&["driver-a/pool-2/e0"])]))
    );
}

/// A node's search is kept by its pools' generations and reused while
/// they stay: over a pseudo-random sequence of allocations, releases and
/// reservations on two nodes, every search through the store's inputs
/// (kept searches) finds the devices, the sets and the taken flags that a
/// new index (nothing kept) finds, for claims of several shapes; and the
/// kept ones are used (the node nothing happened to is not searched
/// again).
#[test]
fn kept_searches_answer_as_a_new_search_would() {
    use super::allocator::{allocate_ranked, Inputs};
    let devices = |n: usize| -> Value {
        json!((0..n)
            .map(|d| dev(&format!("d{d}"), json!({"root": {"int": d / 2}}), json!({})))
            .collect::<Vec<_>>())
    };
    let w = World::new(&[
        class("class-a", "driver-a"),
        slice("slice-1", "node-1", "pool-1", "driver-a", devices(6)),
        slice("slice-2", "node-2", "pool-2", "driver-a", devices(6)),
        claim(
            "one",
            json!([exactly("req-0", "class-a", json!({}))]),
            json!([]),
        ),
        claim(
            "pair",
            json!([exactly("req-0", "class-a", json!({"count": 2}))]),
            json!([{"matchAttribute": "driver-a/root"}]),
        ),
    ]);
    let shapes = [w.claim("one"), w.claim("pair")];
    // What one search answers: per solution the devices, and the sets and
    // taken flags a ranker sees.
    type Answer = Option<(Vec<Vec<String>>, Vec<bool>, Vec<DeviceSet>)>;
    let search = |inputs: &Inputs, node: &str, claim: &Claim| -> Answer {
        let node: Node = N::new(node).build();
        let mut seen = None;
        let outcome = allocate_ranked(
            inputs,
            &node,
            &[claim],
            None,
            8,
            |input, _| {
                seen = Some((input.allocated.clone(), input.sets.clone()));
                input.sets.len() - 1
            },
            false,
        )
        .unwrap();
        match outcome {
            Outcome::None { .. } => None,
            Outcome::Allocated(rs) => {
                let (allocated, sets) = seen.unwrap();
                Some((rs.into_iter().map(|r| r.devices).collect(), allocated, sets))
            }
        }
    };
    let mut next = pseudo_random(11);
    let mut across = 0;
    for step in 0..300 {
        let (node, c) = (1 + next(2), next(8));
        let name = format!("held-{node}-{c}");
        match next(4) {
            0 | 1 => {
                let mut o = claim(
                    &name,
                    json!([exactly("req-0", "class-a", json!({}))]),
                    json!([]),
                );
                o["status"] = json!({"allocation": {"devices": {"results": [
                    {"request": "req-0", "driver": "driver-a", "pool": format!("pool-{node}"),
                     "device": format!("d{}", next(6))}]}}});
                w.store
                    .apply(&RESOURCE_CLAIM, "v1", &o, &format!("default/{name}"));
            }
            2 => w.store.delete(&RESOURCE_CLAIM, &format!("default/{name}")),
            _ => {
                let c = w.claim("one");
                let device = format!("driver-a/pool-{node}/d{}", next(6));
                if !w
                    .store
                    .reserve(&c, &format!("pod-{step}"), vec![device], Vec::new())
                {
                    w.store.unreserve(&format!("pod-{}", step - 1));
                }
            }
        }
        let kept = w.store.inputs();
        let fresh = Inputs::new(
            kept.slices.clone(),
            kept.classes.clone(),
            kept.in_use.iter().cloned().collect(),
            kept.cel.clone(),
        );
        for node in ["node-1", "node-2"] {
            for shape in &shapes {
                let want = search(&fresh, node, shape);
                let hits = kept.memo_hits();
                assert_eq!(search(&kept, node, shape), want, "step {step}, {node}");
                across += kept.memo_hits() - hits;
                // The second time, from what the first kept.
                let hits = kept.memo_hits();
                assert_eq!(search(&kept, node, shape), want, "step {step}, {node}");
                assert_eq!(kept.memo_hits(), hits + 1, "step {step}, {node}");
            }
        }
    }
    // A step changes at most two pools: most first searches of a step
    // were kept by the step before.
    assert!(across > 800, "{across} of 1200 first searches kept");
}
