//! Gang scheduling through `simulate` (the real framework on a virtual
//! clock): all-or-nothing pod groups, timeouts, topology domains, and the
//! example.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1 as k8s;
use serde_json::{json, Value};

use wasmsched::framework::plugins::coscheduling::report::GroupReport;
use wasmsched::framework::plugins::coscheduling::{check_manifest, POD_GROUP_KIND};
use wasmsched::manifest::Manifests;
use wasmsched::manifest::PluginObject;
use wasmsched::model::{Node, Pod};
use wasmsched::{config, manifest, simulate};

const GANG_CONFIG: &str = r#"
profiles:
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: Coscheduling}
"#;

/// The same without the built-in wasm policies (faster, for the property
/// test's many runs).
const NATIVE_GANG_CONFIG: &str = r#"
profiles:
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: Coscheduling}
      disabled:
      - {name: GpuTopology}
      - {name: NetworkLocality}
"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn scheduler(config_text: &str, seed: u64) -> config::Scheduler {
    let file: config::ConfigFile = config::parse(config_text).unwrap();
    config::build(&file, Path::new("."), seed).unwrap()
}

fn node(name: &str, gpus: u32, labels: Value) -> Node {
    let mut l = json!({"kubernetes.io/hostname": name});
    if let (Some(m), Some(extra)) = (l.as_object_mut(), labels.as_object()) {
        m.extend(extra.clone());
    }
    let n: k8s::Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": l},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110",
            "nvidia.com/gpu": gpus.to_string()}}
    }))
    .unwrap();
    Node::from_k8s(&n).unwrap()
}

/// A pod asking for `gpus`, created at second `t`, in `group` if given.
fn pod(name: &str, group: Option<&str>, gpus: u32, t: u32) -> Pod {
    let labels = match group {
        Some(g) => json!({"scheduling.x-k8s.io/pod-group": g}),
        None => json!({}),
    };
    let p: k8s::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "labels": labels,
            "creationTimestamp": format!("2026-01-01T01:{:02}:{:02}Z", t / 60, t % 60)},
        "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .unwrap();
    Pod::from_k8s(&p).unwrap()
}

fn pod_group(name: &str, min: u32, t: u32, extra: Value) -> PluginObject {
    let mut v = json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml",
            "creationTimestamp": format!("2026-01-01T00:{:02}:{:02}Z", t / 60, t % 60)},
        "spec": {"minMember": min}
    });
    merge(&mut v, extra);
    check_manifest(&v).unwrap();
    PluginObject {
        kind: POD_GROUP_KIND,
        version: "v1alpha1",
        value: v,
    }
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn run(config_text: &str, seed: u64, m: Manifests) -> simulate::Report {
    simulate::run(
        &scheduler(config_text, seed),
        m,
        &simulate::Options::default(),
    )
    .unwrap()
}

fn groups(r: &simulate::Report) -> Vec<GroupReport> {
    r.plugin("pod_groups").unwrap_or_default()
}

fn group(r: &simulate::Report, name: &str) -> GroupReport {
    groups(r).into_iter().find(|g| g.name == name).unwrap()
}

#[test]
fn two_gangs_that_cannot_both_fit_one_binds_whole_the_other_not_at_all() {
    for seed in 0..4 {
        let nodes = (0..3)
            .map(|i| node(&format!("n{i}"), 4, json!({})))
            .collect();
        let mut pods = Vec::new();
        // Members of the two gangs created interleaved; `a`'s PodGroup is
        // older, so its members leave the queue first.
        for i in 0..8 {
            pods.push(pod(&format!("b-{i}"), Some("b"), 1, 2 * i));
            pods.push(pod(&format!("a-{i}"), Some("a"), 1, 2 * i + 1));
        }
        let m = Manifests {
            nodes,
            pods,
            objects: vec![
                pod_group("a", 8, 0, json!({})),
                pod_group("b", 8, 1, json!({})),
            ],
            ..Default::default()
        };
        let r = run(GANG_CONFIG, seed, m);
        let (a, b) = (group(&r, "a"), group(&r, "b"));
        assert_eq!(
            (a.scheduled, a.phase.as_str()),
            (8, "Scheduled"),
            "seed {seed}"
        );
        assert_eq!(
            (b.scheduled, b.phase.as_str()),
            (0, "PreScheduling"),
            "seed {seed}"
        );
        assert_eq!(r.scheduled.len(), 8);
        assert!(r.scheduled.iter().all(|s| s.pod.starts_with("a-")));
        assert_eq!(r.unschedulable.len(), 8);
        for u in &r.unschedulable {
            assert!(
                u.message.contains("pod group ml/b") || u.message.contains("Pod group ml/b"),
                "{}: {}",
                u.pod,
                u.message
            );
        }
    }
}

