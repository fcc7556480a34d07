//! The `wasmsched` binary: `simulate` (table, JSON, `--explain`,
//! `--all-pods`, `--seed`), `plugin check` and `profiles`.
//!
//! Runs that use the built-in configuration compile the two built-in wasm
//! plugins, which takes a couple of seconds in a debug build; the other
//! runs use `fixtures/native-config.yaml` (native plugins only).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use common::*;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn native_config() -> String {
    s(&fixtures().join("native-config.yaml"))
}

fn small_cluster() -> String {
    s(&fixtures().join("small-cluster"))
}

/// What `simulate` says on stderr about the small cluster's ConfigMap.
const SMALL_CLUSTER_SKIPPED: &str = "skipped 1 object: 1 ConfigMap\n";

/// Success with nothing on stderr (but the small cluster's skipped line).
fn ok(o: &Output) {
    assert!(
        o.success,
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    );
    let stderr = o.stderr.strip_prefix(SMALL_CLUSTER_SKIPPED);
    assert!(
        o.stderr.is_empty() || stderr == Some(""),
        "stderr:\n{}",
        o.stderr
    );
}

// ---------------------------------------------------------- GPU example

#[test]
fn simulate_gpu_example_as_json() {
    let o = wasmsched(&["simulate", &s(&gpu_example()), "--output", "json"]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    let scheduled = v["scheduled"].as_array().expect("scheduled[]");
    let unschedulable = v["unschedulable"].as_array().expect("unschedulable[]");
    for e in scheduled {
        for k in ["namespace", "pod", "node", "profile"] {
            assert!(e[k].is_string(), "scheduled[].{k} in {e}");
        }
        assert!(
            e["score"].is_i64() || e["score"].is_null(),
            "scheduled[].score in {e}"
        );
        assert_eq!(e["profile"], "gpu-scheduler");
    }
    for e in unschedulable {
        for k in ["namespace", "pod", "message", "profile"] {
            assert!(e[k].is_string(), "unschedulable[].{k} in {e}");
        }
    }
    let placed: BTreeMap<String, (String, Value)> = scheduled
        .iter()
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e["namespace"].as_str().unwrap(),
                    e["pod"].as_str().unwrap()
                ),
                (e["node"].as_str().unwrap().to_string(), e["score"].clone()),
            )
        })
        .collect();
    let failed: BTreeMap<String, String> = unschedulable
        .iter()
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e["namespace"].as_str().unwrap(),
                    e["pod"].as_str().unwrap()
                ),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        placed.keys().collect::<Vec<_>>(),
        [
            "etl/data-prep",
            "ml/gpu-pod",
            "ml/llm-finetune",
            "ml/resnet-train",
            "ml/t4-inference-a",
            "ml/t4-inference-b"
        ]
    );
    assert_eq!(
        failed.keys().collect::<Vec<_>>(),
        ["ml/h100-job", "ml/huge-job"]
    );
    // gpu-a100-1 has exactly 2 free GPUs (6 of 8 used); gpu-a100-2 has 8:
    // GpuTopology packs.
    assert_eq!(placed["ml/gpu-pod"].0, "gpu-a100-1");
    assert!(
        placed["ml/gpu-pod"].1.is_i64(),
        "scored among several feasible nodes"
    );
    // Only one node tolerates/fits: scoring is skipped, score is null.
    assert_eq!(
        placed["ml/llm-finetune"],
        ("gpu-a100-80g".to_string(), Value::Null)
    );
    assert!(
        failed["ml/h100-job"].contains("GPU model mismatch"),
        "{}",
        failed["ml/h100-job"]
    );
    assert_eq!(v["ignored"], 1);
    assert!(v.get("explain").is_none());
    assert!(v.get("plugin_health").is_none());
}

/// The rows of an `--explain` table: (node, every line of its row).
fn explain_rows(out: &str, nodes: &[&str]) -> Vec<(String, String)> {
    let start = out.find("Explain ").expect("an Explain section");
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in out[start..].lines() {
        let cells = line.trim_start_matches('│').trim_start();
        let first = cells.split_whitespace().next().unwrap_or("");
        if nodes.contains(&first) {
            rows.push((first.to_string(), line.to_string()));
        } else if let Some(last) = rows.last_mut() {
            if line.starts_with('│') {
                last.1.push('\n');
                last.1.push_str(line);
            }
        }
    }
    rows
}

#[test]
fn explain_gpu_pod_lists_every_node_winner_first() {
    let o = wasmsched(&["simulate", &s(&gpu_example()), "--explain", "ml/gpu-pod"]);
    ok(&o);
    assert!(
        o.stdout
            .contains("Explain ml/gpu-pod (profile gpu-scheduler): placed on gpu-a100-1\n"),
        "{}",
        o.stdout
    );
    let nodes = [
        "gpu-a100-1",
        "gpu-a100-2",
        "gpu-a100-80g",
        "gpu-v100-1",
        "gpu-t4-1",
        "gpu-t4-2",
        "cpu-1",
        "cpu-2",
    ];
    let rows = explain_rows(&o.stdout, &nodes);
    let listed: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    let mut expected = nodes.to_vec();
    expected.sort();
    assert_eq!(sorted, expected, "every node once:\n{}", o.stdout);
    assert_eq!(listed[0], "gpu-a100-1", "winner first:\n{}", o.stdout);
    // Feasible before rejected.
    assert_eq!(listed[1], "gpu-a100-2");
    let row = |n: &str| rows.iter().find(|(m, _)| m == n).unwrap().1.clone();
    for n in ["gpu-a100-1", "gpu-a100-2"] {
        assert!(row(n).contains(" pass "), "{}", row(n));
        assert!(row(n).contains("GpuTopology "), "{}", row(n));
    }
    for n in ["gpu-v100-1", "gpu-t4-1", "gpu-t4-2"] {
        assert!(
            row(n).contains("GpuTopology: GPU model mismatch"),
            "{n}:\n{}",
            row(n)
        );
    }
    assert!(
        row("gpu-t4-2").contains("NodeUnschedulable: node(s) were unschedulable"),
        "{}",
        row("gpu-t4-2")
    );
    assert!(row("gpu-a100-80g").contains("TaintToleration: node(s) had untolerated taint(s)"));
    for n in ["cpu-1", "cpu-2"] {
        assert!(
            row(n).contains("NodeResourcesFit: Insufficient nvidia.com/gpu"),
            "{}",
            row(n)
        );
    }
}

