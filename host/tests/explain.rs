//! `--explain` is the deciding cycle with a recorder attached: for every
//! pending pod of every example, explaining it changes no placement, and
//! the explanation names the node the pod went to, with the total the
//! decision used, and no node with a higher total. Also when a wasm plugin
//! fails with `failurePolicy: Ignore` (skipped for the pod, in the
//! decision and in the explanation alike). And PodTopologySpread's
//! system default constraints, explained for a pod of a Service or of a
//! ReplicaSet read from the manifests.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use wasmsched::config::{self, ConfigFile};
use wasmsched::simulate::{self, Report};
use wasmsched::{manifest, model::Pod};

/// (example directory, configuration file relative to the repository).
const EXAMPLES: &[(&str, Option<&str>)] = &[
    ("examples/gpu-cluster", None),
    (
        "examples/gpu-fragmentation",
        Some("examples/gpu-fragmentation/binpack.yaml"),
    ),
    ("examples/microservices", None),
    ("examples/gpu-training", None),
    (
        "examples/microservices",
        Some("examples/microservices/locality-off.yaml"),
    ),
];

fn config_of(config_file: Option<&str>) -> (ConfigFile, PathBuf) {
    match config_file {
        Some(c) => {
            let path = repo_root().join(c);
            (
                config::load(&path).unwrap(),
                path.parent().unwrap().to_path_buf(),
            )
        }
        None => (ConfigFile::default(), repo_root()),
    }
}

/// A fresh scheduler (same seed) per run, so runs are comparable.
fn run(example: &Path, file: &ConfigFile, base: &Path, explain: Option<String>) -> Report {
    let scheduler = config::build(file, base, 7).unwrap();
    let manifests = manifest::load(&[example.to_path_buf()]).unwrap();
    let opts = simulate::Options {
        all_pods: false,
        explain,
        metrics: None,
    };
    simulate::run(&scheduler, manifests, &opts).unwrap()
}

fn placements(r: &Report) -> Vec<(String, String, String, Option<i64>)> {
    r.scheduled
        .iter()
        .map(|s| (s.namespace.clone(), s.pod.clone(), s.node.clone(), s.score))
        .collect()
}

/// Checks every pending pod of `example` under `file`; returns how many
/// pods were explained.
fn check_example(example: &Path, file: &ConfigFile, base: &Path) -> usize {
    let baseline = run(example, file, base, None);
    let served = config::build(file, base, 7).unwrap();
    let pending: Vec<Pod> = manifest::load(&[example.to_path_buf()])
        .unwrap()
        .pods
        .into_iter()
        .filter(|p| p.node_name.is_none() && served.profile(&p.scheduler_name).is_some())
        .collect();
    for pod in &pending {
        let key = pod.key();
        let explained = run(example, file, base, Some(key.clone()));
        assert_eq!(
            placements(&explained),
            placements(&baseline),
            "{}: explaining {key} changed the placements",
            example.display()
        );
        check_pod(&explained, pod, &key);
    }
    pending.len()
}

/// The explanation of `pod` agrees with where the run put it.
fn check_pod(r: &Report, pod: &Pod, key: &str) {
    let e = r.explain.as_ref().expect("explained");
    let placed = r
        .scheduled
        .iter()
        .find(|s| s.namespace == pod.namespace && s.pod == pod.name);
    assert_eq!(e.node, placed.map(|s| s.node.clone()), "{key}: node");
    let Some(placed) = placed else {
        assert!(
            e.explanation.nodes.iter().all(|n| n.total.is_none()),
            "{key}: unschedulable, yet nodes have totals"
        );
        return;
    };
    let node = e
        .explanation
        .nodes
        .iter()
        .find(|n| n.node == placed.node)
        .unwrap_or_else(|| panic!("{key}: {} is not in the explanation", placed.node));
    let sum: i64 = node.scores.iter().filter_map(|s| s.weighted).sum();
    let with_totals = e
        .explanation
        .nodes
        .iter()
        .filter(|n| n.total.is_some())
        .count();
    if placed.score.is_none() {
        // The only feasible node: not scored by the decision, shown with
        // its scores for information.
        assert_eq!(with_totals, 1, "{key}: one feasible node");
        assert_eq!(node.total, Some(sum), "{key}: its shown total");
    }
    if let Some(total) = placed.score {
        assert_eq!(node.total, Some(total), "{key}: the decision's total");
        assert_eq!(sum, total, "{key}: the weighted scores add up to the total");
        for other in &e.explanation.nodes {
            assert!(
                other.total.unwrap_or(i64::MIN) <= total,
                "{key}: {} has a higher total than the chosen {}",
                other.node,
                placed.node
            );
        }
    }
}

#[test]
fn explain_agrees_with_the_decision_on_every_example_pod() {
    let mut explained = 0;
    for (example, config_file) in EXAMPLES {
        let (file, base) = config_of(*config_file);
        explained += check_example(&repo_root().join(example), &file, &base);
    }
    assert!(explained > 40, "{explained} pods explained");
}

