//! The glue between the exported functions and a [`Plugin`]: instance
//! state (plugin, cluster, current cycle) lives in a thread-local, since a
//! component instance is single-threaded and a native unit test gets its
//! own state per test thread. The state is keyed by plugin type, so several
//! plugins can share one native thread (the host's native benchmark build
//! links the built-in plugins into one process).

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;

use crate::cluster::Cluster;
use crate::types::{
    Candidate, CyclePlan, Delta, Device, DeviceSet, KeyInterests, PermitDecision, PermitResult,
    Pod, PodPatch, PodStatus, PreemptionAdvice, Rejection,
};
use crate::{KeptDevices, Plugin};

struct Cycle {
    pod: Pod,
    data: Box<dyn Any>,
}

#[derive(Default)]
struct State {
    plugin: Option<Box<dyn Any>>,
    cluster: Cluster,
    cycle: Option<Cycle>,
    /// `node-device-rank`: each node's devices as last sent, with their
    /// serial (a new one each time devices are sent).
    devices: HashMap<u32, (u64, Vec<Device>)>,
    /// The last serial given.
    serial: u64,
}

thread_local! {
    static STATES: RefCell<HashMap<TypeId, State>> = RefCell::new(HashMap::new());
}

fn with_state<P: Plugin, R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATES.with(|s| f(s.borrow_mut().entry(TypeId::of::<P>()).or_default()))
}

/// The plugin (once initialized) and the cluster it may change.
fn with_plugin_and_cluster<P: Plugin>(f: impl FnOnce(Option<&P>, &mut Cluster)) {
    with_state::<P, _>(|s| {
        let plugin = s.plugin.as_ref().and_then(|p| p.downcast_ref::<P>());
        f(plugin, &mut s.cluster)
    })
}

fn with_plugin<P: Plugin, R>(
    f: impl FnOnce(&P, &Cluster, Option<&Cycle>) -> Result<R, String>,
) -> Result<R, String> {
    with_state::<P, _>(|s| {
        let plugin = s
            .plugin
            .as_ref()
            .and_then(|p| p.downcast_ref::<P>())
            .ok_or_else(|| "plugin called before init".to_string())?;
        f(plugin, &s.cluster, s.cycle.as_ref())
    })
}

fn with_cycle<P: Plugin, R>(
    f: impl FnOnce(&P, &P::Cycle, &Pod, &Cluster) -> Result<R, String>,
) -> Result<R, String> {
    with_plugin::<P, R>(|plugin, cluster, cycle| {
        let cycle = cycle.ok_or_else(|| "no cycle started".to_string())?;
        let data = cycle
            .data
            .downcast_ref::<P::Cycle>()
            .ok_or_else(|| "cycle state of another plugin type".to_string())?;
        f(plugin, data, &cycle.pod, cluster)
    })
}

/// `lifecycle.init`: builds the plugin from its args and forgets any
/// previous state.
pub fn init<P: Plugin>(args: &str) -> Result<(), String> {
    let plugin = P::init(args)?;
    with_state::<P, _>(|s| {
        *s = State {
            plugin: Some(Box::new(plugin)),
            ..State::default()
        }
    });
    Ok(())
}

/// `lifecycle.apply`: shows each change to the plugin ([`Plugin::observe`])
/// and applies it to the cluster.
pub fn apply<P: Plugin>(deltas: Vec<Delta>) {
    with_plugin_and_cluster::<P>(|plugin, cluster| {
        for d in deltas {
            if let Some(p) = plugin {
                p.observe(&d, cluster);
            }
            cluster.apply(d);
        }
    })
}

/// `lifecycle.cycle-start`: keeps the pod and the plugin's cycle data,
/// returns the plugin's plan for the cycle.
pub fn cycle_start<P: Plugin>(pod: Pod) -> Result<CyclePlan, String> {
    let (data, plan) = with_plugin::<P, _>(|plugin, cluster, _| {
        let data = plugin.cycle_start(&pod, cluster)?;
        let plan = plugin.plan(&data, &pod);
        Ok((data, plan))
    })?;
    with_state::<P, _>(|s| {
        s.cycle = Some(Cycle {
            pod,
            data: Box::new(data),
        })
    });
    Ok(plan)
}

