//! Upstream's table tests of `PodRequests` with the resize state
//! (component-helpers `resource/helpers_test.go`: TestPodResourceRequests,
//! TestAggregateContainerRequestsAndLimits,
//! TestPodRequestsAndLimitsVerticalScalingWrappers) and of the
//! scheduler's `PodInfo.CalculateResource`
//! (`pkg/scheduler/framework/types_test.go`,
//! TestCalculatePodResourcesWithResize), through [`Pod::from_k8s`].

use k8s_openapi::api::core::v1 as k8s;
use serde_json::{json, Value};

use crate::model::resources::{CPU, EPHEMERAL_STORAGE, MEMORY};
use crate::model::Pod;

fn pod(spec: Value, status: Value) -> Pod {
    let p: k8s::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": spec,
        "status": status,
    }))
    .unwrap();
    Pod::from_k8s(&p).unwrap()
}

fn c(name: &str, requests: Value) -> Value {
    json!({"name": name, "image": "x", "resources": {"requests": requests}})
}

fn sidecar(name: &str, requests: Value) -> Value {
    json!({"name": name, "image": "x", "restartPolicy": "Always",
           "resources": {"requests": requests}})
}

/// A container status with actuated requests and, when given, allocated
/// resources.
fn status(name: &str, actuated: Option<Value>, allocated: Option<Value>) -> Value {
    let mut s =
        json!({"name": name, "image": "x", "imageID": "", "ready": true, "restartCount": 0});
    if let Some(a) = actuated {
        s["resources"] = json!({"requests": a});
    }
    if let Some(a) = allocated {
        s["allocatedResources"] = a;
    }
    s
}

fn condition(reason: &str) -> Value {
    json!([{"type": "PodResizePending", "status": "True", "reason": reason}])
}

fn cpu_mem(p: &Pod) -> (i64, i64) {
    (p.requests.get(CPU), p.requests.get(MEMORY))
}

// TestPodResourceRequests.

