//! The built-in GPU-topology scheduling policy of wasmsched.
//!
//! Filter: a pod that uses GPUs (an `nvidia.com/gpu` request, or with
//! fractional sharing a `gpu.nvidia.com/memory` annotation alone) fits a
//! node with enough *free* GPUs of the requested model and memory. Score:
//! a packing term (`binpack`, `spread` or the origin formula) mixed with
//! the node's GPU utilization, minus a penalty when the GPUs the pod would
//! get span more NVLink domains than necessary. A pod that uses no GPU
//! prefers nodes without GPUs (`cpuPodsAvoidGpuNodes`). Every formula,
//! label and annotation is documented in docs/gpu-topology.md.
//!
//! Nodes running HAMi's device plugin (`hami.io/node-nvidia-register`)
//! are fitted and scored device by device, and the device choice is
//! written on the pod for HAMi's device plugin ([`hami`],
//! docs/gpu-sharing.md).

mod args;
pub mod dra;
pub mod facts;
pub mod gpus;
pub mod hami;
mod preemption;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

pub use args::{Config, ModelMatching, ModelRule, Policy};
use facts::{Facts, Gpus, NodeFacts};

use wasmsched_plugin_sdk::types::{CyclePlan, Delta, KeyInterests, KeySelector, Pod, PodPatch};
use wasmsched_plugin_sdk::{
    export_plugin, reject, reject_unresolvable, Cluster, KeptDevices, NodeExt, NodeState, Plugin,
    PodExt, Rejection,
};

/// The extended resource and the node labels and annotation the SDK's
/// [`gpu`](wasmsched_plugin_sdk::gpu) readers understand (origin
/// `gpu.nvidia.com/*` and GPU Feature Discovery `nvidia.com/gpu.*`).
pub use wasmsched_plugin_sdk::gpu::{
    ANN_TOPOLOGY, GFD_COUNT, GFD_MEMORY, GFD_PRODUCT, GPU_RESOURCE, LABEL_COUNT, LABEL_MEMORY,
    LABEL_MODEL,
};
/// Pod annotations.
pub const ANN_MODEL: &str = "gpu.nvidia.com/model";
pub const ANN_MEMORY: &str = "gpu.nvidia.com/memory";
pub const ANN_POLICY: &str = "gpu.nvidia.com/policy";
/// GPU indices a placed pod holds (written at bind by the host).
pub const ANN_ASSIGNED: &str = "gpu.nvidia.com/assigned-gpus";
/// Node annotations.
pub const ANN_UTILIZATION: &str = "gpu.nvidia.com/utilization";
/// Host-provided node metric (percent, averaged over the node's GPUs).
pub const METRIC_UTILIZATION: &str = "DCGM_FI_DEV_GPU_UTIL";
/// Host-provided per-device metric (`DCGM_FI_DEV_FB_FREE/UUID`, MiB): the
/// device's free framebuffer memory.
pub const METRIC_FREE_MEMORY: &str = "DCGM_FI_DEV_FB_FREE";

/// Rejection reasons (countable: no names or numbers).
///
/// The node has fewer GPUs than requested whatever runs on it (or none).
pub const NOT_ENOUGH_GPUS: &str = "Not enough GPUs";
/// The node has enough GPUs, but not enough of them are free.
pub const NOT_ENOUGH_FREE_GPUS: &str = "Not enough free GPUs";
pub const MODEL_MISMATCH: &str = "GPU model mismatch";
pub const NOT_ENOUGH_MEMORY: &str = "Not enough GPU memory";
pub const NOT_ENOUGH_FREE_MEMORY: &str = "Not enough free GPU memory";

/// What a pod asks of GPUs, parsed once per cycle.
#[derive(Debug, Clone)]
pub struct Demand {
    /// Whole GPUs (`nvidia.com/gpu`); 0 for a sharing pod.
    pub whole: u32,
    /// `gpu.nvidia.com/memory` in MiB (per GPU; for a sharing pod, what it
    /// takes of the GPU it shares); 0 when not set.
    pub memory_mib: u64,
    pub model: Option<ModelRule>,
    pub policy: Policy,
}

/// The current cycle's demand; `None` for a pod that uses no GPU (it
/// passes Filter everywhere and is scored by [`GpuTopology::cpu_pod_score`]).
/// The second field is the pod's vGPU demand on HAMi nodes.
pub struct Cycle(Option<Demand>, Option<hami::HamiDemand>);