/// `filter.filter`: one verdict per node index.
pub fn filter<P: Plugin>(nodes: &[u32]) -> Vec<Option<Rejection>> {
    let result = with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        Ok(nodes
            .iter()
            .map(|&i| match cluster.node(i) {
                Some(node) => plugin.filter(cycle, pod, node, cluster).err(),
                None => Some(crate::reject_unresolvable("node unknown to plugin")),
            })
            .collect())
    });
    result.unwrap_or_else(|e| {
        nodes
            .iter()
            .map(|_| Some(crate::reject(e.clone())))
            .collect()
    })
}

/// `score.score`: one raw score per node index.
pub fn score<P: Plugin>(nodes: &[u32]) -> Result<Vec<i64>, String> {
    with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        nodes
            .iter()
            .map(|&i| match cluster.node(i) {
                Some(node) => plugin.score(cycle, pod, node, cluster),
                None => Err(format!("node index {i} unknown to plugin")),
            })
            .collect()
    })
}

/// `normalize-score.normalize-score`.
pub fn normalize<P: Plugin>(nodes: &[u32], mut scores: Vec<i64>) -> Result<Vec<i64>, String> {
    if nodes.len() != scores.len() {
        return Err(format!("{} nodes but {} scores", nodes.len(), scores.len()));
    }
    with_cycle::<P, _>(|plugin, cycle, pod, _| plugin.normalize(cycle, pod, nodes, &mut scores))?;
    Ok(scores)
}

/// `post-filter.post-filter`: the plugin's advice on the cycle's
/// preemption candidates.
pub fn post_filter<P: Plugin>(candidates: &[Candidate]) -> Result<PreemptionAdvice, String> {
    with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        plugin.post_filter(cycle, pod, candidates, cluster)
    })
}

/// `deletion-cost.deletion-cost`.
pub fn deletion_cost<P: Plugin>(
    pod: &PodStatus,
    metrics: &[(String, f64)],
) -> Result<Option<i32>, String> {
    with_plugin::<P, _>(|plugin, _, _| plugin.deletion_cost(pod, metrics))
}

/// `reserve.reserve`: Reserve on the cycle's pod.
pub fn reserve<P: Plugin>(node: u32) -> Result<(), String> {
    with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        let n = cluster
            .node(node)
            .ok_or_else(|| format!("node index {node} unknown to plugin"))?;
        plugin.reserve(cycle, pod, n, cluster)
    })
}

/// `reserve.unreserve`.
pub fn unreserve<P: Plugin>(pod_uid: &str, node: u32) {
    let _ = with_plugin::<P, _>(|plugin, cluster, _| {
        plugin.unreserve(pod_uid, cluster.node(node), cluster);
        Ok(())
    });
}

/// `pre-bind.pre-bind`: the labels and annotations to write on the
/// cycle's pod.
pub fn pre_bind<P: Plugin>(node: u32) -> Result<PodPatch, String> {
    with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        let n = cluster
            .node(node)
            .ok_or_else(|| format!("node index {node} unknown to plugin"))?;
        plugin.pre_bind(cycle, pod, n, cluster)
    })
}

/// `device-rank.rank-devices`: the plugin's ranks of the candidate sets
/// on `node`; a plugin that cannot answer (no cycle, unknown node, an
/// error) abstains, logging why.
pub fn rank_devices<P: Plugin>(
    node: u32,
    devices: &[Device],
    requests: &[String],
    sets: &[DeviceSet],
) -> Vec<u8> {
    with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        let n = cluster
            .node(node)
            .ok_or_else(|| format!("node index {node} unknown to plugin"))?;
        plugin.rank_devices(cycle, pod, n, devices, requests, sets, cluster)
    })
    .unwrap_or_else(|e| {
        crate::log(crate::types::LogLevel::Warn, &format!("rank-devices: {e}"));
        Vec::new()
    })
}