#[test]
fn explain_as_json_carries_every_verdict() {
    let o = wasmsched(&[
        "simulate",
        &small_cluster(),
        "--config",
        &native_config(),
        "--explain",
        "apps/huge",
        "--output",
        "json",
    ]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let e = &v["explain"];
    assert_eq!(e["namespace"], "apps");
    assert_eq!(e["pod"], "huge");
    assert_eq!(e["node"], Value::Null);
    assert_eq!(e["pod_reason"], Value::Null);
    let nodes = e["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    let tainted = nodes.iter().find(|n| n["node"] == "tainted").unwrap();
    // Every plugin's verdict, not only the first rejection.
    let verdicts: BTreeMap<&str, &Value> = tainted["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f[0].as_str().unwrap(), &f[1]))
        .collect();
    assert_eq!(verdicts["TaintToleration"]["verdict"], "reject");
    assert_eq!(
        verdicts["TaintToleration"]["reason"],
        "node(s) had untolerated taint(s)"
    );
    assert_eq!(verdicts["NodeResourcesFit"]["reason"], "Insufficient cpu");
    assert_eq!(verdicts["NodeUnschedulable"]["verdict"], "pass");
    assert!(nodes.iter().all(|n| n["total"].is_null()));
}

// ------------------------------------------------------------- --all-pods

#[test]
fn pods_of_other_schedulers_are_left_alone_without_all_pods() {
    let o = wasmsched(&[
        "simulate",
        &s(&gpu_example()),
        "--config",
        &native_config(),
        "--output",
        "json",
    ]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["ignored"], 1);
    assert!(!o.stdout.contains("web-frontend"));
    let t = wasmsched(&["simulate", &s(&gpu_example()), "--config", &native_config()]);
    ok(&t);
    assert!(t.stdout.contains("\n1 pending pod(s) name a schedulerName no profile serves (use --all-pods to include them).\n"), "{}", t.stdout);
}

#[test]
fn all_pods_schedules_web_frontend_too() {
    let o = wasmsched(&[
        "simulate",
        &s(&gpu_example()),
        "--config",
        &native_config(),
        "--all-pods",
        "--output",
        "json",
    ]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["ignored"], 0);
    let web = v["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["namespace"] == "web" && e["pod"] == "web-frontend")
        .unwrap_or_else(|| panic!("web/web-frontend not scheduled:\n{}", o.stdout));
    assert_eq!(web["profile"], "gpu-scheduler");
    assert!(
        [
            "gpu-a100-1",
            "gpu-a100-2",
            "gpu-v100-1",
            "gpu-t4-1",
            "cpu-1",
            "cpu-2"
        ]
        .contains(&web["node"].as_str().unwrap()),
        "{web}"
    );
}

// --------------------------------------------------------- table, seeds

#[test]
fn table_output_of_a_small_cluster() {
    let o = wasmsched(&["simulate", &small_cluster(), "--config", &native_config()]);
    ok(&o);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "Scheduled 1 pod(s):");
    let row: Vec<&str> = lines
        .iter()
        .find(|l| l.contains("apps/medium"))
        .unwrap()
        .trim_matches('│')
        .split_whitespace()
        .collect();
    assert_eq!(row, ["apps/medium", "big", "-"]);
    assert!(o.stdout.contains(
        "\nUnschedulable 1 pod(s):\n  apps/huge: 0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.\n"
    ), "{}", o.stdout);
    assert!(o.stdout.ends_with("\n1 pending pod(s) name a schedulerName no profile serves (use --all-pods to include them).\n"), "{}", o.stdout);
}

#[test]
fn same_seed_same_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut objs: Vec<Value> = (0..6).map(|i| NodeB::new(&format!("n{i}")).0).collect();
    objs.extend((0..4).map(|i| {
        PodB::new(&format!("p{i}"))
            .scheduler("gpu-scheduler")
            .cpu("1")
            .created_at(i)
            .0
    }));
    write_manifest(&dir.path().join("c.yaml"), &objs);
    let run = |seed: &str| {
        let o = wasmsched(&[
            "simulate",
            &s(dir.path()),
            "--config",
            &native_config(),
            "--output",
            "json",
            "--seed",
            seed,
        ]);
        ok(&o);
        o.stdout
    };
    let a = run("42");
    assert_eq!(a, run("42"));
    let v: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["scheduled"].as_array().unwrap().len(), 4);
    assert!(
        (0..30).map(|s| s.to_string()).any(|s| run(&s) != a),
        "no seed in 0..30 changes the placements"
    );
}

// ---------------------------------------------------------- plugin check

#[test]
fn plugin_check_of_chaos() {
    let chaos = s(&chaos_wasm());
    let o = wasmsched(&["plugin", "check", &chaos]);
    ok(&o);
    let fields: BTreeMap<&str, &str> = o
        .stdout
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k, v.trim()))
        .collect();
    assert_eq!(fields["file"], chaos);
    assert_eq!(
        fields["exports"],
        "lifecycle, filter, score, normalize-score, post-filter"
    );
    assert_eq!(
        fields["contract"],
        format!("wasmsched:plugin@{}", wasmsched::wasm::CONTRACT_VERSION)
    );
    let size = std::fs::metadata(chaos_wasm()).unwrap().len();
    assert_eq!(fields["size"], format!("{size} bytes"));
    assert_eq!(fields["sha256"].len(), 64);
    assert!(fields["init"].starts_with("ok ("), "{}", o.stdout);
}

