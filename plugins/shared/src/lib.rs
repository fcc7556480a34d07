//! What the wasmsched host and its plugins share: code that uses only
//! `std`, so the host links it natively and plugins compile it to wasm.
//!
//! - [`quantity`]: Kubernetes quantities (`40Gi`, `500m`), read exactly as
//!   the scheduler reads requests;
//! - [`selector`]: label selectors in `kubectl -l` syntax;
//! - [`locality`]: the network-locality model (peer annotations, topology
//!   cost model, traffic report), used by the NetworkLocality plugin and by
//!   `simulate`'s traffic report.

pub mod locality;
pub mod quantity;
pub mod selector;
