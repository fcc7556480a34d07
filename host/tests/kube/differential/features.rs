//! Node declared features for the differential test (NodeDeclaredFeatures,
//! GA in 1.37): what some nodes list in `status.declaredFeatures` (written
//! through the node's status subresource) and pending pods whose spec
//! needs one. Of the features of 1.37.2's registry that a pod can need at
//! scheduling, only RestartAllContainersOnContainerExits is in a spec the
//! API server accepts with its default gates (a container restart rule
//! with action `RestartAllContainers`; the other two, host network in a
//! user namespace and bind mount options, sit behind alpha gates).

use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Value};

/// The feature generated pods need.
pub const NEEDED: &str = "RestartAllContainersOnContainerExits";

/// Other names a node may declare: registry features no pod needs at
/// scheduling, and one the registry does not know (ignored by both).
const OTHERS: [&str; 3] = [
    "InPlacePodLevelResourcesVerticalScaling",
    "UserNamespacesHostNetworkSupport",
    "ExampleFutureFeature",
];

/// A node's `status.declaredFeatures`, or none.
pub fn declared(rng: &mut impl Rng) -> Option<Value> {
    if !rng.random_bool(0.6) {
        return None;
    }
    let mut list = Vec::new();
    if rng.random_bool(0.6) {
        list.push(NEEDED);
    }
    for f in OTHERS {
        if rng.random_bool(0.3) {
            list.push(f);
        }
    }
    // The API server wants the list sorted.
    list.sort_unstable();
    Some(json!(list))
}

/// Makes some pending pods need [`NEEDED`]: a container restart rule
/// that restarts every container on an exit code.
pub fn maybe_need(rng: &mut impl Rng, pod: &mut Value) {
    if !rng.random_bool(0.2) {
        return;
    }
    let Some(c) = pod["spec"]["containers"]
        .as_array_mut()
        .and_then(|l| l.first_mut())
    else {
        return;
    };
    let code = *[1, 42, 137].choose(rng).expect("non-empty");
    c["restartPolicy"] = json!("Never");
    c["restartPolicyRules"] = json!([{"action": "RestartAllContainers",
                                      "exitCodes": {"operator": "In", "values": [code]}}]);
}