#[test]
fn plugin_check_with_args_the_plugin_rejects() {
    let chaos = s(&chaos_wasm());
    let o = wasmsched(&["plugin", "check", &chaos, "--args", r#"{"bogus":1}"#]);
    assert!(!o.success);
    let lines: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{}", o.stderr);
    assert!(
        lines[0].starts_with(&format!(
            "error: {chaos}: init failed: rejected its args: chaos args: unknown field `bogus`"
        )),
        "{}",
        lines[0]
    );
}

// -------------------------------------------------------------- profiles

#[test]
fn profiles_lists_the_built_in_gpu_scheduler() {
    let o = wasmsched(&["profiles"]);
    ok(&o);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "profile gpu-scheduler");
    assert_eq!(lines[1], "  queuesort: Coscheduling");
    assert_eq!(lines[2], "  preenqueue: DynamicResources, SchedulingGates");
    assert_eq!(
        lines[3],
        "  filter: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, \
         VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity, \
         DynamicResources, NodeDeclaredFeatures, Coscheduling, GpuTopology, NetworkLocality"
    );
    assert_eq!(
        lines[4],
        "  score:  TaintToleration (weight 3), NodeAffinity (weight 2), NodeResourcesFit (weight 1), \
         VolumeBinding (weight 1), PodTopologySpread (weight 2), InterPodAffinity (weight 2), DynamicResources (weight 2), \
         NodeResourcesBalancedAllocation (weight 1), ImageLocality (weight 1), GpuTopology (weight 3), NetworkLocality (weight 2)"
    );
    assert_eq!(
        lines[5],
        "  postfilter: DynamicResources, Coscheduling, DefaultPreemption"
    );
    assert_eq!(
        lines[6],
        "  reserve: VolumeBinding, DynamicResources, Coscheduling, GpuTopology, HAMiNodeLock"
    );
    assert_eq!(lines[7], "  permit: Coscheduling");
    assert_eq!(
        lines[8],
        "  prebind: VolumeBinding, DynamicResources, GpuTopology, HAMiNodeLock"
    );
    assert_eq!(lines[9], "  bind: DefaultBinder");
    assert_eq!(lines[10], "  postbind: Coscheduling");
    assert_eq!(lines[11], "  preemption advisors: GpuTopology");
    assert!(
        lines[12].starts_with("  from default (wasmsched): NodeUnschedulable, NodeName, "),
        "{}",
        o.stdout
    );
    assert!(lines[12].ends_with(", SchedulingGates"), "{}", o.stdout);
    assert!(
        lines[13].starts_with("  percentageOfNodesToScore: adaptive (upstream's rule: "),
        "{}",
        o.stdout
    );
    assert!(
        lines[14].starts_with("  args of NodeResourcesFit: {\"ignoredResources\":"),
        "{}",
        o.stdout
    );
    assert!(
        lines[14].ends_with(" (the defaults add ignoredResources: HAMi's resources, which nodes do not advertise: GpuTopology fits them on HAMi nodes)"),
        "{}",
        o.stdout
    );
    assert!(
        lines[15].starts_with(
            "  gates of Kubernetes 1.37.2 on by default, honoured: DynamicResourceAllocation, "
        ),
        "{}",
        o.stdout
    );
    assert!(
        lines[15].contains(", SchedulerAsyncPreemption, "),
        "{}",
        o.stdout
    );
    assert_eq!(
        lines[16],
        "  not implemented: OpportunisticBatching (issue 52), SchedulerPopFromBackoffQ (issue 52), \
         NominatedNodeNameForExpectation (no issue yet)"
    );
    assert!(
        lines[17].starts_with("wasm plugin GpuTopology: "),
        "{}",
        o.stdout
    );
    assert!(
        lines[18].starts_with("wasm plugin NetworkLocality: "),
        "{}",
        o.stdout
    );
    assert_eq!(lines.len(), 19, "{}", o.stdout);
}

#[test]
fn profiles_of_a_configuration_file() {
    let o = wasmsched(&["profiles", "--config", &native_config()]);
    ok(&o);
    let chain = "profile gpu-scheduler\n  queuesort: Coscheduling\n  preenqueue: DynamicResources, SchedulingGates\n  \
         filter: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, \
         NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, \
         InterPodAffinity, DynamicResources, NodeDeclaredFeatures, Coscheduling\n  score:  TaintToleration (weight 3), \
         NodeAffinity (weight 2), NodeResourcesFit (weight 1), VolumeBinding (weight 1), \
         PodTopologySpread (weight 2), \
         InterPodAffinity (weight 2), DynamicResources (weight 2), NodeResourcesBalancedAllocation (weight 1), ImageLocality (weight 1)\n  \
         postfilter: DynamicResources, Coscheduling, DefaultPreemption\n  reserve: VolumeBinding, DynamicResources, Coscheduling, HAMiNodeLock\n  \
         permit: Coscheduling\n  prebind: VolumeBinding, DynamicResources, HAMiNodeLock\n  bind: DefaultBinder\n  \
         postbind: Coscheduling\n  from default (wasmsched): NodeUnschedulable, ";
    assert!(o.stdout.starts_with(chain), "{}", o.stdout);
    // No GpuTopology: no default args for NodeResourcesFit, no args.
    assert!(!o.stdout.contains("args of"), "{}", o.stdout);
    assert!(
        o.stdout
            .contains("\n  percentageOfNodesToScore: adaptive (upstream's rule: "),
        "{}",
        o.stdout
    );
    assert_eq!(o.stdout.lines().count(), 15, "{}", o.stdout);
}

#[test]
fn version_and_usage() {
    let o = wasmsched(&["--version"]);
    ok(&o);
    assert_eq!(
        o.stdout,
        format!("wasmsched {}\n", env!("CARGO_PKG_VERSION"))
    );
    let o = wasmsched(&["simulate"]);
    assert_eq!(o.code, Some(2), "missing paths is a usage error");
    assert!(o.stderr.contains("<PATHS>..."), "{}", o.stderr);
}

/// Runs `wasmsched profiles` on a configuration written to a temp file.
fn profiles_of(yaml: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scheduler.yaml");
    std::fs::write(&f, yaml).unwrap();
    wasmsched(&["profiles", "--config", f.to_str().unwrap()])
}

const KUBE_FILE: &str =
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

/// A `KubeSchedulerConfiguration` means kube-scheduler's defaults: one
/// profile `default-scheduler` with upstream's default plugins and
/// weights, no wasm built-in and no HAMi lock unless named.
#[test]
fn a_kube_scheduler_file_means_kube_schedulers_defaults() {
    let upstream = "profile default-scheduler\n  queuesort: PrioritySort\n  preenqueue: DynamicResources, SchedulingGates\n  \
         filter: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, \
         NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, \
         InterPodAffinity, DynamicResources, NodeDeclaredFeatures\n  score:  TaintToleration (weight 3), \
         NodeAffinity (weight 2), NodeResourcesFit (weight 1), VolumeBinding (weight 1), \
         PodTopologySpread (weight 2), \
         InterPodAffinity (weight 2), DynamicResources (weight 2), NodeResourcesBalancedAllocation (weight 1), ImageLocality (weight 1)\n  \
         postfilter: DynamicResources, DefaultPreemption\n  reserve: VolumeBinding, DynamicResources\n  \
         prebind: VolumeBinding, DynamicResources\n  bind: DefaultBinder\n  \
         from default (kube-scheduler): NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, \
         NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, \
         InterPodAffinity, DynamicResources, NodeDeclaredFeatures, NodeResourcesBalancedAllocation, ImageLocality, \
         DefaultPreemption, DefaultBinder, SchedulingGates, PrioritySort\n  \
         percentageOfNodesToScore: adaptive (upstream's rule: every node below 100 nodes, \
         else 50% less 1% per 125 nodes, at least 5% and 100 nodes)\n  \
         gates of Kubernetes 1.37.2 on by default, honoured: DynamicResourceAllocation, DRAPrioritizedList, \
         DRAAdminAccess, DRAPartitionableDevices, DRASchedulerFilterTimeout, DRAResourceClaimDeviceStatus, \
         DRADeviceTaints, PodLevelResources, NodeInclusionPolicyInPodTopologySpread, \
         MatchLabelKeysInPodTopologySpread, StorageCapacityScoring, VolumeAttributesClass, NodeDeclaredFeatures, \
         InPlacePodVerticalScaling, InPlacePodLevelResourcesVerticalScaling, DRAConsumableCapacity, \
         DRAExtendedResource, DRADeviceTaintRules, DRADeviceBindingConditions, SchedulerAsyncPreemption, \
         VolumeLimitScaling\n  \
         not implemented: OpportunisticBatching (issue 52), SchedulerPopFromBackoffQ (issue 52), \
         NominatedNodeNameForExpectation (no issue yet)\n";
    let o = profiles_of(KUBE_FILE);
    ok(&o);
    assert_eq!(o.stdout, upstream);
    // The only profile without a name is default-scheduler too.
    let o = profiles_of(&format!("{KUBE_FILE}profiles:\n- plugins: {{}}\n"));
    ok(&o);
    assert_eq!(o.stdout, upstream);
    // A built-in wasm plugin runs where the file names it.
    let o = profiles_of(&format!(
        "{KUBE_FILE}profiles:\n- schedulerName: s\n  plugins:\n    multiPoint:\n      enabled:\n      - name: GpuTopology\n"
    ));
    ok(&o);
    assert!(o.stdout.contains("GpuTopology (weight 3)"), "{}", o.stdout);
    assert!(!o.stdout.contains("NetworkLocality"), "{}", o.stdout);
}

/// Every extension point of a profile's `plugins` is read as
/// kube-scheduler reads it.
#[test]
fn every_extension_point_of_a_kube_scheduler_file_is_read() {
    let o = profiles_of(&format!(
        "{KUBE_FILE}profiles:\n- schedulerName: s\n  plugins:\n    queueSort:\n      enabled: [{{name: PrioritySort}}]\n    \
         preEnqueue:\n      enabled: [{{name: SchedulingGates}}]\n    \
         preScore:\n      disabled: [{{name: \"*\"}}]\n    \
         score:\n      enabled: [{{name: NodeResourcesFit, weight: 5}}]\n    \
         preFilter:\n      disabled: [{{name: VolumeRestrictions}}]\n    \
         postFilter:\n      disabled: [{{name: DefaultPreemption}}]\n    \
         reserve: {{}}\n    permit: {{}}\n    preBind: {{}}\n    bind: {{}}\n    postBind: {{}}\n"
    ));
    ok(&o);
    assert!(
        o.stdout.contains("  score:  NodeResourcesFit (weight 5)\n"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains("VolumeRestrictions"), "{}", o.stdout);
    // DefaultPreemption is gone from every point; the gate it carries is
    // named as not honoured.
    let (chain, gates) = o.stdout.split_once("  gates of").unwrap();
    assert!(!chain.contains("DefaultPreemption"), "{}", o.stdout);
    assert!(
        gates.contains(
            "not honoured here: SchedulerAsyncPreemption (DefaultPreemption not in this profile)"
        ),
        "{}",
        o.stdout
    );
    // What is not supported is one line naming the field.
    for (yaml, expected) in [
        (
            format!("{KUBE_FILE}extenders:\n- urlPrefix: http://x\n  filterVerb: filter\n"),
            "extenders: scheduler extenders are not supported",
        ),
        (
            format!("{KUBE_FILE}podInitialBackoffSeconds: 3\npodMaxBackoffSeconds: 2\n"),
            "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (3), got 2",
        ),
        (
            format!("{KUBE_FILE}delayCacheUntilActive: true\n"),
            "delayCacheUntilActive: not supported",
        ),
        (
            format!("{KUBE_FILE}profiles:\n- schedulerName: s\n  plugins:\n    queueSort:\n      enabled: [{{name: Mine}}]\n"),
            "profiles[0].plugins.queueSort.enabled[0].name: plugin \"Mine\" does not implement QueueSort",
        ),
        (
            format!("{KUBE_FILE}profiles:\n- schedulerName: s\n  plugins:\n    bind:\n      enabled: [{{name: NodePorts}}]\n"),
            "profiles[0].plugins.bind.enabled[0].name: plugin \"NodePorts\" does not implement Bind",
        ),
        (
            format!("{KUBE_FILE}profiles:\n- plugins: {{}}\n- plugins: {{}}\n"),
            "profiles[0].schedulerName: must not be empty",
        ),
    ] {
        let o = profiles_of(&yaml);
        assert_eq!(o.code, Some(1), "{yaml}: {}", o.stderr);
        assert!(o.stderr.contains(expected), "{yaml}: {}", o.stderr);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
    }
    // Accepted at kube-scheduler's defaults, and at other backoffs.
    for backoff in ["1\npodMaxBackoffSeconds: 10", "3\npodMaxBackoffSeconds: 60"] {
        let o = profiles_of(&format!(
            "{KUBE_FILE}podInitialBackoffSeconds: {backoff}\nenableProfiling: true\nextenders: []\n"
        ));
        ok(&o);
    }
}

// ------------------------------------------------------ node metrics

/// `simulate --metrics`: dcgm-exporter's series change GpuTopology's
/// utilization term, and `--explain` shows each node's values, their age
/// and where they came from; a bad file is one line naming it.
#[test]
fn simulate_with_dcgm_metrics_explains_the_utilization_term() {
    let metrics = s(&gpu_example().join("dcgm-metrics.prom"));
    let pod = "ml/t4-inference-a";
    let example = s(&gpu_example());
    let explain = |extra: &[&str]| {
        let mut args = vec!["simulate", &example, "--explain", pod, "--output", "json"];
        args.extend_from_slice(extra);
        let o = wasmsched(&args);
        ok(&o);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        v["explain"].clone()
    };
    let gpu_score = |e: &Value, node: &str| -> i64 {
        let n = e["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == node)
            .unwrap_or_else(|| panic!("{node} in {e}"));
        let s = n["scores"].as_array().unwrap();
        let g = s.iter().find(|s| s["plugin"] == "GpuTopology").unwrap();
        g["raw"].as_i64().unwrap()
    };
    // 4 free of 4 T4s, binpack: fit 65. Utilization unknown (50%):
    // (65*7 + 50*3)/10; from the file, the mean of the four GPUs (86%):
    // (65*7 + 14*3)/10.
    let without = explain(&[]);
    assert_eq!(gpu_score(&without, "gpu-t4-1"), 60);
    assert!(without.get("node_metrics").is_none(), "{without}");
    let with = explain(&["--metrics", &metrics]);
    assert_eq!(with["node"], "gpu-t4-1", "{with}");
    assert_eq!(gpu_score(&with, "gpu-t4-1"), 49);
    let t4 = with["node_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "gpu-t4-1")
        .unwrap_or_else(|| panic!("{with}"))
        .clone();
    assert_eq!(t4["source"], format!("file {metrics}"));
    let util = t4["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "DCGM_FI_DEV_GPU_UTIL")
        .unwrap()
        .clone();
    assert_eq!(util["value"], 86.0);
    assert_eq!(util["age_seconds"], 0.0);
    // 2 metrics (the file's DCGM_FI_DEV_FB_USED is not one of the
    // default queries), each the node's mean and 4 GPUs' values.
    assert_eq!(t4["metrics"].as_array().unwrap().len(), 10);

    let o = wasmsched(&[
        "simulate",
        &example,
        "--metrics",
        &metrics,
        "--explain",
        pod,
    ]);
    ok(&o);
    assert!(
        o.stdout.contains(&format!("Node metrics (from file {metrics}):"))
            && o.stdout.contains(
                "  gpu-t4-1: DCGM_FI_DEV_FB_FREE 4792.75 (age 0s), DCGM_FI_DEV_GPU_UTIL 86 (age 0s); \
                 8 per-device values"
            ),
        "{}",
        o.stdout
    );

    let bad =
        std::env::temp_dir().join(format!("wasmsched-bad-metrics-{}.json", std::process::id()));
    std::fs::write(&bad, r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"gpu-t4-1"},"value":[1,"3"]}]}}"#).unwrap();
    let o = wasmsched(&["simulate", &s(&gpu_example()), "--metrics", &s(&bad)]);
    assert_one_line_error(&o, &[&s(&bad), "no __name__ label"]);
    let _ = std::fs::remove_file(&bad);
}

// ------------------------------------------- CI gates, YAML, completions

#[test]
fn fail_on_unschedulable_exits_3_after_the_report() {
    let args = ["simulate", &small_cluster(), "--config", &native_config()];
    let o = wasmsched(&args);
    ok(&o);
    let mut gated = args.to_vec();
    gated.push("--fail-on-unschedulable");
    let o = wasmsched(&gated);
    assert_eq!(o.code, Some(3), "{}", o.stderr);
    assert!(o.stdout.contains("Unschedulable 1 pod(s):"), "{}", o.stdout);
    assert_eq!(
        o.stderr,
        format!("{SMALL_CLUSTER_SKIPPED}error: 1 pod(s) unschedulable (--fail-on-unschedulable)\n")
    );
    // Nothing unschedulable: 0.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus:\n  allocatable: {cpu: '4', memory: 8Gi, pods: '110'}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: x}]\n",
    )
    .unwrap();
    let path = s(&dir.path().join("c.yaml"));
    let o = wasmsched(&[
        "simulate",
        &path,
        "--config",
        &native_config(),
        "--fail-on-unschedulable",
    ]);
    ok(&o);
}

