//! The Rust SDK for wasmsched scheduling plugins.
//!
//! A plugin is a type implementing [`Plugin`] plus one macro call:
//!
//! ```ignore
//! use wasmsched_plugin_sdk::{export_plugin, Cluster, NodeState, Plugin, Rejection, types::Pod};
//!
//! struct PreferSpot;
//! impl Plugin for PreferSpot {
//!     type Cycle = ();
//!     fn init(_args: &str) -> Result<Self, String> { Ok(PreferSpot) }
//!     fn cycle_start(&self, _pod: &Pod, _cluster: &Cluster) -> Result<(), String> { Ok(()) }
//!     fn score(&self, _c: &(), _pod: &Pod, node: &NodeState, _cl: &Cluster) -> Result<i64, String> {
//!         Ok(if node.node.labels.iter().any(|(k, v)| k == "capacity" && v == "spot") { 100 } else { 0 })
//!     }
//! }
//! export_plugin!(PreferSpot: score);
//! ```
//!
//! The SDK keeps the cluster state the host streams to the instance
//! ([`Cluster`]), the current cycle's pod and the plugin's per-cycle data,
//! so `filter` and `score` see whole nodes while the host passes only node
//! indices across the boundary.
//!
//! Helpers for what policies read:
//! - [`PodExt`] / [`NodeExt`]: labels, annotations, requests, allocatable,
//!   metrics, zone and region;
//! - [`quantity`]: Kubernetes quantities (`40Gi`, `500m`), read exactly as
//!   the scheduler reads requests;
//! - [`selector`]: label selectors in `kubectl -l` syntax
//!   (`app=db,tier in (a,b)`), matched against labels;
//! - [`gpu`] and [`topology`]: a node's GPUs (origin and GPU Feature
//!   Discovery labels, NVLink domains) and where it is (zone, region);
//! - [`args`]: typed `pluginConfig` args with errors that name the field.

pub mod args;
mod bindings;
pub mod cluster;
pub mod gpu;
pub mod runtime;
pub mod topology;
pub mod view;

include!(concat!(env!("OUT_DIR"), "/contract.rs"));

pub use cluster::{Cluster, NodeState};
pub use selector::{LabelLookup, Selector};
pub use view::{NodeExt, PodExt};
pub use wasmsched_shared::{hami, locality, quantity, selector};

/// The contract's records (`pod`, `node`, `delta`, `rejection`, ...).
pub use bindings::wasmsched::plugin::types;
pub use types::Rejection;

/// A node's devices as the SDK keeps them for device ranking
/// ([`Plugin::rank_kept_devices`]).
#[derive(Clone, Copy)]
pub struct KeptDevices<'a> {
    /// The devices, with their allocated flags of this call.
    pub devices: &'a [types::Device],
    /// Changes whenever the devices (not their flags) may have changed.
    pub serial: u64,
}

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

#[doc(hidden)]
pub use bindings::wasmsched::plugin::host as __host;