#[test]
fn timeout_releases_every_reservation_for_other_pods() {
    // 9 GPUs; a group of 10 one-GPU members reserves 9 and, within 10% of
    // minMember, keeps them waiting (upstream's rule) until its timeout.
    let nodes = (0..3)
        .map(|i| node(&format!("n{i}"), 3, json!({})))
        .collect();
    let mut pods: Vec<Pod> = (0..10)
        .map(|i| pod(&format!("g-{i}"), Some("g"), 1, i))
        .collect();
    pods.extend((0..9).map(|i| pod(&format!("other-{i}"), None, 1, 100 + i)));
    let m = Manifests {
        nodes,
        pods,
        objects: vec![pod_group(
            "g",
            10,
            0,
            json!({"spec": {"scheduleTimeoutSeconds": 30}}),
        )],
        ..Default::default()
    };
    let r = run(GANG_CONFIG, 1, m);
    let g = group(&r, "g");
    assert_eq!(g.scheduled, 0, "{:?}", r.scheduled);
    assert!(g.members.iter().all(|m| m.node.is_none()));
    let others: Vec<&str> = r.scheduled.iter().map(|s| s.pod.as_str()).collect();
    assert_eq!(
        others.len(),
        9,
        "the released GPUs went to the others: {others:?}"
    );
    assert!(others.iter().all(|p| p.starts_with("other-")));
    let timed_out = r
        .unschedulable
        .iter()
        .filter(|u| {
            u.message
                .contains("timed out after 30s with 9 of 10 members reserved")
        })
        .count();
    assert!(timed_out >= 1, "{:#?}", r.unschedulable);
}

#[test]
fn scheduled_on_time_when_the_last_member_fits() {
    // 10 GPUs for a group of 10: the first nine wait, the tenth allows all.
    let nodes = (0..5)
        .map(|i| node(&format!("n{i}"), 2, json!({})))
        .collect();
    let pods = (0..10)
        .map(|i| pod(&format!("g-{i}"), Some("g"), 1, i))
        .collect();
    let m = Manifests {
        nodes,
        pods,
        objects: vec![pod_group("g", 10, 0, json!({}))],
        ..Default::default()
    };
    let r = run(GANG_CONFIG, 1, m);
    assert_eq!(group(&r, "g").scheduled, 10);
    assert!(r.unschedulable.is_empty());
}

#[test]
fn without_coscheduling_pod_groups_are_ignored() {
    let nodes = (0..3)
        .map(|i| node(&format!("n{i}"), 4, json!({})))
        .collect();
    let pods = (0..16)
        .map(|i| pod(&format!("a-{i}"), Some("a"), 1, i))
        .collect();
    let m = Manifests {
        nodes,
        pods,
        objects: vec![pod_group("a", 16, 0, json!({}))],
        ..Default::default()
    };
    // Coscheduling is in the default profile: the group of 16 does not
    // fit 12 slots, and nothing of it is placed.
    let r = run("profiles:\n- schedulerName: gpu-scheduler\n", 1, m.clone());
    assert_eq!(r.scheduled.len(), 0, "all or nothing by default");
    assert_eq!(group(&r, "a").scheduled, 0);
    // Disabled, the members are placed one by one, partially.
    let r = run(
        "profiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{name: Coscheduling}]\n",
        1,
        m,
    );
    assert_eq!(r.scheduled.len(), 12, "placed one by one, partially");
    assert!(groups(&r).is_empty());
}