/// Where a pod would go on a node, and what scoring needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The GPU indices the pod would get (one for a sharing pod).
    pub gpus: Vec<u32>,
    pub capacity: u32,
    /// Whole GPUs free before the placement.
    pub free: u32,
    /// A sharing pod joins a GPU already shared (rather than opening a
    /// free one).
    pub joins_shared: bool,
    /// NVLink domains spanned beyond the fewest possible.
    pub extra_domains: u32,
    /// GPU utilization in percent (the configured default when unknown).
    pub utilization_pct: u32,
    /// Whether the node said its utilization (annotation or metric).
    pub utilization_known: bool,
}

pub struct GpuTopology {
    cfg: Config,
    /// Nodes this instance has logged "utilization unknown" for (once
    /// each; only touched when a node's utilization is unknown).
    unknown_logged: RefCell<HashSet<String>>,
    /// HAMi nodes: per-device usage and the current reservation.
    hami: hami::HamiState,
    /// Every node's GPU labels and annotations, parsed once per change.
    facts: RefCell<Facts>,
    /// DRA: each node's device groups, by node index, with the serial of
    /// the devices they were made from.
    dra_groups: RefCell<HashMap<u32, (u64, dra::Groups)>>,
}

/// Logs at debug level through the host (`--log wasmsched=debug` shows
/// it). Only in the component: natively (unit tests, the host's native
/// benchmark build) the SDK would print to stderr.
fn debug(message: impl FnOnce() -> String) {
    #[cfg(target_arch = "wasm32")]
    wasmsched_plugin_sdk::log(wasmsched_plugin_sdk::types::LogLevel::Debug, &message());
    #[cfg(not(target_arch = "wasm32"))]
    let _ = message;
}

fn bad_annotation(name: &str, value: &str, why: &str) -> String {
    format!("invalid annotation {name}={value:?}: {why}")
}

impl GpuTopology {
    /// The ranks of `sets` on `node`'s devices grouped as `groups`, under
    /// the pod's policy, idle GPUs first among equals.
    fn rank_grouped(
        &self,
        cycle: &Cycle,
        pod: &Pod,
        node: &NodeState,
        devices: &[wasmsched_plugin_sdk::types::Device],
        groups: &dra::Groups,
        sets: &[wasmsched_plugin_sdk::types::DeviceSet],
    ) -> Vec<u8> {
        let policy = match &cycle.0 {
            Some(d) => d.policy,
            None => pod
                .annotation(ANN_POLICY)
                .and_then(Policy::parse)
                .unwrap_or(self.cfg.policy),
        };
        let mut ranks = dra::rank_grouped(groups, policy, devices, sets);
        if !node.node.metrics.is_empty() {
            let metric = &self.cfg.utilization_metric;
            let util = |d: &wasmsched_plugin_sdk::types::Device| {
                let uuid = dra::uuid(d)?;
                node.node
                    .metric(&format!("{metric}/{uuid}"))
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(|v| v.min(100.0).round() as u32)
            };
            let unknown = self.cfg.unknown_utilization_pct;
            dra::prefer_idle(&mut ranks, sets, devices, unknown, util);
        }
        ranks
    }

