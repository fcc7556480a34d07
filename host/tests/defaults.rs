//! What wasmsched does with no configuration file, on the examples' own
//! inputs: gangs all or nothing (Coscheduling is in the default profile),
//! HAMi's fractional-GPU pods placed (NodeResourcesFit ignores the HAMi
//! resources GpuTopology fits); and a `KubeSchedulerConfiguration` file
//! means kube-scheduler's plugins only.

use std::path::{Path, PathBuf};
use std::process::Command;

use wasmsched::framework::plugins::coscheduling::report::GroupReport;
use wasmsched::{config, manifest, simulate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `simulate` of an example with the built-in configuration.
fn without_a_file(example: &str, all_pods: bool) -> simulate::Report {
    let scheduler = config::build(&config::ConfigFile::default(), &root(), 0).unwrap();
    let manifests = manifest::load(&[root().join(example)]).unwrap();
    let options = simulate::Options {
        all_pods,
        ..Default::default()
    };
    simulate::run(&scheduler, manifests, &options).unwrap()
}

fn groups(r: &simulate::Report) -> Vec<GroupReport> {
    r.plugin("pod_groups").unwrap_or_default()
}

#[test]
fn gangs_are_all_or_nothing_without_a_file() {
    let r = without_a_file("examples/gang", false);
    let with_file = {
        let file = config::load(&root().join("examples/gang/config.yaml")).unwrap();
        let scheduler = config::build(&file, &root().join("examples/gang"), 0).unwrap();
        let manifests = manifest::load(&[root().join("examples/gang")]).unwrap();
        simulate::run(&scheduler, manifests, &simulate::Options::default()).unwrap()
    };
    let counts = |r: &simulate::Report| -> Vec<(String, u32)> {
        groups(r)
            .into_iter()
            .map(|g| (g.name.clone(), g.scheduled))
            .collect()
    };
    assert_eq!(counts(&r), counts(&with_file));
    let pods = manifest::load(&[root().join("examples/gang")])
        .unwrap()
        .pods;
    for g in groups(&r) {
        let min = g.min_member.unwrap_or(0);
        assert!(
            g.scheduled == 0 || g.scheduled >= min,
            "{}: {} of minMember {min} placed",
            g.name,
            g.scheduled
        );
        let members = pods
            .iter()
            .filter(|p| {
                p.labels.get("scheduling.x-k8s.io/pod-group") == Some(&g.name)
                    && p.node_name.is_none()
            })
            .count() as u32;
        assert!(
            g.scheduled == 0 || g.scheduled == members,
            "{}: {} of {members} members placed",
            g.name,
            g.scheduled
        );
    }
    assert!(
        groups(&r).iter().filter(|g| g.scheduled > 0).count() >= 3,
        "not vacuous: {:?}",
        counts(&r)
    );
    assert!(
        groups(&r).iter().filter(|g| g.scheduled == 0).count() >= 2,
        "not vacuous: {:?}",
        counts(&r)
    );
}

#[test]
fn hami_pods_are_placed_without_a_file() {
    let r = without_a_file("examples/gpu-sharing", true);
    assert!(
        !r.unschedulable
            .iter()
            .any(|u| u.message.contains("Insufficient nvidia.com/gpumem")),
        "{:?}",
        r.unschedulable
    );
    let fractional: Vec<_> = r
        .scheduled
        .iter()
        .filter(|s| !s.pod.starts_with("train-") && !s.pod.starts_with("finetune-"))
        .collect();
    assert_eq!(fractional.len(), 15, "{:?}", r.unschedulable);
    assert!(
        fractional.iter().all(|s| !s.gpus.is_empty()),
        "GpuTopology chose their devices"
    );
    assert_eq!(r.unschedulable.len(), 0, "{:?}", r.unschedulable);
}

fn wasmsched(args: &[&str]) -> (String, String, Option<i32>) {
    let o = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

/// A binpack profile in kube-scheduler's own format: kube-scheduler's
/// plugins and nothing of wasmsched's.
#[test]
fn a_v1_binpack_file_gets_kube_schedulers_plugins_only() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("binpack.yaml");
    std::fs::write(
        &f,
        "apiVersion: kubescheduler.config.k8s.io/v1\n\
         kind: KubeSchedulerConfiguration\n\
         profiles:\n\
         - schedulerName: binpack\n  \
           pluginConfig:\n  \
           - name: NodeResourcesFit\n    \
             args:\n      \
               scoringStrategy:\n        \
                 type: MostAllocated\n        \
                 resources:\n        \
                 - {name: cpu, weight: 1}\n        \
                 - {name: memory, weight: 1}\n",
    )
    .unwrap();
    let (out, err, code) = wasmsched(&["profiles", "--config", f.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    for extra in [
        "GpuTopology",
        "NetworkLocality",
        "HAMiNodeLock",
        "Coscheduling",
        "wasm plugin",
        "default args",
    ] {
        assert!(!out.contains(extra), "{extra} in:\n{out}");
    }
    assert!(out.starts_with("profile binpack\n"), "{out}");
    assert!(
        out.contains(
            "  from default (kube-scheduler): NodeUnschedulable, NodeName, TaintToleration"
        ),
        "{out}"
    );
    assert!(!out.contains("from file"), "{out}");
    // The same file running a pod: only kube-scheduler's plugins are
    // named in the explanation.
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  allocatable: {cpu: '4', memory: 8Gi, pods: '110'}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  schedulerName: binpack\n  containers:\n  - name: c\n    image: x\n    resources: {requests: {cpu: '1'}}\n",
    )
    .unwrap();
    let (out, err, code) = wasmsched(&[
        "simulate",
        cluster.to_str().unwrap(),
        "--config",
        f.to_str().unwrap(),
        "--explain",
        "default/p",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("NodeResourcesFit"), "{out}");
    assert!(!out.contains("GpuTopology"), "{out}");
}

/// `profiles` says where each plugin comes from: the defaults, the file
/// (with the field), a fragment the file includes.
#[test]
fn profiles_say_where_each_plugin_comes_from() {
    let (out, err, code) = wasmsched(&["profiles"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("  queuesort: Coscheduling\n"), "{out}");
    assert!(out.contains("  from default (wasmsched): "), "{out}");
    assert!(
        out.contains("  args of NodeResourcesFit: {\"ignoredResources\":[\"nvidia.com/gpumem\",\"nvidia.com/gpumem-percentage\",\"nvidia.com/gpucores\",\"nvidia.com/priority\"]} (the defaults add ignoredResources: "),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\ninclude: [fragment-*.yaml]\n\
         profiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{name: NetworkLocality}]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("fragment-lock.yaml"),
        "profiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    score:\n      enabled: [{name: GpuTopology, weight: 5}]\n",
    )
    .unwrap();
    let path = dir.path().join("config.yaml");
    let (out, err, code) = wasmsched(&["profiles", "--config", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains("NetworkLocality"), "{out}");
    let fragment = dir.path().join("fragment-lock.yaml");
    assert!(
        out.contains(&format!(
            "  from file {} (profiles[0].plugins.score): GpuTopology\n",
            fragment.display()
        )),
        "{out}"
    );
    assert!(out.contains("GpuTopology (weight 5)"), "{out}");
}
