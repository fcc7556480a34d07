//! A component's exports, whichever minor version of the contract it was
//! built against: resolved once per module ([`Indices`]), loaded once per
//! instance ([`Funcs`]). Calls that exist in several versions are
//! forwarded to the version's generated bindings; the records are shared.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use super::bindings::{current, types as wit, v0_1, v0_2, v0_3, v0_4};
use super::state::HostState;

/// The contract minor a component was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Minor {
    V0_1,
    V0_2,
    V0_3,
    V0_4,
    Current,
}

/// The extension points a component exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exports {
    pub interests: bool,
    pub filter: bool,
    pub score: bool,
    pub normalize: bool,
    pub post_filter: bool,
    pub reserve: bool,
    pub permit: bool,
    pub pre_bind: bool,
    pub device_rank: bool,
    /// `node-device-rank` (0.5), preferred to `device-rank`.
    pub node_device_rank: bool,
    pub metric_interests: bool,
    pub deletion_cost: bool,
}

impl std::fmt::Display for Exports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [
            (true, "lifecycle"),
            (self.interests, "interests"),
            (self.filter, "filter"),
            (self.score, "score"),
            (self.normalize, "normalize-score"),
            (self.post_filter, "post-filter"),
            (self.reserve, "reserve"),
            (self.permit, "permit"),
            (self.pre_bind, "pre-bind"),
            (self.device_rank, "device-rank"),
            (self.node_device_rank, "node-device-rank"),
            (self.metric_interests, "metric-interests"),
            (self.deletion_cost, "deletion-cost"),
        ];
        let list: Vec<&str> = names.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        f.write_str(&list.join(", "))
    }
}

/// The generations of one interface's generated bindings, behind one
/// type: every minor that has the interface.
macro_rules! versioned {
    ($ty:ident, $ix:ident, $module:ident, [$($gen:ident => $bind:ident),*]) => {
        pub(crate) enum $ty {
            $($gen($bind::exports::wasmsched::plugin::$module::Guest),)*
        }

        #[derive(Clone)]
        pub(crate) enum $ix {
            $($gen($bind::exports::wasmsched::plugin::$module::GuestIndices),)*
        }

        impl $ix {
            #[allow(unreachable_patterns)]
            fn new(pre: &InstancePre<HostState>, minor: Minor) -> Option<Self> {
                match minor {
                    $(Minor::$gen => $bind::exports::wasmsched::plugin::$module::GuestIndices::new(pre)
                        .ok()
                        .map(Self::$gen),)*
                    _ => None,
                }
            }

            fn load(
                &self,
                store: &mut Store<HostState>,
                instance: &Instance,
            ) -> wasmtime::Result<$ty> {
                Ok(match self {
                    $(Self::$gen(i) => $ty::$gen(i.load(&mut *store, instance)?),)*
                })
            }
        }
    };
}