    pub fn new(cfg: Config) -> Self {
        GpuTopology {
            cfg,
            unknown_logged: RefCell::new(HashSet::new()),
            hami: hami::HamiState::default(),
            facts: RefCell::new(Facts::default()),
            dra_groups: RefCell::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Parses the pod's GPU demand. A malformed annotation or a negative
    /// `nvidia.com/gpu` amount is an error naming it.
    pub fn demand(&self, pod: &Pod) -> Result<Option<Demand>, String> {
        let (req, lim) = (pod.request(GPU_RESOURCE), pod.limit(GPU_RESOURCE));
        if req < 0 || lim < 0 {
            return Err(format!(
                "invalid {GPU_RESOURCE} amount {}: not a non-negative count",
                req.min(lim)
            ));
        }
        let whole = u32::try_from(req.max(lim)).unwrap_or(u32::MAX);
        let memory_mib = match pod.annotation(ANN_MEMORY) {
            None => 0,
            Some(v) => gpus::parse_uint(v)
                .ok_or_else(|| bad_annotation(ANN_MEMORY, v, "not a non-negative integer (MiB)"))?,
        };
        let model = match pod.annotation(ANN_MODEL) {
            None => None,
            Some(v) if !v.bytes().any(|b| b.is_ascii_alphanumeric()) => {
                return Err(bad_annotation(ANN_MODEL, v, "not a GPU model name"))
            }
            Some(v) => Some(self.cfg.model_rule(v)),
        };
        let policy = match pod.annotation(ANN_POLICY) {
            None => self.cfg.policy,
            Some(v) => Policy::parse(v).ok_or_else(|| {
                bad_annotation(ANN_POLICY, v, &format!("expected {}", Policy::NAMES))
            })?,
        };
        let uses_gpu = whole > 0 || (self.cfg.fractional && memory_mib > 0);
        Ok(uses_gpu.then_some(Demand {
            whole,
            memory_mib,
            model,
            policy,
        }))
    }

    /// Where `d` would go on `ns`, or why it does not fit. Checks, in
    /// order: node labels valid; enough GPUs in total; model; memory per
    /// GPU; node annotations valid; placed pods' annotations valid; enough
    /// free GPUs (or free memory on one GPU for a sharing pod). Reads the
    /// node facts kept by `observe`, else parses the node now.
    pub fn place(&self, d: &Demand, ns: &NodeState) -> Result<Placement, Rejection> {
        self.place_on(d, ns, true)
    }

    /// [`GpuTopology::place`]; without `choose`, the placement names no
    /// GPUs (Filter only needs to know the pod fits).
    fn place_on(&self, d: &Demand, ns: &NodeState, choose: bool) -> Result<Placement, Rejection> {
        let kept = self.facts.borrow();
        if let Some((f, slots)) = kept.get(ns, &self.cfg) {
            let fit = self.node_fits(d, f)?;
            return place_in(d, &fit, &slots, &self.cfg, choose);
        }
        let f = NodeFacts::read(&ns.node, &self.cfg);
        let fit = self.node_fits(d, &f)?;
        let slots = facts::slots_of(&f, ns, &self.cfg);
        place_in(d, &fit, &slots, &self.cfg, choose)
    }

    /// The checks that depend only on the node: labels valid, enough GPUs
    /// in total, model, memory per GPU, annotations valid. Returns the GPU
    /// labels, the known utilization and the NVLink domains.
    fn node_fits<'f>(&self, d: &Demand, f: &'f NodeFacts) -> Result<NodeFit<'f>, Rejection> {
        let g = f.gpus.as_ref().map_err(Clone::clone)?;
        if g.capacity < d.whole.max(1) {
            return Err(reject_unresolvable(NOT_ENOUGH_GPUS));
        }
        if let Some(rule) = &d.model {
            if !g.model.as_deref().is_some_and(|m| rule.matches(m)) {
                return Err(reject_unresolvable(MODEL_MISMATCH));
            }
        }
        if d.memory_mib > 0 && g.memory_mib.is_none_or(|m| d.memory_mib > m) {
            return Err(reject_unresolvable(NOT_ENOUGH_MEMORY));
        }
        let known = *f.utilization.as_ref().map_err(Clone::clone)?;
        let domains = f.domains.as_ref().map_err(Clone::clone)?;
        Ok(NodeFit {
            g,
            known,
            domains: domains.as_deref(),
        })
    }

    /// The score of a placement, in 0..=100 (see docs/gpu-topology.md):
    /// `clamp((fit * wf + util * wu) / (wf + wu) - penalty * extra, 0, 100)`.
    pub fn score_placement(&self, d: &Demand, p: &Placement) -> i64 {
        let free = p.free as i64;
        let k = d.whole as i64;
        // GPUs left free after placement, and whether the pod touches
        // something untouched (a whole pod: an unused node; a sharing pod:
        // a free GPU).
        let (left, fresh) = if d.whole > 0 {
            (free - k, p.free == p.capacity)
        } else if p.joins_shared {
            (free, false)
        } else {
            (free - 1, true)
        };
        let fresh = fresh as i64;
        let fit = match d.policy {
            Policy::Binpack => 100 - 10 * left - 5 * fresh,
            Policy::Spread => 10 * left + 5 * fresh,
            Policy::Origin => 100 - 10 * (free - k).abs(),
        }
        .clamp(0, 100);
        let util = 100 - p.utilization_pct.min(100) as i64;
        let (wf, wu) = (self.cfg.fit_weight, self.cfg.utilization_weight);
        let base = (fit * wf + util * wu) / (wf + wu);
        (base - self.cfg.topology_penalty * p.extra_domains as i64).clamp(0, 100)
    }

