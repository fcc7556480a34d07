//! What the wasmsched host and its plugins share: code that uses only
//! `std` (and serde_json, which both already use), so the host links it
//! natively and plugins compile it to wasm.
//!
//! - [`quantity`]: Kubernetes quantities (`40Gi`, `500m`), read exactly as
//!   the scheduler reads requests;
//! - [`selector`]: label selectors in `kubectl -l` syntax;
//! - [`locality`]: the network-locality model (peer annotations, topology
//!   cost model, traffic report), used by the NetworkLocality plugin and by
//!   `simulate`'s traffic report;
//! - [`hami`]: HAMi's GPU-sharing protocol (node devices, pod device
//!   strings, requests with HAMi's defaults), used by the GpuTopology
//!   plugin and by the host (node lock, metrics, reports).

pub mod hami;
pub mod locality;
pub mod quantity;
pub mod selector;
