//! NodeVolumeLimits (upstream's `plugins/nodevolumelimits/csi.go`): a
//! node attaches at most `CSINode.spec.drivers[].allocatable.count`
//! volumes of each CSI driver (or the node's allocatable
//! `attachable-volumes-csi-<driver>`), counting the volumes its pods
//! already use. A bound claim counts by its PV's CSI driver and handle; an
//! unbound one by its class's provisioner, as a volume of its own. In-tree
//! volumes count only after CSI migration, off by default in 1.20.
//!
//! VolumeLimitScaling (beta, on in 1.37): a pod with a new volume of a
//! driver whose CSIDriver sets `spec.preventPodSchedulingIfMissing` does
//! not fit a node whose CSINode does not list that driver (a driver
//! without a CSIDriver object is allowed).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::framework::handle::Handle;
use crate::framework::volumes::VolumeStore;
use crate::framework::{
    CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, PluginBundle, Rejection,
};
use crate::model::volume::CsiNode;
use crate::model::Pod;

pub const NAME: &str = "NodeVolumeLimits";

/// Upstream's `ErrReasonMaxVolumeCountExceeded`.
pub const ERR_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";

/// Upstream's `CSIAttachLimitPrefix`.
const ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";

/// In-tree provisioners with a CSI migration (all off by default in 1.20,
/// so their claims do not count).
const IN_TREE_MIGRATABLE: [&str; 6] = [
    "kubernetes.io/aws-ebs",
    "kubernetes.io/gce-pd",
    "kubernetes.io/azure-disk",
    "kubernetes.io/azure-file",
    "kubernetes.io/cinder",
    "kubernetes.io/vsphere-volume",
];

#[derive(Debug, Clone, Copy, Default)]
pub struct NodeVolumeLimits;

impl Plugin for NodeVolumeLimits {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        if ctx.pod.volumes.is_empty() {
            return Ok(());
        }
        let store = ctx.snapshot.volumes();
        let mut new = HashMap::new();
        attachable(store, ctx.pod, &mut new);
        if new.is_empty() {
            return Ok(());
        }
        let csi_node = store.csi_node(node.name());
        let drivers: std::collections::BTreeSet<&str> = new.values().map(String::as_str).collect();
        for driver in drivers {
            if !driver_on_node(store, driver, csi_node.as_deref()) {
                return Err(Rejection::new(format!(
                    "{driver} CSI driver is not installed on the node"
                )));
            }
        }
        let limits = limits(node, csi_node.as_deref());
        if limits.is_empty() {
            return Ok(());
        }
        let mut attached = HashMap::new();
        for p in &node.pods {
            attachable(store, p, &mut attached);
        }
        let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (volume, driver) in &attached {
            new.remove(volume);
            *attached_count.entry(driver).or_default() += 1;
        }
        let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
        for driver in new.values() {
            *new_count.entry(driver).or_default() += 1;
        }
        for (driver, count) in new_count {
            if let Some(max) = limits.get(driver) {
                if attached_count.get(driver).copied().unwrap_or(0) + count > *max {
                    return Err(Rejection::new(ERR_MAX_VOLUME_COUNT));
                }
            }
        }
        Ok(())
    }
}

/// Upstream's `checkCSIDriverOnNode`: whether a pod may use a new volume
/// of `driver` on the node of `csi_node`. Only a CSIDriver that opts in
/// with `preventPodSchedulingIfMissing` requires the CSINode to list it.
fn driver_on_node(store: &VolumeStore, driver: &str, csi_node: Option<&CsiNode>) -> bool {
    let Some(d) = store.csi_driver(driver) else {
        return true;
    };
    !d.prevent_pod_scheduling_if_missing
        || csi_node.is_some_and(|n| n.drivers.iter().any(|(name, _)| name == driver))
}

/// Upstream's `filterAttachableVolumes`: the pod's CSI volumes, as
/// `driver/handle` -> driver.
fn attachable(store: &VolumeStore, pod: &Pod, out: &mut HashMap<String, String>) {
    for claim in pod.volumes.iter().filter_map(|v| v.claim()) {
        let Some(pvc) = store.api_pvc(&pod.namespace, claim) else {
            continue;
        };
        let from_pv = (!pvc.volume_name.is_empty())
            .then(|| store.api_pv(&pvc.volume_name))
            .flatten();
        let info = match from_pv {
            // An in-tree PV (no CSI source) counts only after migration.
            Some(pv) => pv
                .csi
                .as_ref()
                .map(|c| (c.driver.clone(), c.volume_handle.clone())),
            None => from_class(store, &pvc.namespace, &pvc.name, &pvc.class),
        };
        if let Some((driver, handle)) = info.filter(|(d, h)| !d.is_empty() && !h.is_empty()) {
            out.insert(format!("{driver}/{handle}"), driver);
        }
    }
}

/// Upstream's `getCSIDriverInfoFromSC`: an unbound claim is one volume of
/// its class's provisioner.
fn from_class(store: &VolumeStore, ns: &str, name: &str, class: &str) -> Option<(String, String)> {
    if class.is_empty() {
        return None;
    }
    let provisioner = store.class(class)?.provisioner.clone();
    if IN_TREE_MIGRATABLE.contains(&provisioner.as_str()) {
        return None;
    }
    Some((provisioner, format!("unbound-claim-{ns}/{name}")))
}

/// Upstream's `getVolumeLimits`, by driver: the node's allocatable
/// `attachable-volumes-csi-<driver>` (for driver names short enough to be
/// spelled out in the key), overridden by the CSINode's counts.
fn limits(node: &NodeInfo, csi_node: Option<&CsiNode>) -> HashMap<String, i64> {
    let mut out: HashMap<String, i64> = node
        .node
        .allocatable
        .iter()
        .filter_map(|(k, v)| {
            let driver = k.strip_prefix(ATTACH_LIMIT_PREFIX)?;
            (k.len() < 63).then(|| (driver.to_string(), v))
        })
        .collect();
    for (driver, count) in csi_node.iter().flat_map(|n| n.drivers.iter()) {
        if let Some(c) = count {
            out.insert(driver.clone(), *c);
        }
    }
    out
}

/// The registry's factory.
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<PluginBundle, String> {
    crate::framework::plugins::helpers::no_args(NAME, args)?;
    let p = Arc::new(NodeVolumeLimits);
    Ok(PluginBundle::new(p.clone()).with_filter(&p))
}