    /// The score of a node for a pod that uses no GPU. With
    /// `cpuPodsAvoidGpuNodes` (the default): 100 on a node without GPUs,
    /// `50 * (C - F) / C` on a node with `C` GPUs of which `F` are free (0
    /// when untouched, 50 when every GPU is taken), and 0 on a node whose
    /// GPU labels or placed pods' GPU annotations are invalid. Without it:
    /// 0 everywhere, as in the origin.
    pub fn cpu_pod_score(&self, ns: &NodeState) -> i64 {
        if !self.cfg.cpu_pods_avoid_gpu_nodes {
            return 0;
        }
        let score = |f: &NodeFacts, slots: &facts::Slots| {
            let Ok(g) = &f.gpus else {
                return 0;
            };
            if g.capacity == 0 {
                return 100;
            }
            match slots {
                Ok((_, free)) => {
                    50 * (g.capacity - (*free).min(g.capacity)) as i64 / g.capacity as i64
                }
                Err(_) => 0,
            }
        };
        let kept = self.facts.borrow();
        if let Some((f, slots)) = kept.get(ns, &self.cfg) {
            return score(f, &slots);
        }
        let f = NodeFacts::read(&ns.node, &self.cfg);
        let slots = facts::slots_of(&f, ns, &self.cfg);
        score(&f, &slots)
    }

    /// Logs at debug level, once per node and instance, that the node's
    /// utilization is unknown and which value stands in for it.
    fn note_unknown_utilization(&self, node: &str) {
        let mut logged = self.unknown_logged.borrow_mut();
        if logged.contains(node) {
            return;
        }
        logged.insert(node.to_string());
        debug(|| {
            format!(
                "node {node}: GPU utilization unknown (no {} annotation, no {} metric); \
                 scoring it as {}% busy (unknownUtilization)",
                self.cfg.utilization_annotation,
                self.cfg.utilization_metric,
                self.cfg.unknown_utilization_pct
            )
        });
    }

    /// The GPU indices `pod` would get on `node` under this configuration:
    /// `Some(vec![])` for a pod that uses no GPU, `None` when the pod's
    /// annotations are invalid or it does not fit.
    pub fn choose_gpus(&self, node: &NodeState, pod: &Pod) -> Option<Vec<u32>> {
        match self.demand(pod).ok()? {
            None => Some(Vec::new()),
            Some(d) => self.place(&d, node).ok().map(|p| p.gpus),
        }
    }
}

/// What [`GpuTopology::node_fits`] found on a node: its GPU labels, its
/// utilization when known and its NVLink domains.
#[derive(Clone, Copy)]
struct NodeFit<'f> {
    g: &'f Gpus,
    known: Option<u32>,
    domains: Option<&'f [Vec<u32>]>,
}

/// The free-GPU checks of [`GpuTopology::place`] on a node that passed
/// [`GpuTopology::node_fits`], and the placement.
fn place_in(
    d: &Demand,
    fit: &NodeFit<'_>,
    slots: &facts::Slots,
    cfg: &Config,
    choose: bool,
) -> Result<Placement, Rejection> {
    let NodeFit { g, known, domains } = *fit;
    let (slots, free) = match slots {
        Ok((slots, free)) => (slots.as_slice(), *free),
        Err(r) => return Err(r.clone()),
    };
    let placement = |gpus, joins_shared, extra_domains| Placement {
        gpus,
        capacity: g.capacity,
        free,
        joins_shared,
        extra_domains,
        utilization_pct: known.unwrap_or(cfg.unknown_utilization_pct),
        utilization_known: known.is_some(),
    };
    if d.whole > 0 {
        if free < d.whole {
            return Err(reject(NOT_ENOUGH_FREE_GPUS));
        }
        if !choose {
            return Ok(placement(Vec::new(), false, 0));
        }
        let (chosen, extra) = gpus::choose_whole(slots, domains, d.whole);
        Ok(placement(chosen, false, extra))
    } else {
        let per_gpu = g.memory_mib.unwrap_or(0);
        match gpus::choose_shared(slots, domains, per_gpu, d.memory_mib, free > 0) {
            Some((i, joins)) if choose => Ok(placement(vec![i], joins, 0)),
            Some((_, joins)) => Ok(placement(Vec::new(), joins, 0)),
            None => Err(reject(NOT_ENOUGH_FREE_MEMORY)),
        }
    }
}

