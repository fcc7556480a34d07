//! Upstream's table tests of the registry's `InferForScheduling`
//! (component-helpers `nodedeclaredfeatures/features/*/..._test.go`) and
//! of `MatchNodeFeatureSet` (`framework_test.go`, TestMatchNode).

use k8s_openapi::api::core::v1 as k8s;
use serde_json::{json, Value};

use super::*;

fn spec(v: Value) -> k8s::PodSpec {
    serde_json::from_value(v).unwrap()
}

fn restart_all_container() -> Value {
    json!({"name": "c", "image": "image", "restartPolicy": "Never",
           "restartPolicyRules": [{"action": "RestartAllContainers",
                                   "exitCodes": {"operator": "In", "values": [42]}}]})
}

#[test]
fn the_registry_is_upstreams_in_name_order() {
    let names: Vec<&str> = REGISTRY.iter().map(|f| f.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert_eq!(names.len(), 9, "features/registry.go AllFeatures");
}

// restartallcontainers TestInferForScheduling.
#[test]
fn restart_all_containers() {
    let plain = json!({"name": "name", "image": "image"});
    let cases = [
        (
            "init container with rules",
            json!({"initContainers": [restart_all_container()], "containers": [plain.clone()]}),
            true,
        ),
        (
            "regular container with rules",
            json!({"initContainers": [plain.clone()], "containers": [restart_all_container()]}),
            true,
        ),
        (
            "no rules",
            json!({"initContainers": [plain.clone()], "containers": [{"name": "name2", "image": "image"}]}),
            false,
        ),
    ];
    for (name, s, want) in cases {
        let got = required(&spec(s)).contains(&"RestartAllContainersOnContainerExits");
        assert_eq!(got, want, "{name}");
    }
    // A rule with another action needs nothing.
    let other = json!({"containers": [{"name": "c", "restartPolicy": "Never",
        "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]}]});
    assert!(required(&spec(other)).is_empty());
}

// usernamespaceshostnetwork TestInferForScheduling.
#[test]
fn user_namespaces_with_host_network() {
    let cases = [
        (
            "HostNetwork true, HostUsers false",
            json!(true),
            json!(false),
            true,
        ),
        (
            "HostNetwork true, HostUsers nil",
            json!(true),
            Value::Null,
            false,
        ),
        (
            "HostNetwork true, HostUsers true",
            json!(true),
            json!(true),
            false,
        ),
        (
            "HostNetwork false, HostUsers false",
            json!(false),
            json!(false),
            false,
        ),
    ];
    for (name, host_network, host_users, want) in cases {
        let s = spec(json!({"containers": [{"name": "c"}],
                            "hostNetwork": host_network, "hostUsers": host_users}));
        assert_eq!(
            required(&s) == ["UserNamespacesHostNetworkSupport"],
            want,
            "{name}"
        );
    }
}

// volumebindmountoptions: a bind mount option in any kind of container.
#[test]
fn volume_bind_mount_options() {
    let mount = json!([{"name": "v", "mountPath": "/v", "bindMountOptions": ["nosymfollow"]}]);
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        let mut s = json!({"containers": [{"name": "app"}]});
        s[key] = json!([{"name": "c", "volumeMounts": mount}]);
        assert_eq!(required(&spec(s)), ["VolumeBindMountOptions"], "{key}");
    }
    let none = json!({"containers": [{"name": "c",
        "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]});
    assert!(required(&spec(none)).is_empty());
}

#[test]
fn several_needs_come_in_name_order() {
    let s = spec(json!({
        "hostNetwork": true, "hostUsers": false,
        "containers": [restart_all_container(),
                       {"name": "d", "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                       "bindMountOptions": ["nosymfollow"]}]}]
    }));
    assert_eq!(
        required(&s),
        [
            "RestartAllContainersOnContainerExits",
            "UserNamespacesHostNetworkSupport",
            "VolumeBindMountOptions"
        ]
    );
}

/// A case: name, what the pod needs, what the node declares, what it
/// lacks.
type MatchCase = (
    &'static str,
    &'static [&'static str],
    Vec<String>,
    &'static [&'static str],
);

// framework_test.go TestMatchNode.
#[test]
fn match_node() {
    let node = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases: [MatchCase; 5] = [
        (
            "all features match",
            &["feature-a", "feature-b"],
            node(&["feature-a", "feature-b", "feature-c"]),
            &[],
        ),
        (
            "some features missing",
            &["feature-a", "feature-b"],
            node(&["feature-a", "feature-c"]),
            &["feature-b"],
        ),
        (
            "all features missing",
            &["feature-a", "feature-b"],
            node(&["feature-c"]),
            &["feature-a", "feature-b"],
        ),
        (
            "no node features",
            &["feature-a", "feature-b"],
            node(&[]),
            &["feature-a", "feature-b"],
        ),
        (
            "no requirements",
            &[],
            node(&["feature-a", "feature-b", "feature-c"]),
            &[],
        ),
    ];
    for (name, required, declared, want) in cases {
        assert_eq!(unsatisfied(required, &declared), want, "{name}");
    }
}