#[test]
fn yaml_output_is_the_json_report() {
    let base = ["simulate", &small_cluster(), "--config", &native_config()];
    let json = wasmsched(&[&base[..], &["--output", "json"]].concat());
    ok(&json);
    let yaml = wasmsched(&[&base[..], &["--output", "yaml"]].concat());
    ok(&yaml);
    let from_yaml: Value =
        serde_saphyr::from_str(&yaml.stdout).unwrap_or_else(|e| panic!("{e}: {}", yaml.stdout));
    let from_json: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(from_yaml, from_json);
    assert!(yaml.stdout.contains("unschedulable:"), "{}", yaml.stdout);
}

#[test]
fn completion_scripts_name_the_commands() {
    for (shell, marker) in [
        ("bash", "_wasmsched()"),
        ("zsh", "#compdef wasmsched"),
        ("fish", "complete -c wasmsched"),
    ] {
        let o = wasmsched(&["completion", shell]);
        ok(&o);
        assert!(o.stdout.contains(marker), "{shell}: {}", o.stdout);
        for cmd in ["simulate", "profiles", "completion"] {
            assert!(o.stdout.contains(cmd), "{shell} misses {cmd}");
        }
    }
    let o = wasmsched(&["completion", "tcsh"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}

/// kubectl's table: capitals, columns three spaces apart, no borders, no
/// trailing spaces.
#[test]
fn the_table_is_plain_as_kubectls() {
    let o = wasmsched(&["simulate", &small_cluster(), "--config", &native_config()]);
    ok(&o);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[1], "POD           NODE   SCORE");
    assert_eq!(lines[2], "apps/medium   big    -");
    assert!(!o.stdout.contains('│'), "{}", o.stdout);
}

#[test]
fn verbosity_takes_klogs_spellings() {
    let config = native_config();
    for v in [["-v", "2"], ["-v=2", ""], ["--v=2", ""], ["--v", "2"]] {
        let mut args: Vec<&str> = v.iter().copied().filter(|a| !a.is_empty()).collect();
        args.extend(["profiles", "--config", &config]);
        let o = wasmsched(&args);
        assert!(o.success, "{v:?}: {}", o.stderr);
    }
    let o = wasmsched(&["--logging-format", "xml", "profiles"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}

/// `-v=10` logs every plugin's score in klog's JSON shape; the wasm
/// engine's compiler, which runs here (the built-in components), logs
/// nothing even at that level.
#[test]
fn v10_logs_scores_as_klog_json_and_no_compiler_internals() {
    let o = wasmsched(&[
        "-v=10",
        "--logging-format",
        "json",
        "simulate",
        &s(&gpu_example()),
    ]);
    assert!(o.success, "{}", o.stderr);
    let lines: Vec<Value> = o
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let scores: Vec<&Value> = lines
        .iter()
        .filter(|l| l["msg"] == "Plugin scored node for pod")
        .collect();
    assert!(!scores.is_empty(), "{}", o.stderr);
    for l in &scores {
        assert_eq!(l["v"], 10, "{l}");
        assert!(
            l["pod"]["name"].is_string() && l["pod"]["namespace"].is_string(),
            "{l}"
        );
        assert!(l["node"]["name"].is_string(), "{l}");
        assert!(l["plugin"].is_string() && l["score"].is_i64(), "{l}");
    }
    assert!(
        scores.iter().any(|l| l["plugin"] == "GpuTopology"),
        "the wasm plugin's scores too"
    );
    assert!(
        !o.stderr.contains("cranelift") && !o.stderr.contains("wasmtime"),
        "{}",
        &o.stderr[..o.stderr.len().min(2000)]
    );
    // The default level: nothing.
    let o = wasmsched(&["simulate", &s(&gpu_example())]);
    ok(&o);
}

// ------------------------------------------- issue 49: a CLI that behaves

/// A cluster of one Node and two pending Pods (one too large), as YAML.
const TWO_PODS: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  allocatable: {cpu: '4', memory: 8Gi, pods: '110'}\n---\n\
    apiVersion: v1\nkind: Pod\nmetadata: {name: small, namespace: default}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]\n---\n\
    apiVersion: v1\nkind: Pod\nmetadata: {name: large, namespace: default}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: x, resources: {requests: {cpu: '64'}}}]\n";