/// The GPU indices `pod` would get on `node` with the default
/// configuration (see [`GpuTopology::choose_gpus`]). For the host to record
/// in `gpu.nvidia.com/assigned-gpus` at bind.
pub fn choose_gpus(node: &NodeState, pod: &Pod) -> Option<Vec<u32>> {
    GpuTopology::new(Config::default()).choose_gpus(node, pod)
}

impl Plugin for GpuTopology {
    type Cycle = Cycle;

    fn init(args: &str) -> Result<Self, String> {
        let cfg = Config::parse(args)?;
        debug(|| format!("config: {}", cfg.summary()));
        Ok(GpuTopology::new(cfg))
    }

    fn cycle_start(&self, pod: &Pod, _cluster: &Cluster) -> Result<Cycle, String> {
        Ok(Cycle(self.demand(pod)?, hami::demand(pod, &self.cfg.hami)?))
    }

    fn observe(&self, delta: &Delta, cluster: &Cluster) {
        let live = hami::LiveMetrics {
            utilization: &self.cfg.utilization_metric,
            free_memory: &self.cfg.free_memory_metric,
        };
        self.hami.observe(delta, live);
        self.facts.borrow_mut().observe(delta, &self.cfg, cluster);
    }

    /// A pod that uses no GPU passes every node's Filter, and its Score
    /// only matters when CPU pods are steered away from GPU nodes.
    fn plan(&self, cycle: &Cycle, _pod: &Pod) -> CyclePlan {
        let uses_gpu = cycle.0.is_some() || cycle.1.is_some();
        CyclePlan {
            filter: uses_gpu,
            score: uses_gpu || self.cfg.cpu_pods_avoid_gpu_nodes,
        }
    }

    fn interests(&self) -> KeyInterests {
        interests(&self.cfg)
    }

    /// The node's utilization and each GPU's (`METRIC/UUID`) and free
    /// framebuffer memory per GPU.
    fn metric_interests(&self) -> Vec<String> {
        vec![
            self.cfg.utilization_metric.clone(),
            format!("{}/*", self.cfg.utilization_metric),
            format!("{}/*", self.cfg.free_memory_metric),
        ]
    }

    fn metrics_changed(&self, node: &NodeState, _cluster: &Cluster) {
        let live = hami::LiveMetrics {
            utilization: &self.cfg.utilization_metric,
            free_memory: &self.cfg.free_memory_metric,
        };
        self.hami.metrics_changed(node.index, &node.node, live);
        self.facts
            .borrow_mut()
            .metrics_changed(node.index, &node.node, &self.cfg);
    }

    /// DRA device sets ranked by [`dra::rank`], under the pod's policy
    /// (its `gpu.nvidia.com/policy` annotation, else the configured one).
    #[allow(clippy::too_many_arguments)]
    fn rank_devices(
        &self,
        cycle: &Cycle,
        pod: &Pod,
        node: &NodeState,
        devices: &[wasmsched_plugin_sdk::types::Device],
        _requests: &[String],
        sets: &[wasmsched_plugin_sdk::types::DeviceSet],
        _cluster: &Cluster,
    ) -> Result<Vec<u8>, String> {
        let groups = dra::Groups::new(&self.cfg, devices);
        Ok(self.rank_grouped(cycle, pod, node, devices, &groups, sets))
    }

