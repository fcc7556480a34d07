//! Preemption in `simulate`: PriorityClasses and PodDisruptionBudgets from
//! the input, victims evicted on the virtual clock, the preemptor placed
//! once they are gone, the report and `--explain`; a wasm Filter whose
//! verdict depends on the node's pods in the what-ifs; wasm advisors
//! (`post-filter`) vetoing and ranking, and failing.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::*;
use wasmsched::{config, manifest, simulate};

fn example() -> PathBuf {
    repo_root().join("examples/preemption")
}

fn run_example(explain: Option<&str>) -> simulate::Report {
    let scheduler = config::build(&config::ConfigFile::default(), Path::new("."), 1).unwrap();
    let manifests = manifest::load(&[example()]).unwrap();
    let opts = simulate::Options {
        explain: explain.map(str::to_string),
        ..Default::default()
    };
    simulate::run(&scheduler, manifests, &opts).unwrap()
}

#[test]
fn the_example_preempts_around_the_budget_and_respects_never() {
    let r = run_example(Some("ml/serve-0"));
    // gpu-a and gpu-b would evict training pods their budget protects;
    // gpu-c evicts the evaluation job and spares the notebook (priority
    // 500 > 100), which the GPU policy's what-if Filter confirms fits.
    assert_eq!(r.preemptions.len(), 1, "{:?}", r.preemptions);
    let p = &r.preemptions[0];
    assert_eq!(
        (p.preemptor.as_str(), p.node.as_str(), p.victims.clone()),
        ("ml/serve-0", "gpu-c", vec!["ml/eval-0".to_string()])
    );
    let placed: Vec<(&str, &str)> = r
        .scheduled
        .iter()
        .map(|s| (s.pod.as_str(), s.node.as_str()))
        .collect();
    assert_eq!(placed, [("serve-0", "gpu-c")]);
    // Same priority, preemptionPolicy Never: it waits, and the room made
    // for serve-0 was not handed to it.
    assert_eq!(r.unschedulable.len(), 1);
    assert_eq!(r.unschedulable[0].pod, "report-0");
    let e = r.explain.unwrap();
    let pre = e.explanation.preemption.unwrap();
    assert_eq!(pre.nominated.as_deref(), Some("gpu-c"));
    let rows: Vec<(&str, u32)> = pre
        .candidates
        .iter()
        .map(|c| (c.node.as_str(), c.budget_violations))
        .collect();
    assert_eq!(rows[0], ("gpu-c", 0));
    assert_eq!(rows.len(), 3);
    assert_eq!(
        pre.candidates[1].behind_because.as_deref(),
        Some("more PodDisruptionBudget violations")
    );
}

#[test]
fn the_cli_lists_preemptions_in_the_table_and_json() {
    let dir = example();
    let dir = dir.to_str().unwrap();
    let o = wasmsched(&["simulate", dir, "--output", "json"]);
    assert!(o.success, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        v["preemptions"],
        serde_json::json!([{"preemptor": "ml/serve-0", "node": "gpu-c", "victims": ["ml/eval-0"]}])
    );
    let o = wasmsched(&["simulate", dir, "--explain", "ml/serve-0"]);
    assert!(o.success, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("ml/serve-0 nominated to gpu-c, evicting ml/eval-0"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("Preemption: nominated gpu-c"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("more PodDisruptionBudget violations"));
}

#[test]
fn a_missing_priority_class_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pods.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4', pods: '10'}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n\
         spec: {priorityClassName: gold, containers: [{name: c, image: x}]}\n",
    )
    .unwrap();
    let o = wasmsched(&["simulate", dir.path().to_str().unwrap()]);
    assert!(!o.success);
    assert_eq!(
        o.stderr.trim(),
        "error: Pod ns/p: spec.priorityClassName: no PriorityClass \"gold\" was found"
    );
}

const NODES: &str = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {rank: "2"}}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {rank: "1"}}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
"#;

fn pod(name: &str, node: Option<&str>, priority: i32, cpu: &str, labels: &str) -> String {
    let placement = match node {
        Some(n) => format!("nodeName: {n}"),
        None => "schedulerName: chaos".into(),
    };
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t, labels: {{{labels}}}}}\n\
         spec: {{{placement}, priority: {priority}, containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]}}\n"
    )
}