/// Runs `wasmsched ARGS` with `stdin` as its input and stdout a pipe
/// closed at once (a reader that stopped, as `| head -0`); returns the
/// exit status and stderr.
fn with_closed_stdout(args: &[&str], cwd: &Path) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = wasmsched_command(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running wasmsched");
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), stderr)
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("c.yaml");
    std::fs::write(&cluster, TWO_PODS).unwrap();
    let cluster = s(&cluster);
    let config = native_config();
    let gpu = s(&gpu_example());
    let chaos = s(&chaos_wasm());
    let scale_down = s(&repo_root().join("examples/scale-down"));
    let commands: Vec<Vec<&str>> = vec![
        vec!["simulate", &gpu],
        vec!["simulate", &cluster, "--config", &config, "-o", "json"],
        vec![
            "simulate",
            &cluster,
            "--config",
            &config,
            "--explain",
            "default/small",
        ],
        vec!["profiles"],
        vec!["profiles", "--config", &config],
        vec!["plugin", "check", &chaos],
        vec!["plugin", "new", "piped-policy", "--lang", "rust"],
        vec!["scale-down-preview", "--replicas", "1", &scale_down],
        vec![
            "bench",
            "--nodes",
            "20",
            "--pods",
            "20",
            "--scenario",
            "core",
        ],
        vec!["completion", "bash"],
        vec!["--help"],
        vec!["simulate", "--help"],
        vec!["--version"],
    ];
    for args in commands {
        let (status, stderr) = with_closed_stdout(&args, dir.path());
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert!(
            status.code() == Some(0) || status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {status:?}\n{stderr}"
        );
        // bench says what it runs on stderr; the others say nothing.
        if args[0] != "bench" {
            assert_eq!(stderr, "", "{args:?}");
        }
    }
}

