//! wasmsched's scheduling engine: kube-scheduler's framework (extension
//! points as traits, the profile and the one table of plugins, the cycle,
//! the queue, the cache, NodeInfo, the native core plugins) and the
//! cluster model it schedules. It knows plugins only through its traits;
//! the wasm adapter, the Kubernetes runtime and the binary are the host
//! crate's (`wasmsched`, which re-exports these modules under the same
//! paths).

pub mod escape;
pub mod framework;
pub mod model;
pub mod scheduler;
