//! One live instance of a plugin: its store, limits and resident state.

use std::collections::HashMap;
use std::time::Duration;

use crate::framework::RankInput;

use wasmtime::Store;
use wasmtime_wasi::WasiCtxBuilder;

use super::bindings::types as wit;
use super::convert::Batch;
use super::engine::{engine, ticks};
use super::error::{FailureKind, PluginFailure};
use super::exports::{Funcs, Minor};
use super::interests::{Interests, KeySelector};
use super::module::PluginModule;
use super::output::{GuestOutput, PluginLog};
use super::state::HostState;

/// Limits of one plugin's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deadline of each per-pod call (cycle-start, filter, score, normalize).
    pub call_timeout: Duration,
    /// Deadline of `init` and of a full state sync.
    pub init_timeout: Duration,
    /// Cap on the instance's linear memory, bytes.
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_millis(250),
            init_timeout: Duration::from_secs(10),
            memory: 128 << 20,
        }
    }
}

/// A live instance with the exports it has.
pub struct Instance {
    store: Store<HostState>,
    funcs: Funcs,
    limits: Limits,
    /// Snapshot generation this instance has applied.
    pub applied: u64,
    /// It has received the whole cluster once.
    pub synced: bool,
    /// The cycle whose pod this instance holds, and the plugin's plan for it.
    pub cycle: Option<(u64, wit::CyclePlan)>,
    /// Which label and annotation keys the plugin reads.
    pub interests: Interests,
    /// `node-device-rank`: by node, the key of the devices the plugin
    /// keeps (the last ones it was sent for the node).
    kept_devices: HashMap<u32, Vec<u64>>,
    /// The device sets of the last ranking call, reused by the next (no
    /// allocation per set and call once the lists have grown).
    rank_sets: Vec<wit::DeviceSet>,
}

impl Instance {
    /// Instantiates the module and runs `init(args)`. An `Err(Ok(msg))`
    /// is the plugin rejecting its args.
    pub fn new(
        name: &str,
        module: &PluginModule,
        limits: Limits,
        args: &str,
    ) -> Result<Self, PluginFailure> {
        let log = PluginLog::of(name);
        let mut wasi = WasiCtxBuilder::new();
        // No preopens, sockets or environment. Output goes to the plugin's
        // rate-limited log, never to our stdout, which carries
        // `simulate`'s results.
        wasi.stdout(GuestOutput(log.clone()))
            .stderr(GuestOutput(log.clone()));
        let state = HostState::new(wasi.build(), limits.memory, log);
        let mut store = Store::new(engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(ticks(limits.init_timeout));
        let wrap = |store: &Store<HostState>, e: wasmtime::Error| {
            PluginFailure::from_wasmtime(&e, store.data().limiter.hit, limits.init_timeout)
        };
        let instance = match module.pre.instantiate(&mut store) {
            Ok(i) => i,
            Err(e) => return Err(wrap(&store, e)),
        };
        let funcs = match module.indices.load(&mut store, &instance) {
            Ok(f) => f,
            Err(e) => return Err(wrap(&store, e)),
        };
        let mut inst = Self {
            store,
            funcs,
            limits,
            applied: 0,
            synced: false,
            cycle: None,
            interests: Interests::default(),
            kept_devices: HashMap::new(),
            rank_sets: Vec::new(),
        };
        let version = inst.call(limits.init_timeout, |s, i| i.lifecycle.contract_version(s))?;
        if super::module::minor_of(&version) != Some(module.indices.minor) {
            return Err(PluginFailure::new(
                FailureKind::BadResult,
                format!(
                    "plugin says it implements contract {version}, but its exports are of another version (this host implements {})",
                    super::module::CONTRACT_VERSION
                ),
            ));
        }
        inst.call(limits.init_timeout, |s, i| i.lifecycle.init(s, args))?
            .map_err(|m| {
                PluginFailure::new(FailureKind::Plugin, format!("rejected its args: {m}"))
            })?;
        inst.interests = inst.key_interests()?;
        Ok(inst)
    }

    /// Bytes of linear memory the instance has now.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limiter.memory
    }

    /// Runs one guest call under the deadline, classifying failures.
    fn call<R>(
        &mut self,
        deadline: Duration,
        f: impl FnOnce(&mut Store<HostState>, &Funcs) -> wasmtime::Result<R>,
    ) -> Result<R, PluginFailure> {
        let Self { store, funcs, .. } = self;
        store.data_mut().limiter.hit = false;
        store.set_epoch_deadline(ticks(deadline));
        let result = f(store, funcs);
        result.map_err(|e| PluginFailure::from_wasmtime(&e, store.data().limiter.hit, deadline))
    }

    /// `lifecycle.apply` with `deltas`, under the init deadline when
    /// `full` (the whole cluster), else the call deadline.
    pub fn apply(&mut self, deltas: &[wit::Delta], full: bool) -> Result<(), PluginFailure> {
        self.apply_batches(&[Batch::Apply(deltas.to_vec())], full)
    }

