//! DynamicResources with extended resources backed by DRA and with device
//! binding conditions, through PreFilter, Filter, Reserve and PreBind as
//! the cycle drives them (upstream's `dynamicresources_test.go` cases
//! "bound-claim-with-failed-binding", "bound-claim-with-timed-out-binding"
//! and the extended resource cases).

use serde_json::{json, Value};

use super::store::{DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE};
use super::*;
use crate::framework::objects::object_key;
use crate::framework::plugins::testutil::{cluster, ctx, N, P};
use crate::framework::{PreFilterPlugin, ReservePlugin};

fn plugin() -> DynamicResources {
    DynamicResources {
        store: Arc::new(Store::default()),
        filter_timeout: None,
        binding_timeout: binding_conditions::DEFAULT_BINDING_TIMEOUT,
        ranked_sets: 0,
    }
}

fn apply(p: &DynamicResources, o: Value) {
    let kind = match o["kind"].as_str() {
        Some("DeviceClass") => &DEVICE_CLASS,
        Some("ResourceSlice") => &RESOURCE_SLICE,
        _ => &RESOURCE_CLAIM,
    };
    p.store.apply(kind, "v1", &o, &object_key(kind, &o));
}

/// Class `fpga` serving `example.com/fpga`, two FPGAs on `worker`, the
/// first with binding conditions.
fn fpga_cluster(p: &DynamicResources) {
    apply(
        p,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "fpga"},
            "spec": {"extendedResourceName": "example.com/fpga"}}),
    );
    apply(
        p,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "worker-fpga"},
        "spec": {"driver": "some-driver", "nodeName": "worker",
            "pool": {"name": "worker", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "instance-1", "bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]},
                {"name": "instance-2"},
            ]}}),
    );
}

type Verdicts = BTreeMap<String, Result<(), Rejection>>;

/// PreFilter and Filter on every node; Reserve and PreBind on `chosen`.
fn cycle(
    p: &DynamicResources,
    pod: &Pod,
    snap: &Snapshot,
    chosen: Option<&str>,
) -> (Verdicts, Vec<BindAction>) {
    let c = ctx(pod, snap);
    let mut state = CycleState::default();
    let pre = p.pre_filter(&c, &mut state);
    let verdicts: Verdicts = snap
        .nodes()
        .map(|n| {
            let r = match &pre {
                Err(e) => Err(e.clone()),
                Ok(Decision::Skip) => Ok(()),
                Ok(Decision::Run) => p.filter(&c, &state, n),
            };
            (n.name().to_string(), r)
        })
        .collect();
    let mut actions = Vec::new();
    if let Some(node) = chosen {
        let info = snap.nodes().find(|n| n.name() == node).unwrap();
        p.reserve(&c, &mut state, info).unwrap();
        actions = p.pre_bind(pod, &state, node).unwrap();
    }
    (verdicts, actions)
}

fn fpga_pod(count: &str) -> Pod {
    P::new("p")
        .spec(
            "containers",
            json!([{"name": "c", "resources": {"requests": {"cpu": "1", "example.com/fpga": count}}}]),
        )
        .build()
}