/// Runs `wasmsched ARGS` with `input` on stdin.
fn with_stdin(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = wasmsched_command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running wasmsched");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    o.into()
}

#[test]
fn simulate_dash_reads_yaml_or_json_from_stdin() {
    let config = native_config();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, TWO_PODS).unwrap();
    let args = |path: &str| -> Vec<String> {
        ["simulate", path, "--config", &config, "-o", "json"]
            .iter()
            .map(|a| a.to_string())
            .collect()
    };
    let from_file = wasmsched(
        &args(&s(&file))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    ok(&from_file);
    // Multi-document YAML.
    let dash = args("-");
    let dash: Vec<&str> = dash.iter().map(String::as_str).collect();
    let o = with_stdin(&dash, TWO_PODS);
    ok(&o);
    assert_eq!(o.stdout, from_file.stdout);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["scheduled"][0]["pod"], "small");
    assert_eq!(v["unschedulable"][0]["pod"], "large");
    // JSON: a List, then a second document (kubectl's `-o json` of two
    // commands, concatenated).
    let docs: Vec<Value> = TWO_PODS
        .split("---\n")
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect();
    let json = format!(
        "{}\n---\n{}\n",
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": &docs[..2]}),
        docs[2]
    );
    let o = with_stdin(&dash, &json);
    ok(&o);
    assert_eq!(o.stdout, from_file.stdout);
    // Beside files: the Node from a file, the Pods from stdin.
    let node = dir.path().join("node.yaml");
    std::fs::write(&node, TWO_PODS.split("---\n").next().unwrap()).unwrap();
    let pods: Vec<&str> = TWO_PODS.split("---\n").skip(1).collect();
    let o = with_stdin(
        &[
            "simulate",
            &s(&node),
            "-",
            "--config",
            &config,
            "-o",
            "json",
        ],
        &pods.join("---\n"),
    );
    ok(&o);
    assert_eq!(o.stdout, from_file.stdout);
    // Errors name stdin.
    let o = with_stdin(&dash, "kind: Pod\nmetadata: [\n");
    assert_one_line_error(&o, &["error: stdin: document 1: not valid YAML/JSON"]);
    let o = with_stdin(&["simulate", "-", "-"], TWO_PODS);
    assert_one_line_error(&o, &["error: stdin: `-` given more than once"]);
}