#[test]
fn infeasible_resize_counts_the_status_alone() {
    // "resized, infeasible": spec 4, actuated 2.
    let p = pod(
        json!({"containers": [c("container-1", json!({"cpu": "4"}))]}),
        json!({"conditions": condition("Infeasible"),
               "containerStatuses": [status("container-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 2000);
    assert!(p.resize.infeasible());
    // The spec still decides what the pod asks when it is scheduled.
    assert_eq!(p.spec_requests.get(CPU), 4000);
    // "resized, infeasible & in-progress": spec 6, allocated 4, actuated 2.
    let p = pod(
        json!({"containers": [c("container-1", json!({"cpu": "6"}))]}),
        json!({"conditions": condition("Infeasible"),
               "containerStatuses": [status("container-1", Some(json!({"cpu": "2"})), Some(json!({"cpu": "4"})))]}),
    );
    assert_eq!(p.requests.get(CPU), 4000);
    // "resized, restartable init container, infeasible".
    let p = pod(
        json!({"containers": [c("app", json!({}))],
               "initContainers": [sidecar("restartable-init-1", json!({"cpu": "4"}))]}),
        json!({"conditions": condition("Infeasible"),
               "initContainerStatuses": [status("restartable-init-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 2000);
}

#[test]
fn without_an_infeasible_condition_the_spec_counts_too() {
    // "resized, no resize status": spec 4, actuated 2.
    let p = pod(
        json!({"containers": [c("container-1", json!({"cpu": "4"}))]}),
        json!({"containerStatuses": [status("container-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 4000);
    // "resized, restartable init container, no resize status".
    let p = pod(
        json!({"containers": [c("app", json!({}))],
               "initContainers": [sidecar("restartable-init-1", json!({"cpu": "4"}))]}),
        json!({"initContainerStatuses": [status("restartable-init-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 4000);
    // A deferred resize is no infeasible one.
    let p = pod(
        json!({"containers": [c("container-1", json!({"cpu": "4"}))]}),
        json!({"conditions": condition("Deferred"),
               "containerStatuses": [status("container-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 4000);
}

#[test]
fn each_resource_takes_the_largest_of_spec_allocated_and_actuated() {
    // "resized: per-resource 3-way maximum".
    let p = pod(
        json!({"containers": [c("container-1", json!({"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"}))]}),
        json!({"containerStatuses": [status(
            "container-1",
            Some(json!({"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"})),
            Some(json!({"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"})),
        )]}),
    );
    assert_eq!(cpu_mem(&p), (30, 30_000_000));
    assert_eq!(p.requests.get(EPHEMERAL_STORAGE), 30_000_000_000);
}

#[test]
fn the_maximum_is_of_sums_not_a_sum_of_maxima() {
    // "aggregate request resolves max of sums instead of sum of maxes":
    // spec 1+2, allocated 2+1: 3, not 4.
    let p = pod(
        json!({"containers": [c("c1", json!({"cpu": "1"})), c("c2", json!({"cpu": "2"}))]}),
        json!({"containerStatuses": [
            status("c1", None, Some(json!({"cpu": "2"}))),
            status("c2", None, Some(json!({"cpu": "1"}))),
        ]}),
    );
    assert_eq!(p.requests.get(CPU), 3000);
}

// TestAggregateContainerRequestsAndLimits.

#[test]
fn status_requests_count_for_containers_that_request_nothing() {
    // "regularcontainers with empty requests, but status with non-empty
    // requests" and the same for an always-restart init container.
    let p = pod(
        json!({"containers": [{"name": "container-1", "image": "x"}]}),
        json!({"containerStatuses": [status("container-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 2000);
    let p = pod(
        json!({"containers": [{"name": "app", "image": "x"}],
               "initContainers": [{"name": "container-1", "image": "x", "restartPolicy": "Always"}]}),
        json!({"initContainerStatuses": [status("container-1", Some(json!({"cpu": "2"})), None)]}),
    );
    assert_eq!(p.requests.get(CPU), 2000);
}

#[test]
fn pod_level_status_maps_stand_for_the_containers() {
    // "aggregate container request/limit resolves directly from pod
    // status when PLR vertical scaling enabled": allocated 4, actuated 3.
    let p = pod(
        json!({"containers": [{"name": "c1", "image": "x",
                               "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]}),
        json!({"allocatedResources": {"cpu": "4"},
               "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "5"}}}),
    );
    assert_eq!(p.requests.get(CPU), 4000);
    // "falls back to container status aggregation ... but
    // podAllocatedResources is nil".
    let c1 = json!({"name": "c1", "image": "x",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}});
    let p = pod(
        json!({"containers": [c1.clone()]}),
        json!({"containerStatuses": [status("c1", Some(json!({"cpu": "5"})), Some(json!({"cpu": "6"})))],
               "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "7"}}}),
    );
    assert_eq!(p.requests.get(CPU), 6000);
    // "... but podResources is nil".
    let p = pod(
        json!({"containers": [c1]}),
        json!({"containerStatuses": [status("c1", Some(json!({"cpu": "5"})), Some(json!({"cpu": "6"})))],
               "allocatedResources": {"cpu": "6"}}),
    );
    assert_eq!(p.requests.get(CPU), 6000);
}

// TestPodRequestsAndLimitsVerticalScalingWrappers.

#[test]
fn pod_level_requests_take_the_largest_of_spec_and_status() {
    // "pod level requests/limits with PLR vertical scaling enabled and
    // status populated": spec 2, allocated 3, actuated 3.5.
    let spec = |cpu: &str| {
        json!({"resources": {"requests": {"cpu": cpu}},
               "containers": [{"name": "c1", "image": "x",
                               "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]})
    };
    let p = pod(
        spec("2"),
        json!({"allocatedResources": {"cpu": "3"},
               "resources": {"requests": {"cpu": "3.5"}, "limits": {"cpu": "5"}}}),
    );
    assert_eq!(p.requests.get(CPU), 3500);
    assert_eq!(p.spec_requests.get(CPU), 2000);
    // "... and infeasible resize": spec 10 left out.
    let p = pod(
        spec("10"),
        json!({"conditions": condition("Infeasible"),
               "allocatedResources": {"cpu": "3"},
               "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "8"}}}),
    );
    assert_eq!(p.requests.get(CPU), 4000);
}

// TestCalculatePodResourcesWithResize (the scheduler's NodeInfo view,
// non-zero requests included).

const CPU500M: &str = "500m";
const CPU700M: &str = "700m";
const MEM500M: &str = "500M";
const MEM800M: &str = "800M";

fn calc(p: &Pod) -> (i64, i64, i64, i64) {
    (
        p.requests.get(CPU),
        p.requests.get(MEMORY),
        p.non_zero_milli_cpu,
        p.non_zero_memory,
    )
}

fn both(cpu: &str, mem: &str) -> Value {
    json!({"cpu": cpu, "memory": mem})
}

#[test]
fn calculate_resource_with_resize() {
    let in_progress = json!([{"type": "PodResizeInProgress", "status": "True"}]);
    // "Pod with no pending resize" and "with resize in progress".
    for conditions in [json!([]), in_progress.clone()] {
        let p = pod(
            json!({"containers": [c("c1", both(CPU500M, MEM500M))]}),
            json!({"conditions": conditions,
                   "containerStatuses": [status("c1", Some(both(CPU500M, MEM500M)), None)]}),
        );
        assert_eq!(calc(&p), (500, 500_000_000, 500, 500_000_000));
    }
    // "Pod with pod-level resources no pending resize" / "... and resize
    // in progress": pod level 700m (spec) over 500m (status).
    for conditions in [json!([]), in_progress] {
        let p = pod(
            json!({"resources": {"requests": both(CPU700M, MEM500M)},
                   "containers": [c("c1", both(CPU500M, MEM500M))]}),
            json!({"conditions": conditions,
                   "resources": {"requests": both(CPU500M, MEM500M)},
                   "containerStatuses": [status("c1", Some(both(CPU700M, MEM500M)), None)]}),
        );
        assert_eq!(calc(&p), (700, 500_000_000, 700, 500_000_000));
    }
    // "Pod with deferred resize": the spec's upsize counts.
    let p = pod(
        json!({"containers": [c("c1", both(CPU700M, MEM800M))]}),
        json!({"conditions": condition("Deferred"),
               "containerStatuses": [status("c1", Some(both(CPU500M, MEM500M)), None)]}),
    );
    assert_eq!(calc(&p), (700, 800_000_000, 700, 800_000_000));
    // "Pod with pod-level resources and with deferred resize".
    let p = pod(
        json!({"resources": {"requests": both(CPU700M, MEM800M)},
               "containers": [c("c1", both(CPU500M, MEM500M))]}),
        json!({"conditions": condition("Deferred"),
               "resources": {"requests": both(CPU500M, MEM500M)},
               "containerStatuses": [status("c1", Some(both(CPU500M, MEM500M)), None)]}),
    );
    assert_eq!(calc(&p), (700, 800_000_000, 700, 800_000_000));
    // "Pod with infeasible resize": the status alone.
    let p = pod(
        json!({"containers": [c("c1", both(CPU700M, MEM800M))]}),
        json!({"conditions": condition("Infeasible"),
               "containerStatuses": [status("c1", Some(both(CPU500M, MEM500M)), None)]}),
    );
    assert_eq!(calc(&p), (500, 500_000_000, 500, 500_000_000));
    // "Pod with init container and no pending resize".
    let p = pod(
        json!({"containers": [c("c1", both(CPU500M, MEM500M))],
               "initContainers": [c("i1", both(CPU700M, MEM800M))]}),
        json!({"containerStatuses": [status("c1", Some(both(CPU500M, MEM500M)), None)],
               "initContainerStatuses": [status("i1", Some(both(CPU700M, MEM800M)), None)]}),
    );
    assert_eq!(calc(&p), (700, 800_000_000, 700, 800_000_000));
    // "Pod with sider container and no pending resize".
    let p = pod(
        json!({"containers": [c("c1", both(CPU500M, MEM500M))],
               "initContainers": [c("i1", both(CPU700M, MEM800M)), sidecar("s1", both(CPU700M, MEM800M))]}),
        json!({"containerStatuses": [status("c1", Some(both(CPU500M, MEM500M)), None)],
               "initContainerStatuses": [
                   status("i1", Some(both(CPU700M, MEM800M)), None),
                   status("s1", Some(both(CPU700M, MEM800M)), None)]}),
    );
    assert_eq!(calc(&p), (1200, 1_300_000_000, 1200, 1_300_000_000));
}

#[test]
fn non_zero_defaults_apply_to_every_aggregate() {
    // A container requesting nothing whose kubelet allocated 1 cpu: the
    // allocated aggregate (1 cpu + 200Mi default memory) wins over the
    // spec's defaults (100m, 200Mi).
    let p = pod(
        json!({"containers": [{"name": "c1", "image": "x"}]}),
        json!({"containerStatuses": [status("c1", None, Some(json!({"cpu": "1"})))]}),
    );
    assert_eq!(calc(&p), (1000, 0, 1000, 200 << 20));
    // An infeasible resize with no status for the container: nothing
    // counts, but the non-zero defaults do.
    let p = pod(
        json!({"containers": [c("c1", json!({"cpu": "2"}))]}),
        json!({"conditions": condition("Infeasible")}),
    );
    assert_eq!(calc(&p), (0, 0, 100, 200 << 20));
}

#[test]
fn a_bad_status_quantity_names_its_field() {
    let p: k8s::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [c("c1", json!({"cpu": "1"}))]},
        "status": {"containerStatuses": [status("c1", None, Some(json!({"cpu": "-1"})))]},
    }))
    .unwrap();
    let e = Pod::from_k8s(&p).unwrap_err().to_string();
    assert!(
        e.contains("status.containerStatuses[0].allocatedResources.cpu"),
        "{e}"
    );
    let p: k8s::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [c("c1", json!({"cpu": "1"}))]},
        "status": {"resources": {"requests": {"memory": "lots"}}},
    }))
    .unwrap();
    let e = Pod::from_k8s(&p).unwrap_err().to_string();
    assert!(e.contains("status.resources.requests.memory"), "{e}");
}