versioned!(Lifecycle, LifecycleIx, lifecycle, [V0_1 => v0_1, V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(Filter, FilterIx, filter, [V0_1 => v0_1, V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(Score, ScoreIx, score, [V0_1 => v0_1, V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(Normalize, NormalizeIx, normalize_score, [V0_1 => v0_1, V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(DeletionCost, DeletionCostIx, deletion_cost, [V0_1 => v0_1, V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(Interests, InterestsIx, interests, [V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(PostFilter, PostFilterIx, post_filter, [V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(Reserve, ReserveIx, reserve, [V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(Permit, PermitIx, permit, [V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(PreBind, PreBindIx, pre_bind, [V0_2 => v0_2, V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(DeviceRank, DeviceRankIx, device_rank, [V0_3 => v0_3, V0_4 => v0_4, Current => current]);
versioned!(MetricInterests, MetricInterestsIx, metric_interests, [V0_4 => v0_4, Current => current]);
versioned!(NodeDeviceRank, NodeDeviceRankIx, node_device_rank, [Current => current]);

/// Forwards a call to whichever generation `$self` holds.
macro_rules! forward {
    ($self:expr, $g:ident => $call:expr) => {
        match $self {
            Self::V0_1($g) => $call,
            Self::V0_2($g) => $call,
            Self::V0_3($g) => $call,
            Self::V0_4($g) => $call,
            Self::Current($g) => $call,
        }
    };
}

/// Forwards a call of an interface added in 0.2.
macro_rules! forward2 {
    ($self:expr, $g:ident => $call:expr) => {
        match $self {
            Self::V0_2($g) => $call,
            Self::V0_3($g) => $call,
            Self::V0_4($g) => $call,
            Self::Current($g) => $call,
        }
    };
}

impl Interests {
    pub fn interests(&self, s: &mut Store<HostState>) -> wasmtime::Result<wit::KeyInterests> {
        forward2!(self, g => g.call_interests(s))
    }
}

impl PostFilter {
    pub fn post_filter(
        &self,
        s: &mut Store<HostState>,
        candidates: &[wit::Candidate],
    ) -> wasmtime::Result<Result<wit::PreemptionAdvice, String>> {
        forward2!(self, g => g.call_post_filter(s, candidates))
    }
}

impl Reserve {
    pub fn reserve(
        &self,
        s: &mut Store<HostState>,
        node: u32,
    ) -> wasmtime::Result<Result<(), String>> {
        forward2!(self, g => g.call_reserve(s, node))
    }

    pub fn unreserve(
        &self,
        s: &mut Store<HostState>,
        pod_uid: &str,
        node: u32,
    ) -> wasmtime::Result<()> {
        forward2!(self, g => g.call_unreserve(s, pod_uid, node))
    }
}

impl Permit {
    pub fn permit(
        &self,
        s: &mut Store<HostState>,
        node: u32,
    ) -> wasmtime::Result<wit::PermitResult> {
        forward2!(self, g => g.call_permit(s, node))
    }
}

impl PreBind {
    pub fn pre_bind(
        &self,
        s: &mut Store<HostState>,
        node: u32,
    ) -> wasmtime::Result<Result<wit::PodPatch, String>> {
        forward2!(self, g => g.call_pre_bind(s, node))
    }
}

impl DeviceRank {
    pub fn rank_devices(
        &self,
        s: &mut Store<HostState>,
        node: u32,
        devices: &[wit::Device],
        requests: &[String],
        sets: &[wit::DeviceSet],
    ) -> wasmtime::Result<Vec<u8>> {
        match self {
            Self::V0_3(g) => g.call_rank_devices(s, node, devices, requests, sets),
            Self::V0_4(g) => g.call_rank_devices(s, node, devices, requests, sets),
            Self::Current(g) => g.call_rank_devices(s, node, devices, requests, sets),
        }
    }
}

impl NodeDeviceRank {
    pub fn rank_node_devices(
        &self,
        s: &mut Store<HostState>,
        node: u32,
        devices: Option<&[wit::Device]>,
        allocated: &[bool],
        requests: &[String],
        sets: &[wit::DeviceSet],
    ) -> wasmtime::Result<Vec<u8>> {
        match self {
            Self::Current(g) => {
                g.call_rank_node_devices(s, node, devices, allocated, requests, sets)
            }
        }
    }
}

impl MetricInterests {
    pub fn metric_interests(&self, s: &mut Store<HostState>) -> wasmtime::Result<Vec<String>> {
        match self {
            Self::V0_4(g) => g.call_metric_interests(s),
            Self::Current(g) => g.call_metric_interests(s),
        }
    }

    pub fn set_metrics(
        &self,
        s: &mut Store<HostState>,
        nodes: &[(u32, Vec<(String, f64)>)],
    ) -> wasmtime::Result<()> {
        match self {
            Self::V0_4(g) => g.call_set_metrics(s, nodes),
            Self::Current(g) => g.call_set_metrics(s, nodes),
        }
    }

    pub fn set_metric_values(
        &self,
        s: &mut Store<HostState>,
        nodes: &[(u32, u32)],
        values: &[f64],
    ) -> wasmtime::Result<()> {
        match self {
            Self::V0_4(g) => g.call_set_metric_values(s, nodes, values),
            Self::Current(g) => g.call_set_metric_values(s, nodes, values),
        }
    }
}

impl Lifecycle {
    pub fn contract_version(&self, s: &mut Store<HostState>) -> wasmtime::Result<String> {
        forward!(self, g => g.call_contract_version(s))
    }

    pub fn init(
        &self,
        s: &mut Store<HostState>,
        args: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        forward!(self, g => g.call_init(s, args))
    }

    pub fn apply(&self, s: &mut Store<HostState>, deltas: &[wit::Delta]) -> wasmtime::Result<()> {
        forward!(self, g => g.call_apply(s, deltas))
    }

    pub fn cycle_start(
        &self,
        s: &mut Store<HostState>,
        pod: &wit::Pod,
    ) -> wasmtime::Result<Result<wit::CyclePlan, String>> {
        forward!(self, g => g.call_cycle_start(s, pod))
    }
}

impl Filter {
    pub fn filter(
        &self,
        s: &mut Store<HostState>,
        nodes: &[u32],
    ) -> wasmtime::Result<Vec<Option<wit::Rejection>>> {
        forward!(self, g => g.call_filter(s, nodes))
    }
}

impl Score {
    pub fn score(
        &self,
        s: &mut Store<HostState>,
        nodes: &[u32],
    ) -> wasmtime::Result<Result<Vec<i64>, String>> {
        forward!(self, g => g.call_score(s, nodes))
    }
}

impl Normalize {
    pub fn normalize(
        &self,
        s: &mut Store<HostState>,
        nodes: &[u32],
        scores: &[i64],
    ) -> wasmtime::Result<Result<Vec<i64>, String>> {
        forward!(self, g => g.call_normalize_score(s, nodes, scores))
    }
}

impl DeletionCost {
    pub fn deletion_cost(
        &self,
        s: &mut Store<HostState>,
        pod: &wit::PodStatus,
        metrics: &[(String, f64)],
    ) -> wasmtime::Result<Result<Option<i32>, String>> {
        forward!(self, g => g.call_deletion_cost(s, pod, metrics))
    }
}

/// Lookup indices of each exported interface, resolved once per module.
#[derive(Clone)]
pub(crate) struct Indices {
    pub minor: Minor,
    lifecycle: LifecycleIx,
    interests: Option<InterestsIx>,
    filter: Option<FilterIx>,
    score: Option<ScoreIx>,
    normalize: Option<NormalizeIx>,
    post_filter: Option<PostFilterIx>,
    reserve: Option<ReserveIx>,
    permit: Option<PermitIx>,
    pre_bind: Option<PreBindIx>,
    device_rank: Option<DeviceRankIx>,
    node_device_rank: Option<NodeDeviceRankIx>,
    metric_interests: Option<MetricInterestsIx>,
    deletion_cost: Option<DeletionCostIx>,
}

/// The typed exports of one instance.
pub(crate) struct Funcs {
    pub lifecycle: Lifecycle,
    pub interests: Option<Interests>,
    pub filter: Option<Filter>,
    pub score: Option<Score>,
    pub normalize: Option<Normalize>,
    pub post_filter: Option<PostFilter>,
    pub reserve: Option<Reserve>,
    pub permit: Option<Permit>,
    pub pre_bind: Option<PreBind>,
    pub device_rank: Option<DeviceRank>,
    pub node_device_rank: Option<NodeDeviceRank>,
    pub metric_interests: Option<MetricInterests>,
    pub deletion_cost: Option<DeletionCost>,
}

impl Indices {
    /// The interfaces a pre-instantiated component of `minor` exports;
    /// `None` when it lacks `lifecycle`.
    pub fn new(pre: &InstancePre<HostState>, minor: Minor) -> Option<Self> {
        Some(Self {
            minor,
            lifecycle: LifecycleIx::new(pre, minor)?,
            interests: InterestsIx::new(pre, minor),
            filter: FilterIx::new(pre, minor),
            score: ScoreIx::new(pre, minor),
            normalize: NormalizeIx::new(pre, minor),
            post_filter: PostFilterIx::new(pre, minor),
            reserve: ReserveIx::new(pre, minor),
            permit: PermitIx::new(pre, minor),
            pre_bind: PreBindIx::new(pre, minor),
            device_rank: DeviceRankIx::new(pre, minor),
            node_device_rank: NodeDeviceRankIx::new(pre, minor),
            metric_interests: MetricInterestsIx::new(pre, minor),
            deletion_cost: DeletionCostIx::new(pre, minor),
        })
    }

    pub fn exports(&self) -> Exports {
        Exports {
            interests: self.interests.is_some(),
            filter: self.filter.is_some(),
            score: self.score.is_some(),
            normalize: self.normalize.is_some(),
            post_filter: self.post_filter.is_some(),
            reserve: self.reserve.is_some(),
            permit: self.permit.is_some(),
            pre_bind: self.pre_bind.is_some(),
            device_rank: self.device_rank.is_some(),
            node_device_rank: self.node_device_rank.is_some(),
            metric_interests: self.metric_interests.is_some(),
            deletion_cost: self.deletion_cost.is_some(),
        }
    }

    /// The typed functions of a fresh instance.
    pub fn load(
        &self,
        store: &mut Store<HostState>,
        instance: &Instance,
    ) -> wasmtime::Result<Funcs> {
        let s = store;
        Ok(Funcs {
            lifecycle: self.lifecycle.load(s, instance)?,
            interests: self
                .interests
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            filter: self
                .filter
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            score: self
                .score
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            normalize: self
                .normalize
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            post_filter: self
                .post_filter
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            reserve: self
                .reserve
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            permit: self
                .permit
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            pre_bind: self
                .pre_bind
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            device_rank: self
                .device_rank
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            node_device_rank: self
                .node_device_rank
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            metric_interests: self
                .metric_interests
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
            deletion_cost: self
                .deletion_cost
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
        })
    }
}