/// `node-device-rank.rank-node-devices`: as [`rank_devices`], with the
/// node's devices those of the last call that carried them when
/// `devices` is `None` (kept here, per node), and `allocated` giving
/// their flags now.
pub fn rank_node_devices<P: Plugin>(
    node: u32,
    devices: Option<Vec<Device>>,
    allocated: &[bool],
    requests: &[String],
    sets: &[DeviceSet],
) -> Vec<u8> {
    // Out of the state while the plugin ranks (it borrows the state).
    let kept = with_state::<P, _>(|s| {
        let kept = s.devices.remove(&node);
        match devices {
            Some(d) => {
                s.serial += 1;
                Some((s.serial, d))
            }
            None => kept,
        }
    });
    let Some((serial, mut devices)) = kept else {
        crate::log(
            crate::types::LogLevel::Warn,
            &format!("rank-node-devices: no devices kept for node index {node}"),
        );
        return Vec::new();
    };
    if devices.len() != allocated.len() {
        crate::log(
            crate::types::LogLevel::Warn,
            &format!(
                "rank-node-devices: {} allocated flags for {} devices of node index {node}",
                allocated.len(),
                devices.len()
            ),
        );
        return Vec::new();
    }
    for (d, &a) in devices.iter_mut().zip(allocated) {
        d.allocated = a;
    }
    let ranks = with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        let n = cluster
            .node(node)
            .ok_or_else(|| format!("node index {node} unknown to plugin"))?;
        let kept = KeptDevices {
            devices: &devices,
            serial,
        };
        plugin.rank_kept_devices(cycle, pod, n, kept, requests, sets, cluster)
    })
    .unwrap_or_else(|e| {
        crate::log(crate::types::LogLevel::Warn, &format!("rank-devices: {e}"));
        Vec::new()
    });
    with_state::<P, _>(|s| s.devices.insert(node, (serial, devices)));
    ranks
}

/// `permit.permit`: Permit on the cycle's pod; a plugin that cannot
/// answer (no cycle, unknown node) rejects the pod with the cause.
pub fn permit<P: Plugin>(node: u32) -> PermitResult {
    with_cycle::<P, _>(|plugin, cycle, pod, cluster| {
        let n = cluster
            .node(node)
            .ok_or_else(|| format!("node index {node} unknown to plugin"))?;
        Ok(plugin.permit(cycle, pod, n, cluster))
    })
    .unwrap_or_else(|e| PermitResult {
        decision: PermitDecision::Reject(e),
        allow_waiting: Vec::new(),
    })
}

/// `interests.interests`: the plugin's key interests (every key before
/// `init`).
pub fn interests<P: Plugin>() -> KeyInterests {
    with_plugin::<P, _>(|plugin, _, _| Ok(plugin.interests())).unwrap_or(KeyInterests {
        pod_labels: crate::types::KeySelector::All,
        pod_annotations: crate::types::KeySelector::All,
        node_labels: crate::types::KeySelector::All,
        node_annotations: crate::types::KeySelector::All,
    })
}

/// `metric-interests.metric-interests`: the node metrics the plugin reads
/// (none before `init`).
pub fn metric_interests<P: Plugin>() -> Vec<String> {
    with_plugin::<P, _>(|plugin, _, _| Ok(plugin.metric_interests())).unwrap_or_default()
}

/// Applies one metrics update per item to the cluster (`set` returns the
/// node's index when it has the node), then tells the plugin
/// ([`Plugin::metrics_changed`]) about each node updated.
fn update_metrics<P: Plugin, T>(
    items: impl IntoIterator<Item = T>,
    mut set: impl FnMut(&mut Cluster, T) -> Option<u32>,
) {
    with_plugin_and_cluster::<P>(|plugin, cluster| {
        for item in items {
            let Some(index) = set(cluster, item) else {
                continue;
            };
            if let (Some(p), Some(node)) = (plugin, cluster.node(index)) {
                p.metrics_changed(node, cluster);
            }
        }
    })
}

/// `metric-interests.set-metrics`: replaces each node's metrics, then tells
/// the plugin ([`Plugin::metrics_changed`]).
pub fn set_metrics<P: Plugin>(nodes: Vec<(u32, Vec<(String, f64)>)>) {
    update_metrics::<P, _>(nodes, |cluster, (index, metrics)| {
        cluster.set_metrics(index, metrics).then_some(index)
    })
}

/// `metric-interests.set-metric-values`: new values for each node's
/// metrics (`count` of them, taken in turn from `values`), names
/// unchanged, then tells the plugin ([`Plugin::metrics_changed`]).
pub fn set_metric_values<P: Plugin>(nodes: &[(u32, u32)], values: &[f64]) {
    let mut rest = values;
    update_metrics::<P, _>(nodes, |cluster, &(index, count)| {
        let (mine, after) = rest.split_at((count as usize).min(rest.len()));
        rest = after;
        cluster.set_metric_values(index, mine).then_some(index)
    })
}
