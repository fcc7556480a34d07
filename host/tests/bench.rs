//! The benchmark suite's pieces do what they claim (numbers are not
//! asserted: tests never assert wall-clock times).

use wasmsched::bench::{self, workloads, Scenario, Spec, Workload};

const SMALL: Spec = Spec {
    nodes: 60,
    pods: 120,
    seed: 7,
    annotation_bytes: 0,
    node_metrics: 0,
};

#[test]
fn generator_is_deterministic_and_mixed() {
    let a = bench::generate(SMALL);
    let b = bench::generate(SMALL);
    assert_eq!(a.nodes, b.nodes);
    assert_eq!(a.pods, b.pods);
    let zones: std::collections::BTreeSet<&str> = a
        .nodes
        .iter()
        .filter_map(|n| {
            n.labels
                .get("topology.kubernetes.io/zone")
                .map(String::as_str)
        })
        .collect();
    assert_eq!(zones.len(), 3);
    let gpu_nodes = a
        .nodes
        .iter()
        .filter(|n| n.labels.contains_key("gpu.nvidia.com/model"))
        .count();
    assert!(gpu_nodes > 0 && gpu_nodes < a.nodes.len());
    let gpu_pods = a
        .pods
        .iter()
        .filter(|p| p.limits.get("nvidia.com/gpu") > 0)
        .count();
    assert!(
        gpu_pods > SMALL.pods / 6 && gpu_pods < SMALL.pods / 2,
        "{gpu_pods}"
    );
    assert!(a
        .pods
        .iter()
        .any(|p| p.annotations.contains_key("network.wasmsched.io/peers")));
    assert!(a.pods.iter().any(|p| !p.spread.is_empty()));
    let other = bench::generate(Spec { seed: 8, ..SMALL });
    assert_ne!(a.pods, other.pods);
}

#[test]
fn scenarios_run_the_plugins_they_name() {
    let core = bench::run(SMALL, Scenario::Core, 2, false).unwrap();
    let wasm = bench::run(SMALL, Scenario::Wasm, 2, false).unwrap();
    for r in [&core, &wasm] {
        assert_eq!(r.scheduled + r.unschedulable, SMALL.pods);
        assert!(r.scheduled > SMALL.pods * 9 / 10, "{r:?}");
        assert!(r.p50_ms <= r.p99_ms);
        assert!(r.peak_rss_mib > 0.0);
    }
    let has =
        |r: &bench::BenchResult, plugin: &str| r.plugins.iter().any(|(p, _, _, _)| p == plugin);
    assert!(!has(&core, "GpuTopology") && !has(&core, "NetworkLocality"));
    assert!(has(&wasm, "GpuTopology") && has(&wasm, "NetworkLocality"));
    assert!(has(&core, "NodeResourcesFit") && has(&wasm, "NodeResourcesFit"));
}

/// Key interests: the built-in policies declare the keys they read, so a
/// large annotation on every pod (kubectl's last-applied-configuration)
/// never reaches their memory.
#[test]
fn plugin_memory_does_not_grow_with_pod_annotations() {
    let plain = bench::run(SMALL, Scenario::Wasm, 1, false).unwrap();
    let annotated = Spec {
        annotation_bytes: 32 << 10,
        ..SMALL
    };
    let big = bench::run(annotated, Scenario::Wasm, 1, false).unwrap();
    assert_eq!(plain.plugin_memory.len(), 2, "{:?}", plain.plugin_memory);
    for ((plugin, before), (_, after)) in plain.plugin_memory.iter().zip(&big.plugin_memory) {
        assert!(*before > 0, "{plugin}: no memory measured");
        // 120 pods x 32 KiB = 3.75 MiB of annotations, if kept.
        assert!(
            *after <= before + (1 << 20),
            "{plugin}: {before} bytes without the annotation, {after} with it"
        );
    }
}

#[cfg(not(feature = "native-builtins"))]
#[test]
fn native_scenario_needs_its_feature() {
    let e = bench::run(SMALL, Scenario::Native, 1, false).expect_err("not built in");
    assert!(e.to_string().contains("--features native-builtins"), "{e}");
}

fn workload(w: Workload, nodes: usize, pods: usize) -> bench::BenchResult {
    let spec = Spec {
        nodes,
        pods,
        ..SMALL
    };
    bench::run_workload(w, spec, Scenario::Wasm, 2, false).unwrap()
}

