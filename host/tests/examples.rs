//! The bundled examples do what the README says they do.

use std::path::{Path, PathBuf};

use wasmsched::{config, manifest, simulate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn simulate(example: &str, config_file: Option<&str>, seed: u64) -> simulate::Report {
    let (file, base) = match config_file {
        Some(c) => (
            config::load(&root().join(c)).unwrap(),
            root().join(c).parent().unwrap().to_path_buf(),
        ),
        None => (config::ConfigFile::default(), root()),
    };
    let scheduler = config::build(&file, &base, seed).unwrap();
    let manifests = manifest::load(&[root().join(example)]).unwrap();
    simulate::run(&scheduler, manifests, &simulate::Options::default()).unwrap()
}

#[test]
fn network_locality_keeps_peer_traffic_in_zone() {
    for seed in [1, 2, 3] {
        let on = simulate("examples/microservices", None, seed);
        let off = simulate(
            "examples/microservices",
            Some("examples/microservices/locality-off.yaml"),
            seed,
        );
        assert_eq!(
            on.scheduled.len(),
            17,
            "every pending pod lands: {:?}",
            on.unschedulable
        );
        assert_eq!(off.scheduled.len(), 17);
        let (on_t, off_t) = (on.traffic.unwrap(), off.traffic.unwrap());
        assert_eq!(
            on_t.total(),
            off_t.total(),
            "same pods, same declared pairs"
        );
        assert!(
            on_t.cross_zone_percent() < 20.0,
            "seed {seed}: with locality {on_t:?}"
        );
        assert!(
            off_t.cross_zone_percent() > 2.0 * on_t.cross_zone_percent(),
            "seed {seed}: {off_t:?} vs {on_t:?}"
        );
        // The api pods follow the database they name (zone b).
        for s in on.scheduled.iter().filter(|s| s.pod.starts_with("api-")) {
            assert!(
                s.node.starts_with("node-b"),
                "{} landed on {}",
                s.pod,
                s.node
            );
        }
        // The queue, scheduled after its workers, is drawn to them.
        let worker_zones: Vec<char> = on
            .scheduled
            .iter()
            .filter(|s| s.pod.starts_with("worker-"))
            .map(|s| s.node.as_bytes()[5] as char)
            .collect();
        for s in on.scheduled.iter().filter(|s| s.pod.starts_with("queue-")) {
            assert!(
                worker_zones.contains(&(s.node.as_bytes()[5] as char)),
                "{} on {} away from workers {worker_zones:?}",
                s.pod,
                s.node
            );
        }
    }
}

#[test]
fn example_config_builds_two_profiles() {
    let file = config::load(&root().join("examples/config.yaml")).unwrap();
    let s = config::build(&file, &root().join("examples"), 0).unwrap();
    let names: Vec<&str> = s.profiles.iter().map(|f| f.scheduler_name()).collect();
    assert_eq!(names, ["gpu-scheduler", "default-scheduler"]);
    let default = s.profile("default-scheduler").unwrap();
    assert!(default
        .profile()
        .filter
        .iter()
        .all(|f| f.name() != "GpuTopology"));
    let gpu = s.profile("gpu-scheduler").unwrap();
    let w = gpu
        .profile()
        .score
        .iter()
        .find(|s| s.plugin.name() == "GpuTopology")
        .unwrap()
        .weight;
    assert_eq!(w, 5);
}

/// Plugins announce at cycle-start which extension points matter for the
/// pod (upstream's Skip): a CPU-only pod without peers skips both
/// built-ins' Filter, and NetworkLocality's Score.
#[test]
fn built_ins_skip_what_does_not_concern_the_pod() {
    let scheduler = config::build(&config::ConfigFile::default(), &root(), 0).unwrap();
    let manifests = manifest::load(&[root().join("examples/gpu-cluster")]).unwrap();
    let opts = simulate::Options {
        all_pods: false,
        explain: Some("etl/data-prep".into()),
        metrics: None,
    };
    let r = simulate::run(&scheduler, manifests, &opts).unwrap();
    let e = r.explain.expect("explained");
    let verdicts = serde_json::to_value(&e.explanation).unwrap();
    for node in verdicts["nodes"].as_array().unwrap() {
        let filters = node["filters"].as_array().unwrap();
        for plugin in ["GpuTopology", "NetworkLocality"] {
            let v = filters
                .iter()
                .find(|f| f[0] == plugin)
                .unwrap_or_else(|| panic!("{plugin} listed: {node}"));
            assert_eq!(v[1]["verdict"], "skip", "{plugin} on {}", node["node"]);
        }
        for s in node["scores"].as_array().unwrap() {
            assert_ne!(s["plugin"], "NetworkLocality", "no peers: Score skipped");
        }
    }
    // The GPU pod, by contrast, runs GpuTopology's Filter.
    let manifests = manifest::load(&[root().join("examples/gpu-cluster")]).unwrap();
    let opts = simulate::Options {
        all_pods: false,
        explain: Some("ml/gpu-pod".into()),
        metrics: None,
    };
    let r = simulate::run(&scheduler, manifests, &opts).unwrap();
    let v = serde_json::to_value(&r.explain.unwrap().explanation).unwrap();
    let gpu_verdicts: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| {
            n["filters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f[0] == "GpuTopology")
                .map(|f| f[1]["verdict"].as_str().unwrap())
        })
        .collect();
    assert!(
        gpu_verdicts.contains(&"reject") && gpu_verdicts.contains(&"pass"),
        "{gpu_verdicts:?}"
    );
}

#[test]
fn training_workers_land_where_their_dataset_is() {
    for seed in [0, 1, 2] {
        let r = simulate("examples/gpu-training", None, seed);
        let on = |pod: &str| {
            r.scheduled
                .iter()
                .find(|s| s.pod == pod)
                .map(|s| s.node.as_str())
        };
        // The two ImageNet copies on A100 nodes, one worker each.
        let mut workers = [on("resnet-0").unwrap(), on("resnet-1").unwrap()];
        workers.sort();
        assert_eq!(workers, ["gpu-a100-1", "gpu-a100-2"], "seed {seed}");
        // The last copy is on the V100 node: the evaluation job goes there.
        assert_eq!(on("resnet-eval"), Some("gpu-v100-1"));
        // gpu-a100-3 has GPUs but no copy.
        assert_eq!(r.unschedulable.len(), 1);
        assert_eq!(r.unschedulable[0].pod, "resnet-2");
        assert_eq!(
            r.unschedulable[0].message,
            "0/4 nodes are available: 1 node(s) didn't find available persistent volumes \
             to bind, 3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: \
             2 No preemption victims found for incoming pod, \
             2 Preemption is not helpful for scheduling."
        );
    }
}

/// examples/dra/README.md's table: each pod's node and each claim's
/// devices, GpuTopology's device ranking (through the contract's
/// `node-device-rank`) included: first fit would give `train-1` gpu-2 and
/// gpu-3 too, but `batch-4` gpu-2 .. gpu-5.
#[test]
fn dra_example_places_pods_and_devices_as_its_readme_says() {
    let r = simulate("examples/dra", None, 1);
    let node = |pod: &str| {
        r.scheduled
            .iter()
            .find(|p| p.pod == pod)
            .map(|p| p.node.as_str())
    };
    for (pod, want) in [
        ("train-0", "gpu-a100-1"),
        ("train-1", "gpu-a100-1"),
        ("infer-80g", "gpu-h100-1"),
        ("web-0", "gpu-h100-1"),
        ("web-1", "gpu-h100-1"),
        ("batch-4", "gpu-h100-1"),
    ] {
        assert_eq!(node(pod), Some(want), "{pod}");
    }
    let too_big = r.unschedulable.iter().find(|p| p.pod == "too-big").unwrap();
    assert!(
        too_big
            .message
            .starts_with("0/3 nodes are available: 3 cannot allocate all claims."),
        "{}",
        too_big.message
    );
    let claims = &r.plugins["resource_claims"];
    let devices = |claim: &str| -> Vec<String> {
        claims
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == claim)
            .unwrap_or_else(|| panic!("claim {claim}"))["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                d["device"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(devices("train-0-gpus"), ["gpu-0", "gpu-1"]);
    assert_eq!(devices("train-1-gpus"), ["gpu-2", "gpu-3"]);
    assert_eq!(devices("big-memory"), ["gpu-0"]);
    assert_eq!(devices("shared-h100"), ["gpu-1"]);
    assert_eq!(
        devices("h100-or-a100"),
        ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    );
}

/// `--explain` of the example's `batch-4`: the devices allocated, and the
/// sets GpuTopology ranked with their ranks (named only for an explained
/// cycle), the chosen one not the first fit.
#[test]
fn dra_example_explains_the_ranked_device_sets() {
    let scheduler = config::build(&config::ConfigFile::default(), &root(), 1).unwrap();
    let manifests = manifest::load(&[root().join("examples/dra")]).unwrap();
    let options = simulate::Options {
        explain: Some("ml/batch-4".into()),
        ..Default::default()
    };
    let r = simulate::run(&scheduler, manifests, &options).unwrap();
    let notes: Vec<String> = r
        .explain
        .unwrap()
        .explanation
        .notes
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    let text = notes.join("\n");
    assert!(
        text.contains("devices gpu.example.com/gpu-h100-1/gpu-4, gpu.example.com/gpu-h100-1/gpu-5, gpu.example.com/gpu-h100-1/gpu-6, gpu.example.com/gpu-h100-1/gpu-7 on gpu-h100-1"),
        "{text}"
    );
    assert!(
        text.contains("device set(s) on gpu-h100-1: chosen rank 100 (not the first fit)"),
        "{text}"
    );
    assert!(
        text.contains("alternative rank 50: gpu.example.com/gpu-h100-1/gpu-2"),
        "{text}"
    );
}
