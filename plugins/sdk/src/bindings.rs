//! Bindings for the contract's shared `types` and the `host` import. The
//! export glue is generated in each plugin crate by `export_plugin!`, for
//! the world that plugin exports: generating export bindings here would
//! make every plugin claim every extension point.
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
