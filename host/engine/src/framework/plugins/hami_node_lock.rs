//! HAMiNodeLock: the host side of HAMi's binding protocol
//! (docs/gpu-sharing.md). For a pod whose containers ask for
//! `nvidia.com/gpu`, bound to a node that runs HAMi's device plugin
//! (`hami.io/node-nvidia-register`), PreBind takes HAMi's node lock
//! (`hami.io/mutex.lock`), marks the pod `hami.io/bind-phase: allocating`
//! and stamps `hami.io/vgpu-time` and `hami.io/bind-time`, before the
//! binding. The device choice itself (`hami.io/vgpu-devices-*`,
//! `hami.io/vgpu-node`) is GpuTopology's PreBind output. HAMi's device
//! plugin finds the pod through the lock, allocates its devices and
//! releases the lock; a failed binding releases it (the binder).

use std::sync::Arc;
use std::time::Duration;

use wasmsched_shared::hami::request::decode_container_resources;
use wasmsched_shared::hami::{
    ASSIGNED_TIME, BIND_PHASE, BIND_PHASE_ALLOCATING, BIND_TIME, LOCK_ANNOTATION,
    REGISTER_ANNOTATION, RESOURCE_COUNT,
};

use crate::framework::{
    BindAction, CycleContext, CycleState, NodeInfo, Plugin, PluginBundle, PluginError,
    PreBindPlugin, ReservePlugin,
};
use crate::model::Pod;

pub const NAME: &str = "HAMiNodeLock";

/// Take a lock on the pod's node before binding: the node annotation
/// `annotation` set to `<RFC3339 time>,<namespace>,<pod>` with a
/// resourceVersion-guarded patch, as HAMi's `nodelock` does. A lock held
/// by another pod is waited for until it is released, its pod is gone, or
/// it is older than `expiry`; other nodes' bindings do not wait. Released
/// by the binder when a later step fails; otherwise its holder (HAMi's
/// device plugin) releases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockNode {
    pub annotation: String,
    pub expiry: Duration,
}

/// HAMi's default (`HAMI_NODELOCK_EXPIRE`).
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(300);

/// CycleState key: the pod's node runs HAMi and the pod takes its lock.
const KEY: &str = "HAMiNodeLock/locks";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Locks;

#[derive(Debug, Clone)]
pub struct HamiNodeLock {
    expiry: Duration,
}

impl HamiNodeLock {
    /// Args: `{"lockExpiry": "5m"}` (a duration; HAMi's default 5 min).
    pub fn from_args(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let mut out = HamiNodeLock {
            expiry: DEFAULT_EXPIRY,
        };
        let Some(mut obj) = super::helpers::args_object(NAME, args)? else {
            return Ok(out);
        };
        if let Some(v) = obj.remove("lockExpiry") {
            let text = v.as_str().ok_or_else(|| {
                format!("{NAME} args: lockExpiry: expected a duration string like \"5m\"")
            })?;
            out.expiry = humantime::parse_duration(text)
                .map_err(|e| format!("{NAME} args: lockExpiry: {e}"))?;
            if out.expiry.is_zero() {
                return Err(format!("{NAME} args: lockExpiry: must be positive"));
            }
        }
        if let Some(k) = obj.keys().next() {
            return Err(format!("{NAME} args: unknown field {k:?}"));
        }
        Ok(out)
    }
}

/// HAMi locks the node for a pod whose (regular) containers ask for
/// `nvidia.com/gpu` (`LockNode` in `pkg/device/nvidia/device.go`).
pub fn takes_lock(pod: &Pod) -> bool {
    let Some(v) = &pod.container_resources else {
        return false;
    };
    decode_container_resources(v).is_ok_and(|cs| {
        cs.iter()
            .any(|c| !c.init && c.get(RESOURCE_COUNT).is_some_and(|n| n > 0))
    })
}

impl Plugin for HamiNodeLock {
    fn name(&self) -> &str {
        NAME
    }
}

