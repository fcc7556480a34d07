//! Pod deletion cost: a controller that sets
//! `controller.kubernetes.io/pod-deletion-cost` on the pods of opted-in
//! ReplicaSets from live metrics through a wasm policy, and the scale-down
//! preview that shows the order in which the ReplicaSet controller would
//! delete pods. See docs/deletion-cost.md.
//!
//! For `wasmsched run`: build a [`DeletionCostConfig`] with
//! [`DeletionCostConfig::from_file`] and call [`run_controller`].

pub mod annotation;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod decision;
pub mod facts;
pub mod history;
pub mod metrics_source;
pub mod policy;
pub mod preview;
pub mod ranking;
pub mod report;
pub mod telemetry;
pub mod workload;

pub use config::DeletionCostConfig;
pub use controller::{reconcile_once, reconcile_once_blocking, run_controller, Controller, Mode};
pub use preview::Preview;
pub use report::Report;
pub use workload::{Inventory, WorkloadRef};
