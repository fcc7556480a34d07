//! The GPU-topology plugin in the real scheduler: the fragmentation
//! comparison of `examples/gpu-fragmentation` (numbers quoted in README's
//! "GPU topology" section), `--explain` of the GPU example, pods that use
//! no GPU, and where the unknown-utilization default shows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use wasmsched::{config, manifest, simulate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The scheduler of the configuration text `config_text` (None: the
/// built-in one).
fn scheduler(config_text: Option<&str>, seed: u64) -> config::Scheduler {
    let file = match config_text {
        Some(t) => config::parse(t).unwrap(),
        None => config::ConfigFile::default(),
    };
    config::build(&file, &root(), seed).unwrap()
}

/// Runs `simulate` on `example` (a directory under the repository root).
fn simulate_with(s: &config::Scheduler, example: &str) -> simulate::Report {
    let manifests = manifest::load(&[root().join(example)]).unwrap();
    simulate::run(s, manifests, &simulate::Options::default()).unwrap()
}

fn run(example: &str, config_text: Option<&str>, seed: u64) -> simulate::Report {
    simulate_with(&scheduler(config_text, seed), example)
}

/// `namespace/pod` -> node.
fn placements(r: &simulate::Report) -> BTreeMap<String, String> {
    r.scheduled
        .iter()
        .map(|s| (format!("{}/{}", s.namespace, s.pod), s.node.clone()))
        .collect()
}

struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs the `wasmsched` binary in the repository root.
fn wasmsched(args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .current_dir(root())
        .env_remove("WASMSCHED_LOG")
        .env_remove("RUST_LOG")
        .output()
        .expect("running wasmsched");
    Output {
        success: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

// ------------------------------------------------------- fragmentation

const FRAG: &str = "examples/gpu-fragmentation";

/// (8-GPU jobs placed, nodes the 20 small pods ended on).
fn fragmentation(r: &simulate::Report) -> (usize, usize) {
    let small: Vec<_> = r
        .scheduled
        .iter()
        .filter(|s| !s.pod.starts_with("job-"))
        .collect();
    assert_eq!(
        small.len(),
        20,
        "every small pod lands: {:?}",
        r.unschedulable
    );
    let nodes: std::collections::BTreeSet<&str> = small.iter().map(|s| s.node.as_str()).collect();
    let jobs = r
        .scheduled
        .iter()
        .filter(|s| s.pod.starts_with("job-"))
        .count();
    // Jobs that do not fit say why, as kube-scheduler would.
    for u in &r.unschedulable {
        assert!(u.pod.starts_with("job-"), "{u:?}");
        assert_eq!(
            u.message,
            "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: \
             0/8 nodes are available: 8 No preemption victims found for incoming pod.",
            "{u:?}"
        );
    }
    assert_eq!(jobs + r.unschedulable.len(), 6);
    (jobs, nodes.len())
}

#[test]
fn fragmentation_example_jobs_placed_per_policy() {
    // The numbers in README.md ("GPU topology"). 31 GPUs of small pods need
    // at least 4 of the 8 nodes, so at most 4 of the six 8-GPU jobs fit.
    for seed in [0, 1] {
        let mut got = BTreeMap::new();
        for policy in ["binpack", "spread", "origin"] {
            let text =
                std::fs::read_to_string(root().join(format!("{FRAG}/{policy}.yaml"))).unwrap();
            let s = scheduler(Some(&text), seed);
            // Only GpuTopology's score tells the nodes apart: the two
            // resource scores are off, NodeResourcesFit still filters.
            let p = s.profile("gpu-scheduler").unwrap().profile();
            let scores: Vec<&str> = p.score.iter().map(|s| s.plugin.name()).collect();
            assert!(scores.contains(&"GpuTopology"), "{policy}: {scores:?}");
            for off in ["NodeResourcesFit", "NodeResourcesBalancedAllocation"] {
                assert!(!scores.contains(&off), "{policy}: {scores:?}");
            }
            assert!(
                p.filter.iter().any(|f| f.name() == "NodeResourcesFit"),
                "{policy}"
            );
            got.insert(policy, fragmentation(&simulate_with(&s, FRAG)));
        }
        assert_eq!(got["binpack"], (4, 4), "seed {seed}");
        assert_eq!(got["origin"], (4, 4), "seed {seed}");
        assert_eq!(got["spread"], (0, 8), "seed {seed}");
    }
    // The built-in profile (binpack at weight 3, with NodeResourcesFit's
    // LeastAllocated and BalancedAllocation scores on) still packs here.
    assert_eq!(fragmentation(&run(FRAG, None, 0)), (4, 4));
}

// ------------------------------------------------------------ --explain

#[test]
fn explain_gpu_pod_shows_why_other_nodes_lost() {
    let o = wasmsched(&[
        "simulate",
        "examples/gpu-cluster",
        "--explain",
        "ml/gpu-pod",
    ]);
    assert!(o.success, "stderr:\n{}", o.stderr);
    let marker = "Explain ml/gpu-pod (profile gpu-scheduler): placed on ";
    let at = o.stdout.find(marker).expect(&o.stdout);
    let node = o.stdout[at + marker.len()..]
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string();

    // An A100 node that had at least 2 free GPUs.
    let m = manifest::load(&[root().join("examples/gpu-cluster")]).unwrap();
    let n = m.nodes.iter().find(|n| n.name == node).expect(&node);
    assert_eq!(n.labels["gpu.nvidia.com/model"], "A100", "{node}");
    let used: i64 = m
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node.as_str()))
        .map(|p| p.requests.get("nvidia.com/gpu"))
        .sum();
    assert!(
        n.allocatable.get("nvidia.com/gpu") - used >= 2,
        "{node}: {used} GPUs used"
    );

    // Each node's row: the line starting with its name and the lines
    // after it up to the next node.
    let table = &o.stdout[at..];
    let row = |name: &str| -> String {
        let mut out = String::new();
        let mut inside = false;
        for line in table.lines() {
            let first = line
                .trim_start_matches('│')
                .split_whitespace()
                .next()
                .unwrap_or("");
            if first.starts_with("gpu-") || first.starts_with("cpu-") {
                inside = first == name;
            }
            if inside {
                out.push_str(line);
                out.push('\n');
            }
        }
        assert!(!out.is_empty(), "no row for {name}:\n{table}");
        out
    };
    for other in ["gpu-v100-1", "gpu-t4-1", "gpu-t4-2"] {
        assert!(
            row(other).contains("GpuTopology: GPU model mismatch"),
            "{other}:\n{}",
            row(other)
        );
    }
    // The winner and the runner-up show GpuTopology's score; the winner's
    // is higher (it leaves no GPU idle on a node already in use).
    let gpu_score = |name: &str| -> i64 {
        let r = row(name);
        let at = r.find("GpuTopology ").expect(&r);
        r[at + "GpuTopology ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(node, "gpu-a100-1");
    assert!(gpu_score("gpu-a100-1") > gpu_score("gpu-a100-2"));
    for cpu in ["cpu-1", "cpu-2"] {
        assert!(row(cpu).contains("GpuTopology: Not enough GPUs"), "{cpu}");
    }
    assert!(row("gpu-a100-80g").contains("untolerated taint"));
}

// ------------------------------------------------------ pods without GPUs

#[test]
fn cpu_pods_stay_off_gpu_nodes() {
    let cpu_nodes = ["cpu-1", "cpu-2"];
    for seed in [0, 1, 2] {
        let p = placements(&run("examples/gpu-cluster", None, seed));
        assert!(
            cpu_nodes.contains(&p["etl/data-prep"].as_str()),
            "seed {seed}: {p:?}"
        );
    }
    // The origin's behaviour (score 0 everywhere): the least allocated
    // node wins, an idle A100 node.
    let origin = "profiles:\n- schedulerName: gpu-scheduler\n  pluginConfig:\n  - name: GpuTopology\n    args: {cpuPodsAvoidGpuNodes: false}\n";
    let p = placements(&run("examples/gpu-cluster", Some(origin), 0));
    assert_eq!(p["etl/data-prep"], "gpu-a100-2");
    // GPU pods are placed as before.
    assert_eq!(p["ml/gpu-pod"], "gpu-a100-1");
}

// ------------------------------------------------- unknown utilization

#[test]
fn unknown_utilization_default_is_logged_at_debug() {
    // No node of the fragmentation example says its utilization.
    let o = wasmsched(&[
        "simulate",
        FRAG,
        "--config",
        &format!("{FRAG}/binpack.yaml"),
        "--log",
        "wasmsched=debug",
    ]);
    assert!(o.success, "stderr:\n{}", o.stderr);
    assert!(
        o.stderr.contains("unknownUtilization 50%"),
        "config line:\n{}",
        o.stderr
    );
    for node in ["a100-1", "a100-8"] {
        let line = o
            .stderr
            .lines()
            .find(|l| l.contains(&format!("node {node}: GPU utilization unknown")))
            .unwrap_or_else(|| panic!("no line for {node}:\n{}", o.stderr));
        assert!(line.contains("scoring it as 50% busy"), "{line}");
    }
    // At the default level nothing is printed.
    let quiet = wasmsched(&[
        "simulate",
        FRAG,
        "--config",
        &format!("{FRAG}/binpack.yaml"),
    ]);
    assert!(quiet.success);
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
}