#[test]
fn input_with_nothing_to_schedule_is_a_one_line_error() {
    let config = native_config();
    let dir = tempfile::tempdir().unwrap();
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  allocatable: {cpu: '4', memory: 8Gi, pods: '110'}\n";
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: x}]\n";
    let bound = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: x}]\n";
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
    let case = |name: &str, files: &[(&str, &str)]| -> String {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for (f, text) in files {
            std::fs::write(d.join(f), text).unwrap();
        }
        s(&d)
    };
    let empty_dir = case("empty-dir", &[("notes.txt", "not a manifest")]);
    let empty_file = case("empty-file", &[("a.yaml", "")]);
    let unrelated = case("unrelated", &[("cm.yaml", config_map)]);
    let no_nodes = case("no-nodes", &[("p.yaml", pod)]);
    let no_pods = case("no-pods", &[("n.yaml", node)]);
    let all_bound = case("all-bound", &[("n.yaml", node), ("p.yaml", bound)]);
    for (path, cause) in [
        (
            &empty_dir,
            "no manifest files (.yaml, .yml or .json) found".to_string(),
        ),
        (
            &empty_file,
            "no Nodes or Pods in the manifests (read 0 objects from 1 file)".into(),
        ),
        (
            &no_nodes,
            "no Nodes in the manifests (read 1 object from 1 file)".into(),
        ),
        (
            &no_pods,
            "no Pods in the manifests (read 1 object from 1 file)".into(),
        ),
        (
            &all_bound,
            "no pending Pods to schedule: the 1 Pod is bound to nodes or finished (read 2 objects from 2 files)"
                .into(),
        ),
    ] {
        let o = wasmsched(&["simulate", path, "--config", &config]);
        let line = assert_one_line_error(&o, &[]);
        assert_eq!(line, format!("error: {path}: {cause}"));
    }
    // Unrelated YAML: the skipped line, then the error.
    let o = wasmsched(&["simulate", &unrelated, "--config", &config]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!(
            "skipped 1 object: 1 ConfigMap\nerror: {unrelated}: no Nodes or Pods in the manifests (read 1 object from 1 file)\n"
        )
    );
    assert_eq!(o.stdout, "");
    // Several paths are all named.
    let o = wasmsched(&["simulate", &no_pods, &empty_file, "--config", &config]);
    assert_one_line_error(
        &o,
        &[&format!(
            "error: {no_pods}, {empty_file}: no Pods in the manifests (read 1 object from 2 files)"
        )],
    );
}

#[test]
fn skipped_objects_are_counted_by_kind_in_one_line() {
    let config = native_config();
    let dir = tempfile::tempdir().unwrap();
    let extra = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: a, namespace: default}\n---\n\
        apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: b, namespace: default}\n---\n\
        apiVersion: v1\nkind: Pdo\nmetadata: {name: typo, namespace: default}\n---\n\
        apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: default}\n---\n\
        apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d}\n";
    std::fs::write(dir.path().join("c.yaml"), format!("{TWO_PODS}---\n{extra}")).unwrap();
    // At the default level, and in every output format.
    for format in ["table", "json"] {
        let o = wasmsched(&[
            "simulate",
            &s(dir.path()),
            "--config",
            &config,
            "-o",
            format,
        ]);
        assert!(o.success, "{}", o.stderr);
        assert_eq!(
            o.stderr,
            "skipped 5 objects: 2 NetworkPolicy, 1 Deployment, 1 Pdo, 1 PodGroup (scheduling.k8s.io/v1beta1)\n"
        );
    }
    // The small cluster's ConfigMap.
    let o = wasmsched(&["simulate", &small_cluster(), "--config", &config]);
    assert!(o.success, "{}", o.stderr);
    assert_eq!(o.stderr, SMALL_CLUSTER_SKIPPED);
}

#[test]
fn v2_logs_each_binding_and_failed_attempt_of_simulate() {
    let config = native_config();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, TWO_PODS).unwrap();
    let path = s(&file);
    for v in [&["-v=2"][..], &["-v", "2"], &["--v=2"], &["--v", "4"]] {
        let mut args = v.to_vec();
        args.extend(["simulate", &path, "--config", &config]);
        let o = wasmsched(&args);
        assert!(o.success, "{v:?}: {}", o.stderr);
        let bound: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| l.contains("Successfully bound pod to node"))
            .collect();
        assert_eq!(bound.len(), 1, "{v:?}: {}", o.stderr);
        assert!(
            bound[0].contains("pod=default/small") && bound[0].contains("node=n1"),
            "{}",
            bound[0]
        );
        let failed: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| l.contains("Unable to schedule pod; no fit; waiting"))
            .collect();
        assert!(!failed.is_empty(), "{v:?}: {}", o.stderr);
        for l in failed {
            assert!(
                l.contains("pod=default/large") && l.contains("Insufficient cpu"),
                "{l}"
            );
        }
    }
    // JSON lines carry klog's keys.
    let o = wasmsched(&[
        "-v=2",
        "--logging-format",
        "json",
        "simulate",
        &path,
        "--config",
        &config,
    ]);
    assert!(o.success, "{}", o.stderr);
    let bound: Vec<Value> = o
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["msg"] == "Successfully bound pod to node")
        .collect();
    assert_eq!(bound.len(), 1, "{}", o.stderr);
    assert_eq!(bound[0]["v"], 2);
    assert_eq!(
        bound[0]["pod"],
        serde_json::json!({"name": "small", "namespace": "default"})
    );
    // -v 0 (and the default): nothing.
    for v in [&["-v", "0"][..], &[]] {
        let mut args = v.to_vec();
        args.extend(["simulate", &path, "--config", &config]);
        let o = wasmsched(&args);
        assert!(o.success, "{v:?}: {}", o.stderr);
        assert_eq!(o.stderr, "", "{v:?}");
    }
}

