//! Fractional GPUs on HAMi nodes in the real scheduler (`simulate`):
//! `examples/gpu-sharing` per policy (the numbers in its README), the
//! device strings written for HAMi's device plugin, the per-device report,
//! and NodeResourcesFit's `ignoredResources`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use wasmsched::gpu_sharing::GpuShare;
use wasmsched::{config, manifest, simulate};

const EXAMPLE: &str = "examples/gpu-sharing";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run_text(config_text: &str, seed: u64) -> simulate::Report {
    let file = config::parse(config_text).unwrap();
    let s = config::build(&file, &root(), seed).unwrap();
    let manifests = manifest::load(&[root().join(EXAMPLE)]).unwrap();
    simulate::run(&s, manifests, &simulate::Options::default()).unwrap()
}

fn run(config_name: &str, seed: u64) -> simulate::Report {
    let text = std::fs::read_to_string(root().join(EXAMPLE).join(config_name)).unwrap();
    run_text(&text, seed)
}

fn whole_job(pod: &str) -> bool {
    pod.starts_with("train-") || pod.starts_with("finetune-")
}

/// What a policy did: (GPUs the fractional pods share, nodes they are on,
/// whole-GPU jobs placed, GPUs untouched at the end).
fn outcome(r: &simulate::Report) -> (usize, usize, usize, usize) {
    let fractional: Vec<_> = r.scheduled.iter().filter(|s| !whole_job(&s.pod)).collect();
    assert_eq!(
        fractional.len(),
        15,
        "every fractional pod lands: {:?}",
        r.unschedulable
    );
    let gpus: std::collections::BTreeSet<&str> = fractional
        .iter()
        .flat_map(|s| s.gpus.iter().map(|g| g.uuid.as_str()))
        .collect();
    let nodes: std::collections::BTreeSet<&str> =
        fractional.iter().map(|s| s.node.as_str()).collect();
    let jobs = r.scheduled.iter().filter(|s| whole_job(&s.pod)).count();
    let untouched = r.gpu_devices.iter().filter(|d| d.untouched()).count();
    (gpus.len(), nodes.len(), jobs, untouched)
}

#[test]
fn fractional_pods_pack_and_training_jobs_find_whole_nodes() {
    // The numbers in examples/gpu-sharing/README.md, for two tie-break
    // seeds.
    for seed in [0, 1] {
        // wasmsched: 15 fractional pods on 4 GPUs of one node, the 4-GPU
        // job on that node's other 4, all five 8-GPU jobs on whole nodes.
        assert_eq!(
            outcome(&run("config.yaml", seed)),
            (4, 1, 6, 0),
            "seed {seed}"
        );
        // HAMi's default policies: the pods touch all 8 GPUs of their node,
        // the 4-GPU job opens another node, one 8-GPU job does not fit.
        let hami = run("hami-defaults.yaml", seed);
        assert_eq!(outcome(&hami), (8, 1, 5, 4), "seed {seed}");
        assert_eq!(hami.unschedulable.len(), 1);
        assert_eq!(hami.unschedulable[0].pod, "train-5");
        // Spread: the pods on 15 GPUs of 6 nodes; no 8-GPU job fits.
        let spread = run("spread.yaml", seed);
        assert_eq!(outcome(&spread), (15, 6, 1, 29), "seed {seed}");
        for u in &spread.unschedulable {
            assert!(u.pod.starts_with("train-"), "{u:?}");
            assert_eq!(
                u.message,
                "0/6 nodes are available: 6 Insufficient GPU memory. preemption: \
                 0/6 nodes are available: 6 No preemption victims found for incoming pod."
            );
        }
    }
}

fn share(uuid_prefix: &str, mem: u64, cores: u32) -> (String, u64, u32) {
    (uuid_prefix.to_string(), mem, cores)
}

#[test]
fn device_strings_are_what_hami_allocates() {
    let r = run("config.yaml", 0);
    let by_pod: BTreeMap<&str, &Vec<GpuShare>> = r
        .scheduled
        .iter()
        .map(|s| (s.pod.as_str(), &s.gpus))
        .collect();
    let strip = |g: &GpuShare| share(&g.uuid, g.memory_mib, g.cores);
    // A fraction: gpumem and gpucores as asked, on one GPU of its node.
    let infer = by_pod["infer-01"];
    assert_eq!(infer.len(), 1);
    assert_eq!(
        (infer[0].memory_mib, infer[0].cores, infer[0].container),
        (10240, 30, 0)
    );
    // A percentage: 25% of the registered 40960 MiB.
    assert_eq!(by_pod["embed-1"][0].memory_mib, 10240);
    // Init container first, then the main container; the sidecar has none.
    let warm: Vec<_> = by_pod["warm-1"]
        .iter()
        .map(|g| (g.container, g.memory_mib, g.cores))
        .collect();
    assert_eq!(warm, vec![(0, 2048, 10), (1, 6144, 20)]);
    // Whole GPUs: the whole memory, exclusive cores, each on its own GPU.
    let train = by_pod["train-1"];
    assert_eq!(train.len(), 8);
    assert!(train
        .iter()
        .all(|g| (g.memory_mib, g.cores) == (40960, 100)));
    let distinct: std::collections::BTreeSet<_> = train.iter().map(strip).map(|s| s.0).collect();
    assert_eq!(distinct.len(), 8);
}