/// The chaos plugin as a Score plugin that traps on every pod named
/// `web-*`, under `failurePolicy: Ignore`, next to the built-ins.
fn ignored_failure_config(dir: &Path) -> PathBuf {
    let cfg = dir.join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"wasmPlugins:
- name: Chaos
  path: {}
  failurePolicy: Ignore
profiles:
- schedulerName: gpu-scheduler
  plugins:
    score:
      enabled: [{{name: Chaos, weight: 5}}]
  pluginConfig:
  - name: Chaos
    args: {{misbehave: trap, at: score}}
"#,
            chaos_wasm().display()
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn explain_agrees_when_a_wasm_plugin_fails_with_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ignored_failure_config(dir.path());
    let file = config::load(&cfg).unwrap();
    let example = repo_root().join("examples/gpu-cluster");
    let n = check_example(&example, &file, dir.path());
    assert!(n > 5, "{n}");
    // The failing plugin was skipped for the pods, and never decided.
    let r = run(&example, &file, dir.path(), Some("ml/gpu-pod".into()));
    let health = r
        .plugin_health
        .iter()
        .find(|h| h.plugin == "Chaos")
        .expect("Chaos failed and was counted");
    assert!(health.skips > 0, "{health:?}");
    let e = r.explain.unwrap();
    for node in &e.explanation.nodes {
        assert!(
            node.scores.iter().all(|s| s.plugin != "Chaos"),
            "{}: an ignored plugin has no score",
            node.node
        );
    }
    assert!(
        e.explanation
            .skipped
            .contains(&("Chaos".to_string(), "Score".to_string())),
        "{:?}",
        e.explanation.skipped
    );
}

/// Each node's PodTopologySpread score, and the (plugin, extension point)
/// pairs that said Skip.
type Spread = (Vec<(String, Option<i64>)>, Vec<(String, String)>);

/// The normalized PodTopologySpread score of each node for `pending` in
/// `docs` (YAML documents), explained with no configuration file (the
/// built-in gpu-scheduler profile).
fn spread_scores(docs: &str) -> Spread {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), docs).unwrap();
    let r = run(
        dir.path(),
        &ConfigFile::default(),
        &repo_root(),
        Some("default/pending".into()),
    );
    let e = r.explain.expect("explained");
    let scores = e
        .explanation
        .nodes
        .iter()
        .map(|n| {
            let s = n.scores.iter().find(|s| s.plugin == "PodTopologySpread");
            (n.node.clone(), s.and_then(|s| s.normalized))
        })
        .collect();
    (scores, e.explanation.skipped)
}

const SPREAD_NODES: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '8', memory: 16Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '8', memory: 16Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
status: {allocatable: {cpu: '8', memory: 16Gi, pods: '110'}}
";

/// Two `app: web` pods on n1 and one pending, with `owner` (an
/// ownerReferences entry, or nothing) on each.
fn web_pods(owner: &str) -> String {
    let pod = |name: &str, node: &str| {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {{app: web}}{owner}}}\n\
             spec: {{{node}containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]}}\n"
        )
    };
    [
        pod("w1", "nodeName: n1, "),
        pod("w2", "nodeName: n1, "),
        pod("pending", "schedulerName: gpu-scheduler, "),
    ]
    .concat()
}

#[test]
fn system_default_spread_follows_the_pods_service_and_replica_set() {
    // Without a Service or controller the default constraints select
    // nothing: PodTopologySpread skips the pod.
    let (_, skipped) = spread_scores(&format!("{SPREAD_NODES}{}", web_pods("")));
    assert!(
        skipped.iter().any(|(p, _)| p == "PodTopologySpread"),
        "{skipped:?}"
    );

    // A Service selecting the pods: kube-scheduler's system default
    // (hostname, maxSkew 3, ScheduleAnyway) scores n1, which holds two of
    // them, below the empty nodes.
    let service = "---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\n\
                   spec: {selector: {app: web}, ports: [{port: 80}]}\n";
    let (by_service, skipped) = spread_scores(&format!("{SPREAD_NODES}{}{service}", web_pods("")));
    let spread = |point: &str| {
        skipped
            .iter()
            .any(|(p, at)| p == "PodTopologySpread" && at == point)
    };
    // Its Score runs; its Filter is skipped, as upstream's PreFilter skips
    // a pod without a DoNotSchedule constraint (the default is
    // ScheduleAnyway).
    assert!(!spread("Score") && spread("Filter"), "{skipped:?}");
    let score = |v: &[(String, Option<i64>)], n: &str| {
        v.iter()
            .find(|(x, _)| x == n)
            .and_then(|(_, s)| *s)
            .unwrap()
    };
    assert!(
        score(&by_service, "n1") < score(&by_service, "n2"),
        "{by_service:?}"
    );
    assert_eq!(score(&by_service, "n2"), score(&by_service, "n3"));

    // The same through the pods' ReplicaSet.
    let rs = "---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web, namespace: default}\n\
              spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, \
              spec: {containers: [{name: c, image: x}]}}}\n";
    let owner = ", ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]";
    let (by_rs, _) = spread_scores(&format!("{SPREAD_NODES}{}{rs}", web_pods(owner)));
    assert_eq!(by_rs, by_service, "ReplicaSet and Service spread alike");
}