/// Writes to the scheduler's log, attributed to this plugin. Outside wasm
/// (native unit tests) it prints to stderr.
pub fn log(level: types::LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    bindings::wasmsched::plugin::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

/// A rejection the scheduler may resolve by changing the node (for
/// example, by freeing resources).
pub fn reject(reason: impl Into<String>) -> Rejection {
    Rejection {
        reason: reason.into(),
        unresolvable: false,
    }
}

/// Permit's plain "allow".
pub fn allow() -> types::PermitResult {
    types::PermitResult {
        decision: types::PermitDecision::Allow,
        allow_waiting: Vec::new(),
    }
}

/// A rejection no change on the node can resolve (wrong model, label).
pub fn reject_unresolvable(reason: impl Into<String>) -> Rejection {
    Rejection {
        reason: reason.into(),
        unresolvable: true,
    }
}

/// A scheduling policy. Implement the extension points you export; the
/// defaults are never called for extension points you do not export.
pub trait Plugin: Sized + 'static {
    /// What `cycle_start` precomputes for one pod (its CycleState).
    type Cycle: 'static;

    /// Parses the plugin's `pluginConfig` args (JSON text).
    fn init(args: &str) -> Result<Self, String>;

    /// PreFilter/PreScore for `pod`. An error makes the pod unschedulable
    /// with that message.
    fn cycle_start(&self, pod: &types::Pod, cluster: &Cluster) -> Result<Self::Cycle, String>;

    /// Sees each cluster change before it is applied to [`Cluster`], so a
    /// plugin can keep an index of its own (for example, of the placed pods
    /// that carry an annotation it cares about) instead of scanning every
    /// pod in each cycle. The default ignores changes.
    fn observe(&self, _delta: &types::Delta, _cluster: &Cluster) {}

    /// Which extension points matter for this cycle's pod; the default is
    /// all of them. Return `filter: false` when Filter would pass every
    /// node and `score: false` when Score would not tell nodes apart: the
    /// host then does not call them for this pod (upstream's Skip).
    fn plan(&self, _cycle: &Self::Cycle, _pod: &types::Pod) -> types::CyclePlan {
        types::CyclePlan {
            filter: true,
            score: true,
        }
    }

    /// Filter: `Err` when `pod` does not fit `node`.
    fn filter(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<(), Rejection> {
        Ok(())
    }

    /// Score of `pod` on a feasible `node`.
    fn score(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<i64, String> {
        Ok(0)
    }

    /// NormalizeScore over all scored nodes; the default keeps scores.
    fn normalize(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _nodes: &[u32],
        _scores: &mut [i64],
    ) -> Result<(), String> {
        Ok(())
    }

    /// PostFilter advice on preemption: `candidates` are the nodes where
    /// evicting their victims lets the cycle's pod fit, in the order the
    /// host would choose them (the first wins). Veto victims (by uid) to
    /// drop every candidate evicting them; rank candidates (positions into
    /// `candidates`, best first). The default has no opinion.
    fn post_filter(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _candidates: &[types::Candidate],
        _cluster: &Cluster,
    ) -> Result<types::PreemptionAdvice, String> {
        Ok(types::PreemptionAdvice {
            vetoed: Vec::new(),
            ranking: Vec::new(),
        })
    }

    /// Which label and annotation keys the plugin reads (contract 0.2
    /// `interests`, exported with `interests` in [`export_plugin!`]); the
    /// host then sends only those. The default reads every key.
    fn interests(&self) -> types::KeyInterests {
        types::KeyInterests {
            pod_labels: types::KeySelector::All,
            pod_annotations: types::KeySelector::All,
            node_labels: types::KeySelector::All,
            node_annotations: types::KeySelector::All,
        }
    }

    /// Reserve: claim what the cycle's pod will use on `node`, before the
    /// pod is assumed (called on the instance that ran its `cycle_start`,
    /// before PreBind). An error fails the cycle; the pod is retried after
    /// backoff.
    fn reserve(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<(), String> {
        Ok(())
    }

    /// Unreserve: the reservation of pod `pod_uid` on `node` (`None` when
    /// the node is gone) is undone: Permit rejected it or timed out, a
    /// later Reserve failed, or its binding failed. Possibly long after
    /// its cycle, with no cycle started for it (the pod's removal also
    /// arrives as a `pod-remove` delta).
    fn unreserve(&self, _pod_uid: &str, _node: Option<&NodeState>, _cluster: &Cluster) {}

    /// Permit, after Reserve: allow the cycle's pod, hold it (`wait`, at
    /// most that many milliseconds; it is then rejected and unreserved),
    /// or reject it; and the waiting pods (by uid) this plugin now allows.
    fn permit(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _node: &NodeState,
        _cluster: &Cluster,
    ) -> types::PermitResult {
        allow()
    }

    /// PreBind output: labels and annotations to write on the pod before
    /// it is bound, right after [`Plugin::reserve`] in the same cycle. The
    /// host merges them into the pod at once, so later deltas show them.
    fn pre_bind(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<types::PodPatch, String> {
        Ok(types::PodPatch {
            labels: Vec::new(),
            annotations: Vec::new(),
        })
    }

    /// Device ranking (exported with `device_rank` in [`export_plugin!`]
    /// as contract 0.5's `node-device-rank`: the SDK keeps each node's
    /// devices, so the host sends them only when they change): one rank
    /// (0..=100, higher is better) per candidate set of devices for the
    /// cycle's pod's ResourceClaims on `node`; `devices` are the node's
    /// devices and `requests` the `<claim>/<request>` names (sets hold
    /// positions into both). An empty answer abstains (the default): the
    /// host then allocates the first fit, as kube-scheduler does.
    #[allow(clippy::too_many_arguments)]
    fn rank_devices(
        &self,
        _cycle: &Self::Cycle,
        _pod: &types::Pod,
        _node: &NodeState,
        _devices: &[types::Device],
        _requests: &[String],
        _sets: &[types::DeviceSet],
        _cluster: &Cluster,
    ) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }

    /// [`Plugin::rank_devices`] with the node's devices as the SDK keeps
    /// them (contract 0.5): `kept.serial` changes whenever the host sends
    /// the node's devices again (their allocated flags excepted), so what
    /// a plugin derives from the devices alone can be kept per node and
    /// serial instead of being derived on every call. The default ranks
    /// through [`Plugin::rank_devices`].
    #[allow(clippy::too_many_arguments)]
    fn rank_kept_devices(
        &self,
        cycle: &Self::Cycle,
        pod: &types::Pod,
        node: &NodeState,
        kept: KeptDevices<'_>,
        requests: &[String],
        sets: &[types::DeviceSet],
        cluster: &Cluster,
    ) -> Result<Vec<u8>, String> {
        self.rank_devices(cycle, pod, node, kept.devices, requests, sets, cluster)
    }

    /// The node metrics the plugin reads (contract 0.4 `metric-interests`,
    /// exported with `metric_interests` in [`export_plugin!`]): names, a
    /// trailing `*` for every name with that prefix. The host then sends
    /// only these, and a change of a node's metrics alone (a pass of the
    /// node-metrics source) arrives through [`Plugin::metrics_changed`]
    /// instead of as a whole node. The default reads none.
    fn metric_interests(&self) -> Vec<String> {
        Vec::new()
    }

    /// A node's metrics changed and nothing else; `node.node.metrics`
    /// already holds the new values (those of [`Plugin::metric_interests`]).
    /// For a plugin that keeps what it derives from a node (the default
    /// keeps nothing).
    fn metrics_changed(&self, _node: &NodeState, _cluster: &Cluster) {}

    /// The pod-deletion-cost for a pod, or `None` for no opinion.
    fn deletion_cost(
        &self,
        _pod: &types::PodStatus,
        _metrics: &[(String, f64)],
    ) -> Result<Option<i32>, String> {
        Ok(None)
    }
}

/// Exports a [`Plugin`] as a component. Name the extension points it
/// implements; the component then exports exactly those:
/// `export_plugin!(T: filter)`, `export_plugin!(T: score)`,
/// `export_plugin!(T: filter, score)` (also exports NormalizeScore, which
/// calls [`Plugin::normalize`]), `export_plugin!(T: filter, score, interests)`
/// (adds key interests: [`Plugin::interests`]), `export_plugin!(T: deletion_cost)`,
/// `export_plugin!(T: filter, score, reserve, pre_bind, interests)` (adds
/// Reserve, PreBind output and key interests: [`Plugin::reserve`],
/// [`Plugin::pre_bind`], [`Plugin::interests`]), `export_plugin!(T: reserve, permit)`
/// (Reserve with Unreserve, and Permit: gang and quota policies),
/// `export_plugin!(T: filter, score, post_filter)` (also preemption advice,
/// [`Plugin::post_filter`]), `export_plugin!(T: filter, score, post_filter,
/// reserve, pre_bind, interests)`, and the same with `device_rank` before
/// `interests` (adds device ranking for Dynamic Resource Allocation,
/// [`Plugin::rank_devices`]). Appending `metric_interests` to
/// `filter, score, interests` or to that last set declares the node
/// metrics read ([`Plugin::metric_interests`], contract 0.4): the
/// NetworkLocality and GpuTopology built-ins' sets.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty: filter) => {
        $crate::__export_world!($plugin, "filter-plugin", [filter]);
    };
    ($plugin:ty: score) => {
        $crate::__export_world!($plugin, "score-plugin", [score]);
    };
    ($plugin:ty: filter, score) => {
        $crate::__export_world!($plugin, "filter-score-plugin", [filter, score, normalize]);
    };
    ($plugin:ty: filter, score, interests) => {
        $crate::__export_world!(
            $plugin,
            "filter-score-interests-plugin",
            [filter, score, normalize, interests]
        );
    };
    ($plugin:ty: filter, score, post_filter) => {
        $crate::__export_world!(
            $plugin,
            "filter-score-post-filter-plugin",
            [filter, score, normalize, post_filter]
        );
    };
    ($plugin:ty: deletion_cost) => {
        $crate::__export_world!($plugin, "deletion-cost-plugin", [deletion_cost]);
    };
    ($plugin:ty: filter, score, reserve, pre_bind, interests) => {
        $crate::__export_world!(
            $plugin,
            "filter-score-reserve-prebind-interests-plugin",
            [filter, score, normalize, reserve, pre_bind, interests]
        );
    };
    ($plugin:ty: filter, score, post_filter, reserve, pre_bind, interests) => {
        $crate::__export_world!(
            $plugin,
            "filter-score-postfilter-reserve-prebind-interests-plugin",
            [
                filter,
                score,
                normalize,
                post_filter,
                reserve,
                pre_bind,
                interests
            ]
        );
    };
    ($plugin:ty: filter, score, post_filter, reserve, pre_bind, device_rank, interests) => {
        $crate::__export_world!(
            $plugin,
            "filter-score-postfilter-reserve-prebind-devicerank-interests-plugin",
            [
                filter,
                score,
                normalize,
                post_filter,
                reserve,
                pre_bind,
                device_rank,
                interests
            ]
        );
    };
    ($plugin:ty: filter, score, interests, metric_interests) => {
        $crate::__export_world!(
            $plugin,
            "filter-score-interests-metricinterests-plugin",
            [filter, score, normalize, interests, metric_interests]
        );
    };
    ($plugin:ty: filter, score, post_filter, reserve, pre_bind, device_rank, interests, metric_interests) => {
        $crate::__export_world!(
            $plugin,
            "gpu-topology-plugin",
            [
                filter,
                score,
                normalize,
                post_filter,
                reserve,
                pre_bind,
                device_rank,
                interests,
                metric_interests
            ]
        );
    };
    ($plugin:ty: reserve, permit) => {
        $crate::__export_world!($plugin, "reserve-permit-plugin", [reserve, permit]);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_world {
    ($plugin:ty, $world:literal, [$($point:ident),*]) => {
        // Only a wasm build exports anything; natively (unit tests) the
        // plugin is driven through `runtime` directly.
        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        #[allow(clippy::all, unused)]
        mod __wasmsched_export {
            use super::*;
            $crate::__generate_world!($world);
            pub struct Export;
            type P = $plugin;
            impl exports::wasmsched::plugin::lifecycle::Guest for Export {
                fn contract_version() -> String {
                    $crate::CONTRACT_VERSION.to_string()
                }
                fn init(args: String) -> Result<(), String> {
                    $crate::runtime::init::<P>(&args)
                }
                fn apply(deltas: Vec<$crate::types::Delta>) {
                    $crate::runtime::apply::<P>(deltas)
                }
                fn cycle_start(pod: $crate::types::Pod) -> Result<$crate::types::CyclePlan, String> {
                    $crate::runtime::cycle_start::<P>(pod)
                }
            }
            $($crate::__export_point!($point);)*
            export!(Export);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_point {
    (filter) => {
        impl exports::wasmsched::plugin::filter::Guest for Export {
            fn filter(nodes: Vec<u32>) -> Vec<Option<$crate::types::Rejection>> {
                $crate::runtime::filter::<P>(&nodes)
            }
        }
    };
    (score) => {
        impl exports::wasmsched::plugin::score::Guest for Export {
            fn score(nodes: Vec<u32>) -> Result<Vec<i64>, String> {
                $crate::runtime::score::<P>(&nodes)
            }
        }
    };
    (normalize) => {
        impl exports::wasmsched::plugin::normalize_score::Guest for Export {
            fn normalize_score(nodes: Vec<u32>, scores: Vec<i64>) -> Result<Vec<i64>, String> {
                $crate::runtime::normalize::<P>(&nodes, scores)
            }
        }
    };
    (reserve) => {
        impl exports::wasmsched::plugin::reserve::Guest for Export {
            fn reserve(node: u32) -> Result<(), String> {
                $crate::runtime::reserve::<P>(node)
            }
            fn unreserve(pod_uid: String, node: u32) {
                $crate::runtime::unreserve::<P>(&pod_uid, node)
            }
        }
    };
    (pre_bind) => {
        impl exports::wasmsched::plugin::pre_bind::Guest for Export {
            fn pre_bind(node: u32) -> Result<$crate::types::PodPatch, String> {
                $crate::runtime::pre_bind::<P>(node)
            }
        }
    };
    (device_rank) => {
        impl exports::wasmsched::plugin::node_device_rank::Guest for Export {
            fn rank_node_devices(
                node: u32,
                devices: Option<Vec<$crate::types::Device>>,
                allocated: Vec<bool>,
                requests: Vec<String>,
                sets: Vec<$crate::types::DeviceSet>,
            ) -> Vec<u8> {
                $crate::runtime::rank_node_devices::<P>(node, devices, &allocated, &requests, &sets)
            }
        }
    };
    (interests) => {
        impl exports::wasmsched::plugin::interests::Guest for Export {
            fn interests() -> $crate::types::KeyInterests {
                $crate::runtime::interests::<P>()
            }
        }
    };
    (metric_interests) => {
        impl exports::wasmsched::plugin::metric_interests::Guest for Export {
            fn metric_interests() -> Vec<String> {
                $crate::runtime::metric_interests::<P>()
            }
            fn set_metrics(nodes: Vec<(u32, Vec<(String, f64)>)>) {
                $crate::runtime::set_metrics::<P>(nodes)
            }
            fn set_metric_values(nodes: Vec<(u32, u32)>, values: Vec<f64>) {
                $crate::runtime::set_metric_values::<P>(&nodes, &values)
            }
        }
    };
    (permit) => {
        impl exports::wasmsched::plugin::permit::Guest for Export {
            fn permit(node: u32) -> $crate::types::PermitResult {
                $crate::runtime::permit::<P>(node)
            }
        }
    };
    (post_filter) => {
        impl exports::wasmsched::plugin::post_filter::Guest for Export {
            fn post_filter(
                candidates: Vec<$crate::types::Candidate>,
            ) -> Result<$crate::types::PreemptionAdvice, String> {
                $crate::runtime::post_filter::<P>(&candidates)
            }
        }
    };
    (deletion_cost) => {
        impl exports::wasmsched::plugin::deletion_cost::Guest for Export {
            fn deletion_cost(
                pod: $crate::types::PodStatus,
                metrics: Vec<(String, f64)>,
            ) -> Result<Option<i32>, String> {
                $crate::runtime::deletion_cost::<P>(&pod, &metrics)
            }
        }
    };
}
