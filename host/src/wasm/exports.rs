//! A component's exports, whichever minor version of the contract it was
//! built against: resolved once per module ([`Indices`]), loaded once per
//! instance ([`Funcs`]). Calls that exist in several versions are
//! forwarded to the version's generated bindings; the records are shared.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use super::bindings::{current, types as wit, v0_1};
use super::state::HostState;

/// The contract minor a component was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Minor {
    V0_1,
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
            (self.deletion_cost, "deletion-cost"),
        ];
        let list: Vec<&str> = names.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        f.write_str(&list.join(", "))
    }
}

/// Two generations of one interface's generated bindings, behind one type.
macro_rules! versioned {
    ($ty:ident, $ix:ident, $module:ident) => {
        pub(crate) enum $ty {
            V0_1(v0_1::exports::wasmsched::plugin::$module::Guest),
            Current(current::exports::wasmsched::plugin::$module::Guest),
        }

        #[derive(Clone)]
        pub(crate) enum $ix {
            V0_1(v0_1::exports::wasmsched::plugin::$module::GuestIndices),
            Current(current::exports::wasmsched::plugin::$module::GuestIndices),
        }

        impl $ix {
            fn new(pre: &InstancePre<HostState>, minor: Minor) -> Option<Self> {
                match minor {
                    Minor::V0_1 => {
                        v0_1::exports::wasmsched::plugin::$module::GuestIndices::new(pre)
                            .ok()
                            .map(Self::V0_1)
                    }
                    Minor::Current => {
                        current::exports::wasmsched::plugin::$module::GuestIndices::new(pre)
                            .ok()
                            .map(Self::Current)
                    }
                }
            }

            fn load(
                &self,
                store: &mut Store<HostState>,
                instance: &Instance,
            ) -> wasmtime::Result<$ty> {
                Ok(match self {
                    Self::V0_1(i) => $ty::V0_1(i.load(store, instance)?),
                    Self::Current(i) => $ty::Current(i.load(store, instance)?),
                })
            }
        }
    };
}

versioned!(Lifecycle, LifecycleIx, lifecycle);
versioned!(Filter, FilterIx, filter);
versioned!(Score, ScoreIx, score);
versioned!(Normalize, NormalizeIx, normalize_score);
versioned!(DeletionCost, DeletionCostIx, deletion_cost);

/// Forwards a call to whichever generation `$self` holds.
macro_rules! forward {
    ($self:expr, $g:ident => $call:expr) => {
        match $self {
            Self::V0_1($g) => $call,
            Self::Current($g) => $call,
        }
    };
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

use current::exports::wasmsched::plugin as now;

/// Lookup indices of each exported interface, resolved once per module.
#[derive(Clone)]
pub(crate) struct Indices {
    pub minor: Minor,
    lifecycle: LifecycleIx,
    interests: Option<now::interests::GuestIndices>,
    filter: Option<FilterIx>,
    score: Option<ScoreIx>,
    normalize: Option<NormalizeIx>,
    post_filter: Option<now::post_filter::GuestIndices>,
    reserve: Option<now::reserve::GuestIndices>,
    permit: Option<now::permit::GuestIndices>,
    pre_bind: Option<now::pre_bind::GuestIndices>,
    deletion_cost: Option<DeletionCostIx>,
}

/// The typed exports of one instance.
pub(crate) struct Funcs {
    pub lifecycle: Lifecycle,
    pub interests: Option<now::interests::Guest>,
    pub filter: Option<Filter>,
    pub score: Option<Score>,
    pub normalize: Option<Normalize>,
    pub post_filter: Option<now::post_filter::Guest>,
    pub reserve: Option<now::reserve::Guest>,
    pub permit: Option<now::permit::Guest>,
    pub pre_bind: Option<now::pre_bind::Guest>,
    pub deletion_cost: Option<DeletionCost>,
}

/// Only a current-minor component can have this interface.
fn newer<T>(minor: Minor, f: impl FnOnce() -> wasmtime::Result<T>) -> Option<T> {
    match minor {
        Minor::Current => f().ok(),
        Minor::V0_1 => None,
    }
}

impl Indices {
    /// The interfaces a pre-instantiated component of `minor` exports;
    /// `None` when it lacks `lifecycle`.
    pub fn new(pre: &InstancePre<HostState>, minor: Minor) -> Option<Self> {
        Some(Self {
            minor,
            lifecycle: LifecycleIx::new(pre, minor)?,
            interests: newer(minor, || now::interests::GuestIndices::new(pre)),
            filter: FilterIx::new(pre, minor),
            score: ScoreIx::new(pre, minor),
            normalize: NormalizeIx::new(pre, minor),
            post_filter: newer(minor, || now::post_filter::GuestIndices::new(pre)),
            reserve: newer(minor, || now::reserve::GuestIndices::new(pre)),
            permit: newer(minor, || now::permit::GuestIndices::new(pre)),
            pre_bind: newer(minor, || now::pre_bind::GuestIndices::new(pre)),
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
                .map(|i| i.load(&mut *s, instance))
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
                .map(|i| i.load(&mut *s, instance))
                .transpose()?,
            reserve: self
                .reserve
                .as_ref()
                .map(|i| i.load(&mut *s, instance))
                .transpose()?,
            permit: self
                .permit
                .as_ref()
                .map(|i| i.load(&mut *s, instance))
                .transpose()?,
            pre_bind: self
                .pre_bind
                .as_ref()
                .map(|i| i.load(&mut *s, instance))
                .transpose()?,
            deletion_cost: self
                .deletion_cost
                .as_ref()
                .map(|i| i.load(s, instance))
                .transpose()?,
        })
    }
}