/// The scheduler_perf workloads build what upstream's templates describe.
#[test]
fn upstream_workloads_have_upstreams_shapes() {
    let spec = Spec {
        nodes: 50,
        pods: 40,
        ..SMALL
    };
    let c = workloads::cluster(Workload::NodeAffinity, &spec);
    assert_eq!(
        (c.nodes.len(), c.init.len(), c.measured.len()),
        (50, 10, 40)
    );
    assert!(c
        .measured
        .iter()
        .all(|p| p.node_affinity.required.is_some()));
    let c = workloads::cluster(Workload::RequiredAffinity, &spec);
    assert_eq!(c.init.len(), 50, "one per node");
    assert!(c
        .nodes
        .iter()
        .all(|n| n.labels["topology.kubernetes.io/zone"] == "zone1"));
    let c = workloads::cluster(Workload::ExtendedResources, &spec);
    assert!(c
        .nodes
        .iter()
        .all(|n| n.allocatable.get("nvidia.com/gpu") == 8));
    assert!(c
        .measured
        .iter()
        .all(|p| p.limits.get("nvidia.com/gpu") == 1));
    let c = workloads::cluster(Workload::PreferredAntiAffinity, &spec);
    assert!(c.measured.iter().all(|p| p.labels.contains_key("color")));
    assert_eq!(
        Workload::RequiredAffinity.measured_pods(10_000),
        5000,
        "upstream's 5000-node case"
    );
    for w in Workload::UPSTREAM {
        assert!(
            w.upstream_threshold().is_some() && w.target().is_some(),
            "{w:?}"
        );
    }
}

/// Each workload runs through the real cycle: what fits is placed, what
/// cannot is a FitError, and capacity is respected.
#[test]
fn upstream_workloads_schedule_what_fits() {
    for w in [
        Workload::SchedulingBasic,
        Workload::NodeAffinity,
        Workload::PreferredAffinity,
        Workload::PreferredAntiAffinity,
        Workload::RequiredAffinity,
    ] {
        let r = workload(w, 30, 60);
        assert_eq!((r.scheduled, r.unschedulable), (60, 0), "{w:?}: {r:?}");
        assert_eq!(r.workload, w);
    }
    // One pod in ten asks for 1000 cpu.
    let r = workload(Workload::Unschedulable, 30, 60);
    assert_eq!((r.scheduled, r.unschedulable), (54, 6), "{r:?}");
    // 10 nodes x 8 GPUs, 2 taken by the initial pods: 78 of 100 fit.
    let r = workload(Workload::ExtendedResources, 10, 100);
    assert_eq!((r.scheduled, r.unschedulable), (78, 22), "{r:?}");
    let has = |p: &str| r.plugins.iter().any(|(name, _, _, _)| name == p);
    assert!(has("GpuTopology"), "the GPU policy ran: {:?}", r.plugins);
}

/// MixedChurn deletes and adds nodes and pods between attempts; the
/// cluster keeps its size and every attempt is counted.
#[test]
fn mixed_churn_changes_the_cluster_during_the_run() {
    let spec = Spec {
        nodes: 20,
        pods: 300,
        ..SMALL
    };
    let mut snapshot = wasmsched::framework::Snapshot::default();
    for i in 0..20 {
        snapshot.set_node(workloads::node(Workload::MixedChurn, i));
    }
    let mut placed: Vec<String> = (0..30).map(|i| format!("p{i}")).collect();
    let mut rng = rand::SeedableRng::seed_from_u64(1);
    let before: Vec<String> = snapshot.nodes().map(|n| n.name().to_string()).collect();
    assert!(!workloads::churn(
        Workload::MixedChurn,
        99,
        &mut snapshot,
        &mut placed,
        &mut rng
    ));
    assert!(workloads::churn(
        Workload::MixedChurn,
        100,
        &mut snapshot,
        &mut placed,
        &mut rng
    ));
    let after: Vec<String> = snapshot.nodes().map(|n| n.name().to_string()).collect();
    assert_eq!(after.len(), 20);
    assert_ne!(before, after);
    assert_eq!(placed.len(), 20, "10 placed pods deleted");
    assert!(!workloads::churn(
        Workload::SchedulingBasic,
        100,
        &mut snapshot,
        &mut placed,
        &mut rng
    ));
    let r = bench::run_workload(Workload::MixedChurn, spec, Scenario::Core, 2, false).unwrap();
    assert_eq!(r.scheduled + r.unschedulable, 300, "{r:?}");
    assert!(r.scheduled > 250, "{r:?}");
}

/// `bench --node-metrics N`: every node carries 8 GPUs' DCGM values (the
/// node's mean and each GPU's, for each default query), all of them
/// change every N pods, and the run reports the attempts right after.
#[test]
fn node_metrics_change_every_n_pods() {
    let m = bench::node_metrics::metrics_of(3, 1);
    assert_eq!(m.len(), 18);
    assert!(m.windows(2).all(|w| w[0].0 < w[1].0), "sorted by name");
    let mean = m
        .iter()
        .find(|(k, _)| k == "DCGM_FI_DEV_GPU_UTIL")
        .unwrap()
        .1;
    let gpus: Vec<f64> = m
        .iter()
        .filter(|(k, _)| k.starts_with("DCGM_FI_DEV_GPU_UTIL/"))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(mean, gpus.iter().sum::<f64>() / 8.0);
    assert_ne!(
        m,
        bench::node_metrics::metrics_of(3, 2),
        "a new pass, new values"
    );
    let spec = Spec {
        node_metrics: 40,
        ..SMALL
    };
    let r = bench::run(spec, Scenario::Wasm, 1, false).unwrap();
    assert_eq!(r.scheduled + r.unschedulable, SMALL.pods);
    assert!(r.after_metrics_ms.is_some());
    assert!(bench::run(SMALL, Scenario::Core, 1, false)
        .unwrap()
        .after_metrics_ms
        .is_none());
}
