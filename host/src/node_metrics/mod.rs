//! Live node metrics from Prometheus (NVIDIA dcgm-exporter's
//! `DCGM_FI_DEV_GPU_UTIL`, `DCGM_FI_DEV_FB_FREE` by default),
//! fed to plugins as node metrics (`Node::metrics`, the contract's
//! `node.metrics`). See docs/node-metrics.md.
//!
//! - [`config`]: the `nodeMetrics:` section, validated.
//! - [`store`]: the values per node and per device with the time each was
//!   last seen; what is older than the staleness bound is unknown.
//! - [`source`]: `wasmsched run`'s poller (the shared Prometheus client of
//!   [`crate::prometheus`]), which hands the store to the scheduler's cache
//!   after every pass.
//! - [`snapshot`]: `simulate --metrics FILE` (Prometheus text format, or a
//!   query API answer as `curl` prints it).
//! - [`telemetry`]: the source's own metrics.
//!
//! Per-device values are node metrics named `METRIC/DEVICE` (the device
//! label's value, a GPU UUID with dcgm-exporter); the node's own value,
//! `METRIC`, is the mean over its devices.

pub mod config;
pub mod snapshot;
pub mod source;
pub mod store;
pub mod telemetry;

pub use config::NodeMetricsConfig;
pub use store::Store;

/// The separator between a metric's name and a device in the name of a
/// per-device node metric (`DCGM_FI_DEV_GPU_UTIL/GPU-5f2c...`).
pub const DEVICE_SEPARATOR: char = '/';