    /// Brings the instance forward by `batches` (`convert::deltas`), each
    /// call under the init deadline when `full` (the whole cluster), else
    /// the call deadline.
    pub(crate) fn apply_batches(
        &mut self,
        batches: &[Batch],
        full: bool,
    ) -> Result<(), PluginFailure> {
        let deadline = if full {
            self.limits.init_timeout
        } else {
            self.limits.call_timeout
        };
        for batch in batches {
            match batch {
                Batch::Apply(deltas) if deltas.is_empty() => {}
                Batch::Apply(deltas) => self.call(deadline, |s, i| i.lifecycle.apply(s, deltas))?,
                Batch::Metrics(nodes) => self.call(deadline, |s, i| match &i.metric_interests {
                    Some(f) => f.set_metrics(s, nodes),
                    None => Ok(()),
                })?,
                Batch::Values(nodes, values) => {
                    self.call(deadline, |s, i| match &i.metric_interests {
                        Some(f) => f.set_metric_values(s, nodes, values),
                        None => Ok(()),
                    })?
                }
            }
        }
        Ok(())
    }

    pub fn cycle_start(
        &mut self,
        pod: &wit::Pod,
    ) -> Result<Result<wit::CyclePlan, String>, PluginFailure> {
        let t = self.limits.call_timeout;
        self.call(t, |s, i| i.lifecycle.cycle_start(s, pod))
    }

    pub fn filter(&mut self, nodes: &[u32]) -> Result<Vec<Option<wit::Rejection>>, PluginFailure> {
        let t = self.limits.call_timeout;
        let out = self.call(t, |s, i| match &i.filter {
            Some(f) => f.filter(s, nodes),
            None => Ok(vec![None; nodes.len()]),
        })?;
        check_len("filter", "verdicts", out, nodes.len())
    }

    pub fn score(&mut self, nodes: &[u32]) -> Result<Vec<i64>, PluginFailure> {
        let t = self.limits.call_timeout;
        let out = self
            .call(t, |s, i| match &i.score {
                Some(f) => f.score(s, nodes),
                None => Ok(Ok(vec![0; nodes.len()])),
            })?
            .map_err(|m| PluginFailure::new(FailureKind::Plugin, m))?;
        check_len("score", "scores", out, nodes.len())
    }

    /// NormalizeScore, when exported; `None` when not.
    pub fn normalize(
        &mut self,
        nodes: &[u32],
        scores: &[i64],
    ) -> Result<Option<Vec<i64>>, PluginFailure> {
        if self.funcs.normalize.is_none() {
            return Ok(None);
        }
        let t = self.limits.call_timeout;
        let out = self
            .call(t, |s, i| match &i.normalize {
                Some(f) => f.normalize(s, nodes, scores),
                None => Ok(Ok(scores.to_vec())),
            })?
            .map_err(|m| PluginFailure::new(FailureKind::Plugin, m))?;
        check_len("normalize-score", "scores", out, nodes.len()).map(Some)
    }

    pub fn deletion_cost(
        &mut self,
        pod: &wit::PodStatus,
        metrics: &[(String, f64)],
    ) -> Result<Option<i32>, PluginFailure> {
        let t = self.limits.call_timeout;
        self.call(t, |s, i| match &i.deletion_cost {
            Some(f) => f.deletion_cost(s, pod, metrics),
            None => Ok(Ok(None)),
        })?
        .map_err(|m| PluginFailure::new(FailureKind::Plugin, m))
    }

    /// The plugin's key interests (every key when it does not say) and
    /// metric interests (`None` when it does not export them).
    fn key_interests(&mut self) -> Result<Interests, PluginFailure> {
        let t = self.limits.init_timeout;
        let declared = self.call(t, |s, i| match &i.interests {
            Some(f) => f.interests(s).map(Some),
            None => Ok(None),
        })?;
        let metrics = self.call(t, |s, i| match &i.metric_interests {
            Some(f) => f.metric_interests(s).map(Some),
            None => Ok(None),
        })?;
        let mut interests = declared.map(Interests::from).unwrap_or_default();
        interests.metrics = metrics.map(KeySelector::from_names);
        Ok(interests)
    }

    /// PostFilter advice on the candidates (`None` when not exported).
    pub fn post_filter(
        &mut self,
        candidates: &[wit::Candidate],
    ) -> Result<Option<wit::PreemptionAdvice>, PluginFailure> {
        let t = self.limits.call_timeout;
        let out = self.call(t, |s, i| match &i.post_filter {
            Some(f) => f.post_filter(s, candidates).map(Some),
            None => Ok(None),
        })?;
        match out {
            Some(r) => r
                .map(Some)
                .map_err(|m| PluginFailure::new(FailureKind::Plugin, m)),
            None => Ok(None),
        }
    }