impl ReservePlugin for HamiNodeLock {
    fn reserve(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        node: &NodeInfo,
    ) -> Result<(), PluginError> {
        if node.node.annotations.contains_key(REGISTER_ANNOTATION) && takes_lock(ctx.pod) {
            state.write(KEY, Locks);
        }
        Ok(())
    }

    fn unreserve(&self, _pod: &Pod, _state: &CycleState, _node: &str) {}
}

impl PreBindPlugin for HamiNodeLock {
    fn pre_bind(
        &self,
        _pod: &Pod,
        state: &CycleState,
        _node: &str,
    ) -> Result<Vec<BindAction>, PluginError> {
        if state.read::<Locks>(KEY).is_none() {
            return Ok(Vec::new());
        }
        Ok(vec![
            BindAction::plugin(LockNode {
                annotation: LOCK_ANNOTATION.to_string(),
                expiry: self.expiry,
            }),
            BindAction::PatchPod {
                labels: Vec::new(),
                annotations: vec![(BIND_PHASE.to_string(), BIND_PHASE_ALLOCATING.to_string())],
            },
            BindAction::StampPod {
                annotations: vec![ASSIGNED_TIME.to_string(), BIND_TIME.to_string()],
            },
        ])
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<PluginBundle, String> {
    let p = Arc::new(HamiNodeLock::from_args(args)?);
    Ok(PluginBundle::new(p.clone())
        .with_reserve(&p)
        .with_pre_bind(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::framework::plugins::testutil::*;

    fn hami_node() -> NodeInfo {
        let snap = cluster(
            vec![N::new("gpu")
                .annotations(&[(REGISTER_ANNOTATION, "GPU-0,10,8192,100,T4,0,true:")])
                .build()],
            vec![],
        );
        snap.by_name("gpu").unwrap().clone()
    }

    fn actions(pod: &Pod, node: &NodeInfo) -> Vec<BindAction> {
        let p = HamiNodeLock::from_args(None).unwrap();
        let snap = cluster(vec![], vec![]);
        let ctx = ctx(pod, &snap);
        let mut state = CycleState::default();
        p.reserve(&ctx, &mut state, node).unwrap();
        p.pre_bind(pod, &state, node.name()).unwrap()
    }

    #[test]
    fn gpu_pods_on_hami_nodes_lock_mark_and_stamp() {
        let gpu = P::new("g").req(&[("nvidia.com/gpu", "1")]).build();
        let a = actions(&gpu, &hami_node());
        assert_eq!(a.len(), 3);
        assert_eq!(
            a[0],
            BindAction::plugin(LockNode {
                annotation: "hami.io/mutex.lock".into(),
                expiry: DEFAULT_EXPIRY
            })
        );
        assert!(matches!(&a[1], BindAction::PatchPod { annotations, .. }
            if annotations == &[("hami.io/bind-phase".to_string(), "allocating".to_string())]));
        assert!(matches!(&a[2], BindAction::StampPod { annotations }
            if annotations == &["hami.io/vgpu-time".to_string(), "hami.io/bind-time".to_string()]));
        // No lock: a pod without GPUs, or a node without HAMi.
        let cpu = P::new("c").req(&[("cpu", "1")]).build();
        assert!(actions(&cpu, &hami_node()).is_empty());
        let snap = cluster(vec![N::new("plain").build()], vec![]);
        assert!(actions(&gpu, snap.by_name("plain").unwrap()).is_empty());
    }

    #[test]
    fn args() {
        let p = HamiNodeLock::from_args(Some(&json!({"lockExpiry": "30s"}))).unwrap();
        assert_eq!(p.expiry, Duration::from_secs(30));
        assert!(HamiNodeLock::from_args(Some(&json!({"lockExpiry": 5})))
            .unwrap_err()
            .contains("lockExpiry"));
        assert!(HamiNodeLock::from_args(Some(&json!({"lockExpiry": "0s"}))).is_err());
        assert!(HamiNodeLock::from_args(Some(&json!({"expiry": "5m"})))
            .unwrap_err()
            .contains("unknown field \"expiry\""));
    }
}