/// `simulate` with NodeResourcesFit, the chaos component (as Filter and
/// advisor, with `args`) and DefaultPreemption.
fn with_chaos(args: &str, policy: &str, pods: &[String]) -> simulate::Report {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), NODES).unwrap();
    std::fs::write(dir.path().join("pods.yaml"), pods.concat()).unwrap();
    let cfg = format!(
        r#"
wasmPlugins:
- name: Chaos
  path: {path}
  failurePolicy: {policy}
profiles:
- schedulerName: chaos
  plugins:
    multiPoint:
      disabled: [{{name: "*"}}]
      enabled: [{{name: DefaultPreemption}}]
    filter:
      enabled: [{{name: NodeResourcesFit}}, {{name: Chaos}}]
  pluginConfig:
  - name: Chaos
    args: {args}
"#,
        path = chaos_wasm().display()
    );
    let file = config::parse(&cfg).expect("test config parses");
    let scheduler = config::build(&file, dir.path(), 1).unwrap();
    let manifests = manifest::load(&[dir.path().to_path_buf()]).unwrap();
    simulate::run(&scheduler, manifests, &simulate::Options::default()).unwrap()
}

fn preempted(r: &simulate::Report) -> Vec<(String, Vec<String>)> {
    r.preemptions
        .iter()
        .map(|p| (p.node.clone(), p.victims.clone()))
        .collect()
}

#[test]
fn a_wasm_filter_sees_the_node_without_its_victims() {
    // Only the wasm Filter rejects (a node holding 2 pods). On n1 both
    // low-priority pods are removed, then b (the more important) is
    // reprieved (1 pod: the plugin passes) and a is not (2 pods: it
    // rejects): the plugin must see each what-if state, not the node as
    // its resident copy has it.
    let pods = [
        pod("a", Some("n1"), 1, "100m", ""),
        pod("b", Some("n1"), 2, "100m", ""),
        pod("c", Some("n2"), 50, "100m", ""),
        pod("d", Some("n2"), 50, "100m", ""),
        pod("hi", None, 10, "100m", ""),
    ];
    let r = with_chaos(r#"{"max_pods": 2}"#, "Fail", &pods);
    assert_eq!(
        preempted(&r),
        [("n1".to_string(), vec!["t/a".to_string()])],
        "{r:?}"
    );
    assert!(r.scheduled.iter().any(|s| s.pod == "hi" && s.node == "n1"));
}

fn two_candidates() -> Vec<String> {
    vec![
        pod("x", Some("n1"), 1, "3", "app: x"),
        pod("y", Some("n2"), 1, "3", "protect: \"yes\""),
        pod("hi", None, 10, "2", ""),
    ]
}

#[test]
fn a_wasm_advisor_vetoes_and_ranks() {
    // Upstream ties n1 and n2; the advisor decides.
    let r = with_chaos(r#"{"veto_label": "protect"}"#, "Fail", &two_candidates());
    assert_eq!(preempted(&r), [("n1".to_string(), vec!["t/x".to_string()])]);
    let r = with_chaos(
        r#"{"rank_by_node_label": "rank"}"#,
        "Fail",
        &two_candidates(),
    );
    assert_eq!(preempted(&r), [("n2".to_string(), vec!["t/y".to_string()])]);
    // Vetoing every victim: no preemption.
    let r = with_chaos(r#"{"veto_label": "protect"}"#, "Fail", &{
        let mut p = two_candidates();
        p[0] = pod("x", Some("n1"), 1, "3", "protect: \"yes\"");
        p
    });
    assert!(r.preemptions.is_empty());
    assert_eq!(r.unschedulable.len(), 1);
}

#[test]
fn a_failing_advisor_follows_its_failure_policy() {
    let trap = r#"{"misbehave": "trap", "at": "post-filter", "rank_by_node_label": "rank"}"#;
    // Ignore: preemption goes on without its advice (upstream's choice).
    let r = with_chaos(trap, "Ignore", &two_candidates());
    assert_eq!(r.preemptions.len(), 1);
    assert_eq!(r.plugin_health[0].failures.get("trap"), Some(&1));
    // Fail: no preemption for that pod in that cycle; the pod stays
    // pending, and the failure is in its message.
    let r = with_chaos(trap, "Fail", &two_candidates());
    assert!(r.preemptions.is_empty());
    let msg = &r.unschedulable[0].message;
    assert!(msg.contains("post-filter failed"), "{msg}");
}
