//! The gang workload: PodGroups of one-GPU members on the synthetic
//! cluster, scheduled through `simulate` (Coscheduling's queue sort,
//! Reserve, Permit and the waiting pods, on the virtual clock). A quarter
//! of the groups require one zone, a quarter prefer one. Reports groups per
//! second and the partial groups (some members bound, fewer than
//! `minMember`), which must be 0.

use std::time::Instant;

use k8s_openapi::api::core::v1 as k8s;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::{self, file};
use crate::framework::plugins::coscheduling::report::{GroupReport, REPORT_KEY};
use crate::framework::plugins::coscheduling::{check_manifest, POD_GROUP_KIND};
use crate::manifest::PluginObject;
use crate::model::pod_group::{PREFERRED_TOPOLOGY, REQUIRED_TOPOLOGY};
use crate::model::Pod;
use crate::simulate;

use super::{config_for, generate, peak_rss_mib, Scenario, Spec};

/// One gang run's numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GangResult {
    pub scenario: Scenario,
    pub nodes: usize,
    pub groups: usize,
    pub group_size: usize,
    pub workers: usize,
    /// Groups with every member bound.
    pub complete: usize,
    /// Groups with some but fewer than `minMember` members bound.
    pub partial: usize,
    pub seconds: f64,
    pub groups_per_second: f64,
    pub pods_per_second: f64,
    pub peak_rss_mib: f64,
}

/// `groups` PodGroups of `size` members; member `i` of every group is
/// created before member `i + 1` of any, so groups arrive interleaved.
fn workload(groups: usize, size: usize) -> (Vec<PluginObject>, Vec<Pod>) {
    let base = 1_767_225_600_000_i64; // 2026-01-01T00:00:00Z
    let time = |ms: i64| {
        k8s_openapi::jiff::Timestamp::from_millisecond(base + ms)
            .expect("in range")
            .to_string()
    };
    let mut out_groups = Vec::with_capacity(groups);
    for g in 0..groups {
        let annotations = match g % 4 {
            0 => json!({REQUIRED_TOPOLOGY: "topology.kubernetes.io/zone"}),
            1 => json!({PREFERRED_TOPOLOGY: "topology.kubernetes.io/zone"}),
            _ => json!({}),
        };
        let value = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": format!("job-{g:04}"), "namespace": "bench",
                "creationTimestamp": time(g as i64 * 1000), "annotations": annotations},
            "spec": {"minMember": size}
        });
        check_manifest(&value).expect("generated PodGroup is valid");
        out_groups.push(PluginObject {
            kind: POD_GROUP_KIND,
            version: "v1alpha1",
            value,
        });
    }
    let mut pods = Vec::with_capacity(groups * size);
    for i in 0..size {
        for g in 0..groups {
            let p: k8s::Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("job-{g:04}-{i}"), "namespace": "bench",
                    "uid": format!("job-{g:04}-{i}"),
                    "labels": {"scheduling.x-k8s.io/pod-group": format!("job-{g:04}")},
                    "creationTimestamp": time(((i * groups + g) * 1000) as i64)},
                "spec": {"schedulerName": config::DEFAULT_SCHEDULER_NAME, "containers": [{
                    "name": "worker", "image": "x",
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi"},
                        "limits": {"nvidia.com/gpu": "1"}}}]}
            }))
            .expect("generated pod is well-formed");
            pods.push(Pod::from_k8s(&p).expect("generated pod is valid"));
        }
    }
    (out_groups, pods)
}

/// Runs the gang workload on `spec.nodes` synthetic nodes.
pub fn run(
    spec: Spec,
    groups: usize,
    size: usize,
    scenario: Scenario,
    workers: usize,
) -> anyhow::Result<GangResult> {
    anyhow::ensure!(
        scenario != Scenario::Native,
        "the gang workload runs core or wasm"
    );
    let mut cfg = config_for(scenario, workers);
    let mp = cfg.profiles[0]
        .plugins
        .multi_point
        .get_or_insert_with(file::PluginSet::default);
    mp.enabled.push(file::PluginRef {
        name: "Coscheduling".into(),
        weight: None,
    });
    let scheduler = config::build(&cfg, std::path::Path::new("."), spec.seed)?;
    let mut manifests = generate(Spec { pods: 0, ..spec });
    let (objects, pods) = workload(groups, size);
    manifests.objects = objects;
    manifests.pods = pods;
    let started = Instant::now();
    let report = simulate::run(&scheduler, manifests, &simulate::Options::default())?;
    let seconds = started.elapsed().as_secs_f64();
    let size32 = size as u32;
    let groups_report: Vec<GroupReport> = report.plugin(REPORT_KEY).unwrap_or_default();
    let complete = groups_report
        .iter()
        .filter(|g| g.scheduled >= size32)
        .count();
    let partial = groups_report
        .iter()
        .filter(|g| g.scheduled > 0 && g.scheduled < size32)
        .count();
    Ok(GangResult {
        scenario,
        nodes: spec.nodes,
        groups,
        group_size: size,
        workers,
        complete,
        partial,
        seconds,
        groups_per_second: complete as f64 / seconds,
        pods_per_second: report.scheduled.len() as f64 / seconds,
        peak_rss_mib: peak_rss_mib(),
    })
}
