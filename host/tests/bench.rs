//! The benchmark suite's pieces do what they claim (numbers are not
//! asserted: tests never assert wall-clock times).

use wasmsched::bench::{self, Scenario, Spec};

const SMALL: Spec = Spec {
    nodes: 60,
    pods: 120,
    seed: 7,
    annotation_bytes: 0,
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