    /// Reserve, then the PreBind output, for the cycle's pod on `node`.
    pub fn reserve(&mut self, node: u32) -> Result<Result<wit::PodPatch, String>, PluginFailure> {
        let t = self.limits.call_timeout;
        let reserved = self.call(t, |s, i| match &i.reserve {
            Some(f) => f.reserve(s, node),
            None => Ok(Ok(())),
        })?;
        if let Err(reason) = reserved {
            return Ok(Err(reason));
        }
        self.call(t, |s, i| match &i.pre_bind {
            Some(f) => f.pre_bind(s, node),
            None => Ok(Ok(wit::PodPatch {
                labels: Vec::new(),
                annotations: Vec::new(),
            })),
        })
    }

    pub fn unreserve(&mut self, pod_uid: &str, node: u32) -> Result<(), PluginFailure> {
        let t = self.limits.call_timeout;
        self.call(t, |s, i| match &i.reserve {
            Some(f) => f.unreserve(s, pod_uid, node),
            None => Ok(()),
        })
    }

    /// Device ranks for the cycle's pod's candidate sets on `node` (empty
    /// when not exported: abstain). Through `node-device-rank` (0.5) the
    /// node's devices are sent only when this instance does not keep
    /// them already: the last ones it was sent for the node, known by
    /// `input.devices_key`.
    pub fn rank_devices(&mut self, node: u32, input: &RankInput) -> Result<Vec<u8>, PluginFailure> {
        let t = self.limits.call_timeout;
        let mut sets = std::mem::take(&mut self.rank_sets);
        sets.truncate(input.sets.len());
        sets.resize_with(input.sets.len(), || wit::DeviceSet {
            devices: Vec::new(),
            requests: Vec::new(),
        });
        for (w, s) in sets.iter_mut().zip(&input.sets) {
            w.devices.clear();
            w.devices.extend_from_slice(&s.devices);
            w.requests.clear();
            w.requests.extend_from_slice(&s.requests);
        }
        let out = if self.funcs.node_device_rank.is_some() {
            let send = input.devices_key.is_none()
                || self.kept_devices.get(&node) != input.devices_key.as_ref();
            let devices = send.then(|| wit_devices(input));
            let out = self.call(t, |s, i| match &i.node_device_rank {
                Some(f) => f.rank_node_devices(
                    s,
                    node,
                    devices.as_deref(),
                    &input.allocated,
                    &input.requests,
                    &sets,
                ),
                None => Ok(Vec::new()),
            });
            match (&out, &input.devices_key) {
                // Sent and kept: known by their key from now on.
                (Ok(_), Some(key)) if send => {
                    self.kept_devices.insert(node, key.clone());
                }
                // Kept as before.
                (Ok(_), _) if !send => {}
                // Sent without a key (only the sets' devices), or a failure
                // (the plugin may or may not have kept what was sent): sent
                // again next time.
                _ => {
                    self.kept_devices.remove(&node);
                }
            }
            out
        } else {
            let devices = wit_devices(input);
            self.call(t, |s, i| match &i.device_rank {
                Some(f) => f.rank_devices(s, node, &devices, &input.requests, &sets),
                None => Ok(Vec::new()),
            })
        };
        self.rank_sets = sets;
        out
    }

    pub fn permit(&mut self, node: u32) -> Result<wit::PermitResult, PluginFailure> {
        let t = self.limits.call_timeout;
        self.call(t, |s, i| match &i.permit {
            Some(f) => f.permit(s, node),
            None => Ok(wit::PermitResult {
                decision: wit::PermitDecision::Allow,
                allow_waiting: Vec::new(),
            }),
        })
    }
}

/// The contract's records of a ranking's devices.
fn wit_devices(input: &RankInput) -> Vec<wit::Device> {
    input
        .devices
        .iter()
        .zip(&input.allocated)
        .map(|(d, &allocated)| wit::Device {
            driver: d.driver.clone(),
            pool: d.pool.clone(),
            name: d.name.clone(),
            attributes: d.attributes.clone(),
            capacity: d.capacity.clone(),
            allocated,
        })
        .collect()
}

/// A batch call must answer once per node it was given.
fn check_len<T>(
    call: &str,
    unit: &str,
    out: Vec<T>,
    nodes: usize,
) -> Result<Vec<T>, PluginFailure> {
    if out.len() != nodes {
        return Err(PluginFailure::new(
            FailureKind::BadResult,
            format!("{call} returned {} {unit} for {nodes} nodes", out.len()),
        ));
    }
    Ok(out)
}

/// The contract minor of this instance's component.
impl Instance {
    pub fn minor(&self) -> Minor {
        match self.funcs.lifecycle {
            super::exports::Lifecycle::V0_1(_) => Minor::V0_1,
            super::exports::Lifecycle::V0_2(_) => Minor::V0_2,
            super::exports::Lifecycle::V0_3(_) => Minor::V0_3,
            super::exports::Lifecycle::V0_4(_) => Minor::V0_4,
            super::exports::Lifecycle::Current(_) => Minor::Current,
        }
    }
}
