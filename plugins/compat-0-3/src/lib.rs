//! A scoring policy built against contract 0.3.0 (`wit/history/0.3.0`),
//! without the SDK: the test (host/tests/contract_history.rs) that a
//! component of the previous minor keeps loading and behaving the same
//! under this host. It reads what 0.3 gives a plugin: whole node records,
//! every metric in them, and every change of a node's metrics as a
//! `node-set` delta (0.4's `metric-interests` is not there to ask for
//! less).
//!
//! Score: `100 - DCGM_FI_DEV_GPU_UTIL` of the node (0 when unknown), so
//! the least busy node wins.
//!
//! Device ranking (0.3's `device-rank`, which 0.5 keeps beside its
//! `node-device-rank`): each set ranks `10 * p` (at most 100) for `p` the
//! position among the node's devices of its first device not allocated
//! before, so the last free devices win where first fit takes the first.
//! Every call carries the node's devices.

// wit-bindgen's generated export glue is `unsafe` (the SDK's is too).
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod component {
    use std::cell::RefCell;

    wit_bindgen::generate!({
        inline: r#"
            package wasmsched:compat;
            world metric-score {
                import wasmsched:plugin/host@0.3.0;
                export wasmsched:plugin/lifecycle@0.3.0;
                export wasmsched:plugin/score@0.3.0;
                export wasmsched:plugin/device-rank@0.3.0;
            }
        "#,
        path: "../../wit/history/0.3.0",
        world: "wasmsched:compat/metric-score",
        generate_all,
    });

    use exports::wasmsched::plugin::{device_rank, lifecycle, score};
    use wasmsched::plugin::types::{CyclePlan, Delta, Device, DeviceSet, Pod};

    thread_local! {
        /// Each node's metrics, by node index.
        static NODES: RefCell<Vec<Option<Vec<(String, f64)>>>> = const { RefCell::new(Vec::new()) };
    }

    struct Component;

    impl lifecycle::Guest for Component {
        fn contract_version() -> String {
            "0.3.0".to_string()
        }

        fn init(_args: String) -> Result<(), String> {
            NODES.with(|n| n.borrow_mut().clear());
            Ok(())
        }

        fn apply(deltas: Vec<Delta>) {
            NODES.with(|n| {
                let mut nodes = n.borrow_mut();
                for d in deltas {
                    match d {
                        Delta::NodeSet((i, node)) => {
                            let i = i as usize;
                            if nodes.len() <= i {
                                nodes.resize(i + 1, None);
                            }
                            nodes[i] = Some(node.metrics);
                        }
                        Delta::NodeRemove(i) => {
                            if let Some(slot) = nodes.get_mut(i as usize) {
                                *slot = None;
                            }
                        }
                        Delta::PodAdd(_) | Delta::PodRemove(_) => {}
                    }
                }
            })
        }

        fn cycle_start(_pod: Pod) -> Result<CyclePlan, String> {
            Ok(CyclePlan {
                filter: false,
                score: true,
            })
        }
    }

    impl score::Guest for Component {
        fn score(nodes: Vec<u32>) -> Result<Vec<i64>, String> {
            NODES.with(|n| {
                let known = n.borrow();
                Ok(nodes
                    .iter()
                    .map(|&i| {
                        known
                            .get(i as usize)
                            .and_then(Option::as_ref)
                            .and_then(|m| m.iter().find(|(k, _)| k == "DCGM_FI_DEV_GPU_UTIL"))
                            .map_or(0, |(_, v)| 100 - v.clamp(0.0, 100.0) as i64)
                    })
                    .collect())
            })
        }
    }

    impl device_rank::Guest for Component {
        fn rank_devices(
            _node: u32,
            devices: Vec<Device>,
            _requests: Vec<String>,
            sets: Vec<DeviceSet>,
        ) -> Vec<u8> {
            sets.iter()
                .map(|s| {
                    s.devices
                        .first()
                        .filter(|&&d| devices.get(d as usize).is_some_and(|d| !d.allocated))
                        .map_or(0, |&d| (d * 10).min(100) as u8)
                })
                .collect()
        }
    }

    export!(Component);
}