#[test]
fn no_device_is_overcommitted_and_the_report_agrees() {
    for config_name in ["config.yaml", "hami-defaults.yaml", "spread.yaml"] {
        let r = run(config_name, 0);
        // Usage per GPU from the pods' shares: init containers (container 0
        // of warm-1) count as HAMi counts them, apart from the app ones.
        let mut used: BTreeMap<String, (u64, u64, u32)> = BTreeMap::new();
        for s in &r.scheduled {
            let init = usize::from(s.pod == "warm-1");
            let mut app: BTreeMap<&str, (u64, u64, u32)> = BTreeMap::new();
            let mut first: BTreeMap<&str, (u64, u64, u32)> = BTreeMap::new();
            for g in &s.gpus {
                let target = if g.container < init {
                    &mut first
                } else {
                    &mut app
                };
                let e = target.entry(&g.uuid).or_default();
                *e = (e.0 + g.memory_mib, e.1 + u64::from(g.cores), e.2 + 1);
            }
            for (uuid, a) in &app {
                let i = first.get(uuid).copied().unwrap_or_default();
                let e = used.entry(uuid.to_string()).or_default();
                *e = (e.0 + a.0.max(i.0), e.1 + a.1.max(i.1), e.2 + a.2.max(i.2));
            }
            for (uuid, i) in &first {
                if !app.contains_key(uuid) {
                    let e = used.entry(uuid.to_string()).or_default();
                    *e = (e.0 + i.0, e.1 + i.1, e.2 + i.2);
                }
            }
        }
        assert_eq!(r.gpu_devices.len(), 48);
        for d in &r.gpu_devices {
            let (mem, cores, vgpus) = used.get(&d.uuid).copied().unwrap_or_default();
            assert!(
                mem <= d.memory_mib && cores <= u64::from(d.cores) && vgpus <= d.vgpus_max,
                "{config_name}: {d:?}"
            );
            assert_eq!(
                d.memory_free_mib,
                d.memory_mib - mem,
                "{config_name}: {d:?}"
            );
            assert_eq!(
                d.cores_free,
                u64::from(d.cores) - cores,
                "{config_name}: {d:?}"
            );
            assert_eq!(d.vgpus, vgpus, "{config_name}: {d:?}");
        }
    }
}

#[test]
fn resource_fit_must_ignore_what_nodes_do_not_advertise() {
    // Without `ignoredResources` (wasmsched's default profile ignores the
    // HAMi resources; a file's own list replaces that), NodeResourcesFit
    // rejects every node for a pod asking for gpumem (no node advertises
    // it), as upstream does.
    let text = std::fs::read_to_string(root().join(EXAMPLE).join("config.yaml")).unwrap();
    let cut = text.find("  pluginConfig:").unwrap();
    let none = format!(
        "{}  pluginConfig:\n  - name: NodeResourcesFit\n    args: {{ignoredResources: []}}\n",
        &text[..cut]
    );
    let r = run_text(&none, 0);
    let infer = r
        .unschedulable
        .iter()
        .find(|u| u.pod == "infer-01")
        .unwrap();
    assert!(
        infer.message.contains("Insufficient nvidia.com/gpumem"),
        "{infer:?}"
    );
    // The whole-GPU jobs ask for nothing unadvertised and still land.
    assert!(r.scheduled.iter().any(|s| s.pod == "train-1"));
}

fn wasmsched(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .current_dir(root())
        .env_remove("WASMSCHED_LOG")
        .env_remove("RUST_LOG")
        .output()
        .expect("running wasmsched");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn simulate_and_explain_show_gpus_and_what_is_left() {
    let config = format!("{EXAMPLE}/config.yaml");
    let (ok, out) = wasmsched(&["simulate", EXAMPLE, "--config", &config]);
    assert!(ok, "{out}");
    assert!(out.contains("GPUS"), "{out}");
    assert!(
        out.contains("GPUs (HAMi): 0 of 48 untouched, 0 of 6 nodes untouched"),
        "{out}"
    );
    assert!(out.contains("MiB 30%"), "{out}");
    let (ok, out) = wasmsched(&[
        "simulate",
        EXAMPLE,
        "--config",
        &config,
        "--explain",
        "ml/warm-1",
    ]);
    assert!(ok, "{out}");
    let explain = &out[out.find("Explain ml/warm-1").expect("explained")..];
    assert!(explain.contains("  GPUs: "), "{explain}");
    assert!(explain.contains("2048 MiB 10%; "), "{explain}");
    assert!(explain.contains("MEMORY FREE"), "{explain}");
    // JSON carries the same.
    let (ok, out) = wasmsched(&["simulate", EXAMPLE, "--config", &config, "--output", "json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["gpu_devices"].as_array().unwrap().len(), 48);
    let infer = v["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pod"] == "infer-01")
        .unwrap();
    assert_eq!(infer["gpus"][0]["memory_mib"], 10240);
}