#[test]
fn profiles_print_percentage_of_nodes_to_score_and_effective_args() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n\
         percentageOfNodesToScore: 30\n\
         profiles:\n\
         - schedulerName: gpu-scheduler\n  percentageOfNodesToScore: 20\n  pluginConfig:\n\
         \x20 - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n\
         \x20 - name: DefaultPreemption\n    args: {minCandidateNodesPercentage: 20}\n\
         - schedulerName: second\n\
         - schedulerName: third\n  percentageOfNodesToScore: 0\n  plugins:\n    multiPoint:\n      disabled: [{name: GpuTopology}]\n  pluginConfig:\n\
         \x20 - name: NodeResourcesFit\n    args: {ignoredResources: [example.com/x]}\n",
    )
    .unwrap();
    let o = wasmsched(&["profiles", "--config", &s(&config)]);
    ok(&o);
    // Each profile's section, up to the next profile or the wasm plugins.
    let section = |name: &str| -> String {
        let start = o
            .stdout
            .find(&format!("profile {name}\n"))
            .unwrap_or_else(|| panic!("{name}: {}", o.stdout));
        // With its last newline.
        let rest = &o.stdout[start..];
        let end = rest
            .find("\nprofile ")
            .or_else(|| rest.find("\nwasm plugin "))
            .map_or(rest.len(), |e| e + 1);
        rest[..end].to_string()
    };
    let first = section("gpu-scheduler");
    assert!(
        first.contains("\n  percentageOfNodesToScore: 20 (the profile's)\n"),
        "{first}"
    );
    // The file's args over the defaults' ignoredResources.
    let fit = first
        .lines()
        .find(|l| l.starts_with("  args of NodeResourcesFit: "))
        .unwrap_or_else(|| panic!("{first}"));
    let json = fit
        .strip_prefix("  args of NodeResourcesFit: ")
        .unwrap()
        .split(" (")
        .next()
        .unwrap();
    let args: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {fit}"));
    assert_eq!(args["scoringStrategy"]["type"], "MostAllocated", "{fit}");
    assert!(args["ignoredResources"].is_array(), "{fit}");
    assert!(
        fit.ends_with(" (the defaults add ignoredResources: HAMi's resources, which nodes do not advertise: GpuTopology fits them on HAMi nodes)"),
        "{fit}"
    );
    assert!(
        first.contains(
            "\n  args of DefaultPreemption: {\"minCandidateNodesPercentage\":20} (the file's pluginConfig)\n"
        ),
        "{first}"
    );
    let second = section("second");
    assert!(
        second.contains("\n  percentageOfNodesToScore: 30 (the file's)\n"),
        "{second}"
    );
    // The defaults' args alone.
    assert!(
        second.contains("\n  args of NodeResourcesFit: {\"ignoredResources\":"),
        "{second}"
    );
    assert!(!second.contains("args of DefaultPreemption"), "{second}");
    let third = section("third");
    assert!(
        third
            .contains("\n  percentageOfNodesToScore: adaptive (the profile's 0: upstream's rule: "),
        "{third}"
    );
    // No GpuTopology: no default args; the file's own.
    assert!(
        third.contains(
            "\n  args of NodeResourcesFit: {\"ignoredResources\":[\"example.com/x\"]} (the file's pluginConfig)"
        ),
        "{third}"
    );
}

#[test]
fn explain_says_why_a_node_that_passed_has_no_score() {
    let dir = tempfile::tempdir().unwrap();
    // 120 nodes and percentageOfNodesToScore 10: Filter stops after 100
    // feasible nodes (upstream's minimum), 20 are never evaluated.
    let mut text = String::new();
    for i in 0..120 {
        text.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: node-{i:03}}}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}\n---\n"
        ));
    }
    text.push_str("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  schedulerName: gpu-scheduler\n  containers: [{name: c, image: x}]\n");
    let cluster = dir.path().join("c.yaml");
    std::fs::write(&cluster, text).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        std::fs::read_to_string(native_config()).unwrap().replace(
            "parallelism: 2\n",
            "parallelism: 2\npercentageOfNodesToScore: 10\n",
        ),
    )
    .unwrap();
    let base = [
        "simulate",
        &s(&cluster),
        "--config",
        &s(&config),
        "--explain",
        "default/p",
    ];
    let o = wasmsched(&[&base[..], &["-o", "json"]].concat());
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let nodes = v["explain"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 120);
    let unscored: Vec<&Value> = nodes.iter().filter(|n| n["total"].is_null()).collect();
    assert_eq!(unscored.len(), 20, "{}", o.stdout);
    for n in &unscored {
        assert_eq!(
            n["note"],
            "not evaluated: Filter stopped after finding 100 feasible node(s) of 120 (percentageOfNodesToScore 10%)",
            "{n}"
        );
    }
    assert!(nodes
        .iter()
        .filter(|n| !n["total"].is_null())
        .all(|n| n.get("note").is_none()));
    // The table says it in the FILTER column.
    let o = wasmsched(&base);
    ok(&o);
    let names: Vec<String> = unscored
        .iter()
        .map(|n| n["node"].as_str().unwrap().to_string())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let rows = explain_rows(&o.stdout, &names);
    assert_eq!(rows.len(), 20, "{}", o.stdout);
    for (_, row) in rows {
        assert!(row.contains("pass (not evaluated: Filter stopped"), "{row}");
    }

    // The only feasible node: Score skipped, its scores for reference.
    let o = wasmsched(&[
        "simulate",
        &small_cluster(),
        "--config",
        &native_config(),
        "--explain",
        "apps/medium",
        "-o",
        "json",
    ]);
    ok(&o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let big = v["explain"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "big")
        .unwrap();
    assert_eq!(
        big["note"],
        "the only feasible node: the decision skipped Score (as upstream); the scores are shown for reference",
        "{big}"
    );
}
