//! In-place resize state for the differential test's bound pods: a
//! `status` as a kubelet in the middle of a resize writes it, which the
//! test sends through the pod's status subresource after creating the
//! pod. Containers' `allocatedResources` and actuated
//! `resources.requests` differ from the spec, up and down, now one, now
//! both; now and then the pod-level status maps
//! (`status.allocatedResources`, `status.resources.requests`) and a
//! `PodResizePending` condition (Infeasible or Deferred). kube-scheduler
//! 1.37 counts such a pod by the largest of spec, allocated and actuated
//! (component-helpers `PodRequests` with `UseStatusResources`).

use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Map, Value};

use super::generate::{bytes, milli_cpu, usage};

/// How a resize changes an amount: down- and up-sizes.
const FACTORS: [f64; 5] = [0.25, 0.5, 0.75, 1.5, 2.0];

/// A cpu amount (milli) or memory amount (bytes) after a resize, as a
/// quantity; an amount of 0 (or none) becomes a small one.
fn resized(rng: &mut impl Rng, resource: &str, amount: i64) -> Value {
    let f = *FACTORS.choose(rng).expect("non-empty");
    if resource == "cpu" {
        let base = if amount > 0 { amount } else { 200 };
        json!(format!("{}m", ((base as f64 * f) as i64).max(10)))
    } else {
        let mib = if amount > 0 { amount >> 20 } else { 128 };
        json!(format!("{}Mi", ((mib as f64 * f) as i64).max(8)))
    }
}

/// A container's requests resized: cpu and memory, each kept, dropped
/// (the kubelet reports what it has) or changed.
fn resized_list(rng: &mut impl Rng, resources: &Value) -> Value {
    let get = |name: &str| {
        resources["requests"]
            .get(name)
            .or(resources["limits"].get(name))
    };
    let mut out = Map::new();
    for (name, amount) in [
        ("cpu", get("cpu").map(milli_cpu)),
        ("memory", get("memory").map(bytes)),
    ] {
        match rng.random_range(0..6) {
            0 => {}
            1 => {
                if let Some(v) = get(name) {
                    out.insert(name.into(), v.clone());
                }
            }
            _ => {
                out.insert(name.into(), resized(rng, name, amount.unwrap_or(0)));
            }
        }
    }
    Value::Object(out)
}

/// A bound pod's resize state, or none (a third of them).
pub fn status(rng: &mut impl Rng, pod: &Value) -> Option<Value> {
    if !rng.random_bool(0.65) {
        return None;
    }
    let mut status = json!({});
    for (spec_key, status_key) in [
        ("containers", "containerStatuses"),
        ("initContainers", "initContainerStatuses"),
    ] {
        let mut list = Vec::new();
        for c in pod["spec"][spec_key].as_array().into_iter().flatten() {
            let mut s = json!({"name": c["name"], "image": c["image"], "imageID": "",
                               "ready": true, "restartCount": 0});
            if rng.random_bool(0.6) {
                s["allocatedResources"] = resized_list(rng, &c["resources"]);
            }
            if rng.random_bool(0.6) {
                s["resources"] = json!({"requests": resized_list(rng, &c["resources"])});
            }
            list.push(s);
        }
        if !list.is_empty() {
            status[status_key] = Value::Array(list);
        }
    }
    if rng.random_bool(0.2) {
        // The pod-level maps, over the whole pod.
        let u = usage(pod);
        let total = json!({"requests": {"cpu": format!("{}m", u[0]), "memory": u[1].to_string()}});
        status["allocatedResources"] = resized_list(rng, &total);
        if rng.random_bool(0.8) {
            status["resources"] = json!({"requests": resized_list(rng, &total)});
        }
    }
    if rng.random_bool(0.3) {
        let reason = *["Infeasible", "Deferred"].choose(rng).expect("non-empty");
        status["conditions"] = json!([{"type": "PodResizePending", "status": "True",
                                        "reason": reason}]);
    }
    Some(status)
}

/// An upper bound of what `pod` with resize state `status` takes from its
/// node (milli cpu, memory bytes, GPUs): the largest of the spec's usage,
/// the usage with each container's allocated and with its actuated
/// requests in place of the spec's, and the pod-level status maps.
pub fn usage_with(pod: &Value, status: Option<&Value>) -> [i64; 3] {
    let mut out = usage(pod);
    let Some(status) = status else {
        return out;
    };
    for field in ["allocatedResources", "resources"] {
        let mut view = pod.clone();
        for (spec_key, status_key) in [
            ("containers", "containerStatuses"),
            ("initContainers", "initContainerStatuses"),
        ] {
            let statuses = status[status_key].as_array().cloned().unwrap_or_default();
            for c in view["spec"][spec_key].as_array_mut().into_iter().flatten() {
                let s = statuses.iter().find(|s| s["name"] == c["name"]);
                // Actuated requests fall back to the allocated ones, as
                // upstream's `containerActuatedRequests` does.
                let got = s.map(|s| {
                    let actuated = &s["resources"]["requests"];
                    if field == "resources" && actuated.is_object() {
                        actuated.clone()
                    } else {
                        s["allocatedResources"].clone()
                    }
                });
                if let Some(list) = got.filter(Value::is_object) {
                    let mut requests = c["resources"]["requests"].clone();
                    if !requests.is_object() {
                        requests = json!({});
                    }
                    for (k, v) in list.as_object().into_iter().flatten() {
                        requests[k] = v.clone();
                        // A limit alone would count as the request.
                        if let Some(l) = c["resources"]["limits"].as_object_mut() {
                            l.remove(k);
                        }
                    }
                    c["resources"]["requests"] = requests;
                }
            }
        }
        let u = usage(&view);
        (0..3).for_each(|k| out[k] = out[k].max(u[k]));
    }
    for list in [
        &status["allocatedResources"],
        &status["resources"]["requests"],
    ] {
        out[0] = out[0].max(list.get("cpu").map_or(0, milli_cpu));
        out[1] = out[1].max(list.get("memory").map_or(0, bytes));
    }
    out
}