    /// As `rank_devices`, with the node's device groups kept while the
    /// SDK keeps its devices (grouping reads every attribute of every
    /// device; a call then only counts the allocated ones).
    #[allow(clippy::too_many_arguments)]
    fn rank_kept_devices(
        &self,
        cycle: &Cycle,
        pod: &Pod,
        node: &NodeState,
        kept: KeptDevices<'_>,
        _requests: &[String],
        sets: &[wasmsched_plugin_sdk::types::DeviceSet],
        _cluster: &Cluster,
    ) -> Result<Vec<u8>, String> {
        let mut groups = self.dra_groups.borrow_mut();
        let entry = groups
            .entry(node.index)
            .and_modify(|(serial, g)| {
                if *serial != kept.serial || !g.fits(kept.devices) {
                    *serial = kept.serial;
                    *g = dra::Groups::new(&self.cfg, kept.devices);
                }
            })
            .or_insert_with(|| (kept.serial, dra::Groups::new(&self.cfg, kept.devices)));
        Ok(self.rank_grouped(cycle, pod, node, kept.devices, &entry.1, sets))
    }

    fn filter(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<(), Rejection> {
        if let Some(h) = &cycle.1 {
            match self.hami.place(h, node) {
                Some(r) => return r.map(|_| ()),
                None if h.hami_only => return Err(reject_unresolvable(hami::NOT_HAMI_NODE)),
                None => {}
            }
        }
        match &cycle.0 {
            None => Ok(()),
            Some(d) => self.place_on(d, node, false).map(|_| ()),
        }
    }

    fn score(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<i64, String> {
        // A node Filter rejected is never scored by the host; should it be,
        // it gets 0 rather than failing the pod's cycle.
        if let Some(h) = &cycle.1 {
            if let Some(r) = self.hami.place(h, node) {
                return Ok(r.map_or(0, |(_, s)| s));
            }
        }
        Ok(match &cycle.0 {
            None if self.hami.is_hami(node.index) => {
                self.hami.cpu_pod_score(node.index).unwrap_or(0)
                    * i64::from(self.cfg.cpu_pods_avoid_gpu_nodes)
            }
            None => self.cpu_pod_score(node),
            Some(d) => match self.place(d, node) {
                Ok(p) => {
                    if !p.utilization_known {
                        self.note_unknown_utilization(&node.node.name);
                    }
                    self.score_placement(d, &p)
                }
                Err(_) => 0,
            },
        })
    }

    fn post_filter(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        candidates: &[wasmsched_plugin_sdk::types::Candidate],
        cluster: &Cluster,
    ) -> Result<wasmsched_plugin_sdk::types::PreemptionAdvice, String> {
        Ok(wasmsched_plugin_sdk::types::PreemptionAdvice {
            vetoed: Vec::new(),
            ranking: self.preemption_ranking(cycle.0.as_ref(), candidates, cluster),
        })
    }

    fn reserve(
        &self,
        cycle: &Cycle,
        pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<(), String> {
        self.hami.reserve(cycle.1.as_ref(), &pod.uid, node)
    }

    fn unreserve(&self, pod_uid: &str, _node: Option<&NodeState>, _cluster: &Cluster) {
        self.hami.unreserve(pod_uid);
    }

    fn pre_bind(
        &self,
        _cycle: &Cycle,
        pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<PodPatch, String> {
        Ok(self.hami.pre_bind(&pod.uid, node.index))
    }
}

/// The label and annotation keys the plugin reads.
fn interests(cfg: &Config) -> KeyInterests {
    let keys = |k: &[&str]| KeySelector::Keys(k.iter().map(|s| s.to_string()).collect());
    let mut pod_keys = vec![ANN_MODEL, ANN_MEMORY, ANN_POLICY, ANN_ASSIGNED];
    pod_keys.extend(hami::demand::POD_KEYS);
    let node_annotations = [
        ANN_TOPOLOGY,
        cfg.utilization_annotation.as_str(),
        wasmsched_shared::hami::REGISTER_ANNOTATION,
        wasmsched_shared::hami::SCORE_ANNOTATION,
        wasmsched_shared::hami::CORDON_ANNOTATION,
    ];
    KeyInterests {
        pod_labels: KeySelector::None,
        pod_annotations: keys(&pod_keys),
        node_labels: keys(&[
            LABEL_COUNT,
            LABEL_MODEL,
            LABEL_MEMORY,
            GFD_COUNT,
            GFD_PRODUCT,
            GFD_MEMORY,
        ]),
        node_annotations: keys(&node_annotations),
    }
}

export_plugin!(GpuTopology: filter, score, post_filter, reserve, pre_bind, device_rank, interests, metric_interests);

#[cfg(test)]
mod tests;
