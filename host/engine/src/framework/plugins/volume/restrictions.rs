//! VolumeRestrictions (upstream's `plugins/volumerestrictions`): the
//! in-tree disks of 1.20 that two pods on a node may not share (the same
//! GCE PD unless both mount it read-only, the same EBS volume, the same
//! iSCSI IQN or RBD image unless both read-only), and, from newer
//! releases, a `ReadWriteOncePod` claim that another pod already uses
//! (1.20's API server refuses that access mode; `simulate` may read it).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::handle::Handle;
use crate::framework::{
    CycleContext, CycleState, Decision, FilterPlugin, NodeInfo, Plugin, PluginBundle, PluginError,
    PreFilterPlugin, Rejection,
};
use crate::model::pod_volume::VolumeSource;
use crate::model::volume::AccessMode;
use crate::model::Pod;

pub const NAME: &str = "VolumeRestrictions";

/// Upstream's `ErrReasonDiskConflict`.
pub const ERR_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Upstream's `ErrReasonReadWriteOncePodConflict` (newer releases).
pub const ERR_RWOP_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

const STATE_KEY: &str = "PreFilterVolumeRestrictions";

#[derive(Debug, Clone, Copy, Default)]
pub struct VolumeRestrictions;

/// The pod's `ReadWriteOncePod` claims and how many placed pods use them.
#[derive(Debug, Clone, Default)]
struct State {
    rwop_claims: BTreeSet<String>,
    conflicts: i64,
}

impl State {
    /// How many of `other`'s volumes are the pod's RWOP claims.
    fn uses(&self, pod_ns: &str, other: &Pod) -> i64 {
        if other.namespace != pod_ns {
            return 0;
        }
        other
            .volumes
            .iter()
            .filter_map(|v| v.claim())
            .filter(|c| self.rwop_claims.contains(*c))
            .count() as i64
    }
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &str {
        NAME
    }
}

fn needs_disk_check(pod: &Pod) -> bool {
    pod.volumes.iter().any(|v| {
        !matches!(
            v.source,
            VolumeSource::Claim { .. } | VolumeSource::Ephemeral
        )
    })
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
    ) -> Result<Decision, Rejection> {
        let store = ctx.snapshot.volumes();
        let pod = ctx.pod;
        let rwop_claims: BTreeSet<String> = pod
            .volumes
            .iter()
            .filter_map(|v| v.claim())
            .filter(|c| {
                // A missing claim is VolumeBinding's to report, as in 1.20.
                store
                    .api_pvc(&pod.namespace, c)
                    .is_some_and(|pvc| pvc.access_modes.contains(&AccessMode::ReadWriteOncePod))
            })
            .map(str::to_string)
            .collect();
        let mut s = State {
            rwop_claims,
            conflicts: 0,
        };
        if !s.rwop_claims.is_empty() {
            // Upstream counts each claim once however many pods use it.
            let used: BTreeSet<&str> = ctx
                .snapshot
                .nodes()
                .flat_map(|n| n.pods.iter())
                .filter(|p| p.namespace == pod.namespace && p.uid != pod.uid)
                .flat_map(|p| p.volumes.iter().filter_map(|v| v.claim()))
                .filter(|c| s.rwop_claims.contains(*c))
                .collect();
            s.conflicts = used.len() as i64;
        }
        if !needs_disk_check(pod) && s.conflicts == 0 && s.rwop_claims.is_empty() {
            return Ok(Decision::Skip);
        }
        state.write(STATE_KEY, s);
        Ok(Decision::Run)
    }

    fn add_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        _node: &NodeInfo,
    ) -> Result<(), PluginError> {
        if let Some(s) = state.read_mut::<State>(STATE_KEY) {
            s.conflicts += s.uses(&ctx.pod.namespace, pod);
        }
        Ok(())
    }

    fn remove_pod(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        pod: &Arc<Pod>,
        _node: &NodeInfo,
    ) -> Result<(), PluginError> {
        if let Some(s) = state.read_mut::<State>(STATE_KEY) {
            s.conflicts -= s.uses(&ctx.pod.namespace, pod);
        }
        Ok(())
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        for v in &ctx.pod.volumes {
            if node.pods.iter().any(|other| conflicts(&v.source, other)) {
                return Err(Rejection::new(ERR_DISK_CONFLICT));
            }
        }
        match state.read::<State>(STATE_KEY) {
            Some(s) if s.conflicts > 0 => Err(Rejection::new(ERR_RWOP_CONFLICT)),
            _ => Ok(()),
        }
    }
}

/// Upstream's `isVolumeConflict`: `volume` conflicts with a volume of
/// `other`.
fn conflicts(volume: &VolumeSource, other: &Pod) -> bool {
    use VolumeSource::*;
    other.volumes.iter().any(|e| match (volume, &e.source) {
        (
            GcePersistentDisk { pd_name, read_only },
            GcePersistentDisk {
                pd_name: other_pd,
                read_only: other_ro,
            },
        ) => pd_name == other_pd && !(*read_only && *other_ro),
        (
            AwsElasticBlockStore { volume_id },
            AwsElasticBlockStore {
                volume_id: other_id,
            },
        ) => volume_id == other_id,
        (
            Iscsi { iqn, read_only },
            Iscsi {
                iqn: other_iqn,
                read_only: other_ro,
            },
        ) => iqn == other_iqn && !(*read_only && *other_ro),
        (
            Rbd {
                monitors,
                pool,
                image,
                read_only,
            },
            Rbd {
                monitors: m2,
                pool: p2,
                image: i2,
                read_only: ro2,
            },
        ) => {
            monitors.iter().any(|m| m2.contains(m))
                && pool == p2
                && image == i2
                && !(*read_only && *ro2)
        }
        _ => false,
    })
}

/// The registry's factory.
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<PluginBundle, String> {
    crate::framework::plugins::helpers::no_args(NAME, args)?;
    let p = Arc::new(VolumeRestrictions);
    Ok(PluginBundle::new(p.clone())
        .with_pre_filter(&p)
        .with_filter(&p))
}
