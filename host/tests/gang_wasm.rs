//! A gang and quota policy written as a wasm component (`plugins/gang-quota`,
//! through the contract's Reserve, Unreserve and Permit) schedules through
//! the real framework: whole gangs or nothing, waits that time out, quota
//! rejections.

use std::path::Path;

use k8s_openapi::api::core::v1 as k8s;
use serde_json::json;

use wasmsched::manifest::Manifests;
use wasmsched::model::{Node, Pod};
use wasmsched::{config, simulate};

fn plugin() -> String {
    Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR"))
        .join("gang_quota.wasm")
        .display()
        .to_string()
}

fn scheduler(args: &str) -> config::Scheduler {
    let text = format!(
        "wasmPlugins:\n- name: GangQuota\n  path: {}\nprofiles:\n- schedulerName: gpu-scheduler\n  \
         plugins:\n    multiPoint:\n      enabled:\n      - {{name: GangQuota}}\n  pluginConfig:\n  \
         - name: GangQuota\n    args: {args}\n",
        plugin()
    );
    let file = config::parse(&text).unwrap();
    config::build(&file, Path::new("."), 1).unwrap()
}

fn node(name: &str, gpus: u32) -> Node {
    let n: k8s::Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110",
            "nvidia.com/gpu": gpus.to_string()}}
    }))
    .unwrap();
    Node::from_k8s(&n).unwrap()
}

fn member(ns: &str, name: &str, gang: Option<(&str, u32)>, gpus: u32, t: u32) -> Pod {
    let (labels, annotations) = match gang {
        Some((g, size)) => (
            json!({"gang.example.com/name": g}),
            json!({"gang.example.com/size": size.to_string()}),
        ),
        None => (json!({}), json!({})),
    };
    let p: k8s::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations,
            "creationTimestamp": format!("2026-01-01T00:00:{t:02}Z")},
        "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .unwrap();
    Pod::from_k8s(&p).unwrap()
}

fn run(args: &str, nodes: Vec<Node>, pods: Vec<Pod>) -> simulate::Report {
    let m = Manifests {
        nodes,
        pods,
        ..Default::default()
    };
    simulate::run(&scheduler(args), m, &simulate::Options::default()).unwrap()
}

fn bound(r: &simulate::Report, prefix: &str) -> usize {
    r.scheduled
        .iter()
        .filter(|s| s.pod.starts_with(prefix))
        .count()
}

#[test]
fn a_wasm_gang_binds_whole_when_it_fits_and_not_at_all_when_it_does_not() {
    let gang = |name: &str, n: u32, t: u32| {
        (0..n)
            .map(|i| member("ml", &format!("{name}-{i}"), Some((name, n)), 1, t + i))
            .collect::<Vec<_>>()
    };
    // 6 GPUs: the 4-member gang fits, the 5-member one then does not. (A
    // component has no QueueSort: gangs created interleaved would each
    // hold half the GPUs until their timeouts; docs/gangs.md.)
    let mut pods = gang("small", 4, 0);
    pods.extend(gang("large", 5, 10));
    let r = run(
        "{timeoutMs: 10000}",
        vec![node("n1", 3), node("n2", 3)],
        pods,
    );
    assert_eq!(bound(&r, "small-"), 4, "{:#?}", r.unschedulable);
    assert_eq!(bound(&r, "large-"), 0, "{:?}", r.scheduled);
    // Members that reserved waited, then timed out; the others did not fit.
    let timeout = "rejected due to timeout after waiting for GangQuota";
    let timed_out = r
        .unschedulable
        .iter()
        .filter(|u| u.message.contains(timeout))
        .count();
    assert!(timed_out >= 2, "{:#?}", r.unschedulable);
    assert!(
        r.unschedulable
            .iter()
            .all(|u| u.message.contains(timeout)
                || u.message.contains("Insufficient nvidia.com/gpu")),
        "{:#?}",
        r.unschedulable
    );
    // Their GPUs were released: nothing else holds them.
    assert!(r.plugin_health.is_empty(), "{:?}", r.plugin_health);
}

#[test]
fn a_wasm_quota_rejects_at_permit_with_its_reason() {
    let pods = (0..4)
        .map(|i| member("team-a", &format!("job-{i}"), None, 2, i))
        .collect();
    let r = run(
        "{gpuQuota: {team-a: 6}}",
        vec![node("n1", 8), node("n2", 8)],
        pods,
    );
    assert_eq!(r.scheduled.len(), 3);
    assert_eq!(r.unschedulable.len(), 1);
    assert!(
        r.unschedulable[0]
            .message
            .contains("namespace team-a would hold 8 GPUs, over its quota of 6"),
        "{:?}",
        r.unschedulable
    );
}

#[test]
fn bad_gang_annotations_and_args_are_reported() {
    let mut p = member("ml", "odd", Some(("g", 2)), 1, 0);
    p.annotations
        .insert("gang.example.com/size".into(), "two".into());
    let r = run("{}", vec![node("n1", 4)], vec![p]);
    assert!(
        r.unschedulable[0]
            .message
            .contains("annotation gang.example.com/size must be a positive integer"),
        "{:?}",
        r.unschedulable
    );
    let text = format!(
        "wasmPlugins:\n- name: GangQuota\n  path: {}\nprofiles:\n- schedulerName: gpu-scheduler\n  \
         plugins:\n    multiPoint:\n      enabled:\n      - {{name: GangQuota}}\n  pluginConfig:\n  \
         - name: GangQuota\n    args: {{quota: 1}}\n",
        plugin()
    );
    let err = config::build(&config::parse(&text).unwrap(), Path::new("."), 1)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("GangQuota args: unknown field `quota`"),
        "{err}"
    );
}
