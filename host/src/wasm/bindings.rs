//! Host-side bindings for the contract: the current one (`wit/plugin.wit`)
//! and each earlier minor version kept in `wit/history/`, so components
//! built against an older minor keep loading. The older bindings share the
//! current `types` (a minor version only adds types), so everything past
//! the call itself is version-independent.

/// `wasmsched:plugin` as `wit/plugin.wit` states it (the current version).
pub mod current {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit",
    });
}

/// `wasmsched:plugin@0.1.0`: lifecycle, filter, score, normalize-score,
/// deletion-cost.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit/history/0.1.0",
        with: {
            "wasmsched:plugin/types@0.1.0": super::current::wasmsched::plugin::types,
        },
    });
}

/// `wasmsched:plugin@0.2.0`: 0.1 plus interests, post-filter, reserve,
/// permit, pre-bind.
pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit/history/0.2.0",
        with: {
            "wasmsched:plugin/types@0.2.0": super::current::wasmsched::plugin::types,
        },
    });
}

/// `wasmsched:plugin@0.3.0`: 0.2 plus device-rank.
pub mod v0_3 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit/history/0.3.0",
        with: {
            "wasmsched:plugin/types@0.3.0": super::current::wasmsched::plugin::types,
        },
    });
}

/// `wasmsched:plugin@0.4.0`: 0.3 plus metric-interests.
pub mod v0_4 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../wit/history/0.4.0",
        with: {
            "wasmsched:plugin/types@0.4.0": super::current::wasmsched::plugin::types,
        },
    });
}

pub use current::exports::wasmsched::plugin::{
    deletion_cost, device_rank, filter, interests, lifecycle, metric_interests, node_device_rank,
    normalize_score, permit, post_filter, pre_bind, reserve, score,
};
pub use current::wasmsched::plugin::types;