/// A small deterministic generator (xorshift), so the property test needs
/// no crate and every failure names its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn random_cluster(seed: u64) -> Manifests {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let domains = ["d0", "d1", "d2", "d3"];
    let nodes: Vec<Node> = (0..12)
        .map(|i| {
            let d = domains[rng.below(4) as usize];
            let gpus = [2, 4, 8][rng.below(3) as usize];
            node(
                &format!("n{i:02}"),
                gpus,
                json!({"nvidia.com/gpu.clique": d}),
            )
        })
        .collect();
    let mut pods = Vec::new();
    let mut groups = Vec::new();
    let mut t = 0;
    for g in 0..8 {
        let name = format!("g{g}");
        let size = 2 + rng.below(7) as u32;
        let min = size - rng.below(2) as u32;
        let gpus = 1 + rng.below(4) as u32;
        let extra = match rng.below(3) {
            0 => json!({"metadata": {"annotations": {
                "scheduling.wasmsched.io/required-topology": "nvidia.com/gpu.clique"}}}),
            1 => json!({"metadata": {"annotations": {
                "scheduling.wasmsched.io/preferred-topology": "nvidia.com/gpu.clique"}}}),
            _ => json!({}),
        };
        groups.push(pod_group(&name, min, g, extra));
        for i in 0..size {
            t += 1 + rng.below(3) as u32;
            pods.push(pod(&format!("{name}-{i}"), Some(&name), gpus, t));
        }
    }
    for i in 0..10 {
        t += 1;
        pods.push(pod(&format!("solo-{i}"), None, 1 + rng.below(2) as u32, t));
    }
    Manifests {
        nodes,
        pods,
        objects: groups,
        ..Default::default()
    }
}

#[test]
fn never_a_partial_group_and_required_groups_stay_in_one_domain() {
    let mut complete = 0;
    for seed in 0..24 {
        let r = run(NATIVE_GANG_CONFIG, seed, random_cluster(seed));
        for g in &groups(&r) {
            let min = g.min_member.unwrap();
            assert!(
                g.scheduled == 0 || g.scheduled >= min,
                "seed {seed}: {}/{} bound {} of minMember {min}",
                g.namespace,
                g.name,
                g.scheduled
            );
            if g.scheduled >= min {
                complete += 1;
            }
            if g.topology
                .as_ref()
                .is_some_and(|t| t.mode == wasmsched::model::pod_group::TopologyMode::Required)
            {
                assert!(g.domains.len() <= 1, "seed {seed}: {g:?}");
            }
        }
    }
    assert!(
        complete > 24,
        "the property is not vacuous: {complete} groups placed"
    );
}

#[test]
fn the_gang_example_places_whole_groups_in_their_domains() {
    let file = config::load(&root().join("examples/gang/config.yaml")).unwrap();
    let scheduler = config::build(&file, &root().join("examples/gang"), 0).unwrap();
    let manifests = manifest::load(&[root().join("examples/gang")]).unwrap();
    assert_eq!(manifests.objects.len(), 6);
    let nodes = manifests.nodes.len();
    let r = simulate::run(&scheduler, manifests, &simulate::Options::default()).unwrap();
    let llama = group(&r, "llama-pretrain");
    assert_eq!(
        (llama.scheduled, llama.domains.clone()),
        (8, vec!["nvl-a".to_string()])
    );
    let bert = group(&r, "bert-finetune");
    assert_eq!((bert.scheduled, bert.domains.len()), (4, 1));
    assert_eq!(group(&r, "hparam-sweep").scheduled, 3);
    for (name, why) in [
        (
            "gpt-large",
            "minResources exceed the cluster's free capacity",
        ),
        ("moe-expert", "no nvidia.com/gpu.clique domain has room"),
        ("eval", "has 2 pod(s), fewer than its minMember 3"),
    ] {
        assert_eq!(group(&r, name).scheduled, 0, "{name}");
        let msgs: Vec<&str> = r
            .unschedulable
            .iter()
            .filter(|u| u.pod.starts_with(name))
            .map(|u| u.message.as_str())
            .collect();
        assert!(
            !msgs.is_empty() && msgs.iter().all(|m| m.contains(why)),
            "{name}: {msgs:?}"
        );
    }
    // A PreFilter rejection reads as upstream's: every node counts it.
    let eval = r.unschedulable.iter().find(|u| u.pod.starts_with("eval"));
    let want = format!("0/{nodes} nodes are available: {nodes} pod group ");
    assert!(
        eval.is_some_and(|u| u.message.starts_with(&want)),
        "{eval:?}"
    );
    // JSON: the groups section.
    let v = serde_json::to_value(&r).unwrap();
    let g = &v["pod_groups"][0];
    assert_eq!(g["name"], "bert-finetune");
    assert_eq!(g["minMember"], 4);
    assert_eq!(g["topology"]["mode"], "preferred");
    assert_eq!(g["members"].as_array().unwrap().len(), 4);
}