#[test]
fn an_extended_resource_is_allocated_through_a_claim_on_nodes_without_it() {
    let p = plugin();
    fpga_cluster(&p);
    let snap = cluster(
        vec![
            N::new("worker")
                .alloc(&[("cpu", "8"), ("pods", "10")])
                .build(),
            // Advertises it: the device plugin serves it there.
            N::new("dp")
                .alloc(&[("cpu", "8"), ("pods", "10"), ("example.com/fpga", "4")])
                .build(),
            N::new("empty")
                .alloc(&[("cpu", "8"), ("pods", "10")])
                .build(),
        ],
        vec![],
    );
    let pod = fpga_pod("1");
    let (verdicts, actions) = cycle(&p, &pod, &snap, Some("worker"));
    assert_eq!(verdicts["worker"], Ok(()));
    assert_eq!(verdicts["dp"], Ok(()));
    assert_eq!(
        verdicts["empty"],
        Err(Rejection::unresolvable(CANNOT_ALLOCATE))
    );
    let ext: Vec<&ExtendedClaimBinding> = actions.iter().filter_map(BindAction::get).collect();
    assert_eq!(ext.len(), 1, "{actions:?}");
    let b = ext[0];
    assert_eq!(b.metadata["generateName"], "p-extended-resources-");
    assert_eq!(
        b.spec,
        json!({"devices": {"requests": [{"name": "container-0-request-1", "exactly":
            {"deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 1}}]}})
    );
    // Devices in slice order (only pools with binding conditions go
    // last): instance-1, with its conditions.
    assert_eq!(
        b.allocation["devices"]["results"],
        json!([{"request": "container-0-request-1", "driver": "some-driver", "pool": "worker",
            "device": "instance-1", "bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]}])
    );
    assert_eq!(
        b.mappings,
        [extended::Mapping {
            container: "c".into(),
            resource: "example.com/fpga".into(),
            request: "container-0-request-1".into(),
        }]
    );
    let w: &AwaitBindingConditions = actions.iter().find_map(BindAction::get).unwrap();
    assert!(w.extended);
    assert!(w.claims.is_empty());
    assert_eq!(w.timeout, binding_conditions::DEFAULT_BINDING_TIMEOUT);
    assert_eq!(
        w.pending,
        ["<driver=some-driver, pool=worker> instance-1 pending=[condition]"]
    );
    // The reservation holds the device: the next pod gets the other one,
    // and its binding has nothing to wait for.
    let second = P::new("q")
        .spec(
            "containers",
            json!([{"name": "c", "resources": {"requests": {"example.com/fpga": "1"}}}]),
        )
        .build();
    let (_, actions) = cycle(&p, &second, &snap, Some("worker"));
    let b: &ExtendedClaimBinding = actions.iter().find_map(BindAction::get).unwrap();
    assert_eq!(
        b.allocation["devices"]["results"],
        json!([{"request": "container-0-request-0", "driver": "some-driver", "pool": "worker", "device": "instance-2"}])
    );
    assert!(actions
        .iter()
        .all(|a| a.get::<AwaitBindingConditions>().is_none()));
}

#[test]
fn a_resource_neither_advertised_nor_served_does_not_fit() {
    let p = plugin();
    fpga_cluster(&p);
    let snap = cluster(
        vec![N::new("worker")
            .alloc(&[("cpu", "8"), ("pods", "10")])
            .build()],
        vec![],
    );
    let pod = P::new("p")
        .spec(
            "containers",
            json!([{"name": "c", "resources": {"requests": {"example.com/fpga": "1", "example.com/other": "1"}}}]),
        )
        .build();
    let (verdicts, _) = cycle(&p, &pod, &snap, None);
    assert_eq!(
        verdicts["worker"],
        Err(Rejection::unresolvable(extended::CANNOT_FIT))
    );
}

#[test]
fn a_claim_made_by_an_earlier_cycle_is_refused_and_deleted() {
    let p = plugin();
    fpga_cluster(&p);
    let pod = fpga_pod("1");
    apply(
        &p,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "p-extended-resources-abcde", "namespace": "default", "uid": "c1",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": pod.uid, "controller": true}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {"deviceClassName": "fpga"}}]}}}),
    );
    let snap = cluster(
        vec![N::new("worker")
            .alloc(&[("cpu", "8"), ("pods", "10")])
            .build()],
        vec![],
    );
    let (verdicts, _) = cycle(&p, &pod, &snap, None);
    assert_eq!(
        verdicts["worker"],
        Err(Rejection::unresolvable(extended::STALE_CLAIM))
    );
}

/// A claim allocated `instance-1` (binding conditions) on worker,
/// `minutes_ago`, its device status with `conditions`.
fn bound_claim(minutes_ago: i64, conditions: Value) -> Value {
    let at = binding_conditions::now() - k8s_openapi::jiff::SignedDuration::from_mins(minutes_ago);
    let at =
        serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)).unwrap();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "my-claim", "namespace": "default", "uid": "uid-my-claim"},
    "spec": {"devices": {"requests": [{"name": "req-1", "exactly": {"deviceClassName": "fpga"}}]}},
    "status": {
        "allocation": {
            "allocationTimestamp": at,
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker"]}]}]},
            "devices": {"results": [{"request": "req-1", "driver": "some-driver", "pool": "worker", "device": "instance-1",
                "bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]}]}},
        "devices": [{"driver": "some-driver", "pool": "worker", "device": "instance-1", "conditions": conditions}],
    }})
}

fn condition(t: &str) -> Value {
    json!({"type": t, "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

fn claim_pod() -> Pod {
    P::new("p")
        .spec(
            "resourceClaims",
            json!([{"name": "c", "resourceClaimName": "my-claim"}]),
        )
        .build()
}

#[test]
fn a_claim_whose_binding_failed_or_timed_out_is_not_available() {
    let snap = cluster(
        vec![N::new("worker")
            .alloc(&[("cpu", "8"), ("pods", "10")])
            .build()],
        vec![],
    );
    for (case, claim, want) in [
        (
            "bound-claim-with-failed-binding",
            bound_claim(0, json!([condition("failed")])),
            Err(Rejection::unresolvable(NOT_AVAILABLE)),
        ),
        (
            "bound-claim-with-timed-out-binding",
            bound_claim(11, json!([])),
            Err(Rejection::unresolvable(NOT_AVAILABLE)),
        ),
        ("still waiting", bound_claim(1, json!([])), Ok(())),
        (
            "bound-claim-with-succeeded-binding-conditions",
            bound_claim(11, json!([condition("condition")])),
            Ok(()),
        ),
    ] {
        let p = plugin();
        fpga_cluster(&p);
        apply(&p, claim);
        let pod = claim_pod();
        let (verdicts, _) = cycle(&p, &pod, &snap, None);
        assert_eq!(verdicts["worker"], want, "{case}");
    }
}

#[test]
fn prebind_waits_for_an_allocated_claims_conditions() {
    let snap = cluster(
        vec![N::new("worker")
            .alloc(&[("cpu", "8"), ("pods", "10")])
            .build()],
        vec![],
    );
    let p = plugin();
    fpga_cluster(&p);
    apply(&p, bound_claim(1, json!([])));
    let pod = claim_pod();
    let (_, actions) = cycle(&p, &pod, &snap, Some("worker"));
    let w: &AwaitBindingConditions = actions.iter().find_map(BindAction::get).unwrap();
    assert_eq!(w.claims, ["my-claim"]);
    assert!(!w.extended);
}

#[test]
fn binding_timeout_is_read_from_the_args() {
    let args = parse_args(Some(&json!({"bindingTimeout": "30s"}))).unwrap();
    assert_eq!(args.binding_timeout, Duration::from_secs(30));
    assert_eq!(
        parse_args(None).unwrap().binding_timeout,
        Duration::from_secs(600)
    );
    let e = parse_args(Some(&json!({"bindingTimeout": "500ms"})))
        .err()
        .unwrap();
    assert!(
        e.contains("bindingTimeout: must be at least 1 second"),
        "{e}"
    );
}
