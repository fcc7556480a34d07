//! VolumeZone (upstream's `plugins/volumezone`): a bound claim's PV with
//! zone or region labels fits only nodes in one of its zones (a label
//! value may list several, separated by `__`). Nodes without any zone or
//! region label pass; unbound `WaitForFirstConsumer` claims pass (their
//! volume does not exist yet).

use std::sync::Arc;

use crate::framework::handle::Handle;
use crate::framework::{
    CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, PluginBundle, Rejection,
};
use crate::model::volume::BindingMode;

pub const NAME: &str = "VolumeZone";

/// Upstream's `ErrReasonConflict`.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

/// The labels upstream's `volumeZoneLabels` holds.
const ZONE_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

#[derive(Debug, Clone, Copy, Default)]
pub struct VolumeZone;

impl Plugin for VolumeZone {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        if ctx.pod.volumes.is_empty() {
            return Ok(());
        }
        let labels = &node.node.labels;
        if !ZONE_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Ok(());
        }
        let store = ctx.snapshot.volumes();
        for claim in ctx.pod.volumes.iter().filter_map(|v| v.claim()) {
            // Upstream's error statuses: VolumeBinding, which runs first,
            // rejects the pod before any of them can happen.
            let error = |m: String| Err(Rejection::unresolvable(m));
            let Some(pvc) = store.api_pvc(&ctx.pod.namespace, claim) else {
                return error(format!("persistentvolumeclaim {claim:?} not found"));
            };
            if pvc.volume_name.is_empty() {
                if pvc.class.is_empty() {
                    return error(
                        "PersistentVolumeClaim had no pv name and storageClass name".into(),
                    );
                }
                match store.class(&pvc.class) {
                    None => {
                        return error(format!(
                        "StorageClass {:?} claimed by PersistentVolumeClaim {claim:?} not found",
                        pvc.class
                    ))
                    }
                    Some(c) if c.binding_mode == BindingMode::WaitForFirstConsumer => continue,
                    Some(_) => return error("PersistentVolume had no name".into()),
                }
            }
            let Some(pv) = store.api_pv(&pvc.volume_name) else {
                return error(format!("persistentvolume {:?} not found", pvc.volume_name));
            };
            for (k, v) in &pv.labels {
                if !ZONE_LABELS.contains(&k.as_str()) {
                    continue;
                }
                let Some(zones) = label_zones(v) else {
                    continue;
                };
                let node_zone = labels.get(k).map(String::as_str).unwrap_or("");
                if !zones.contains(&node_zone) {
                    return Err(Rejection::unresolvable(ERR_REASON_CONFLICT));
                }
            }
        }
        Ok(())
    }
}

/// Upstream's `LabelZonesToSet`: `a__b` is zones a and b; a value with an
/// empty zone is ignored (upstream's error, which it skips).
fn label_zones(v: &str) -> Option<Vec<&str>> {
    let zones: Vec<&str> = v.split("__").map(str::trim).collect();
    (!zones.iter().any(|z| z.is_empty())).then_some(zones)
}

/// The registry's factory.
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<PluginBundle, String> {
    crate::framework::plugins::helpers::no_args(NAME, args)?;
    let p = Arc::new(VolumeZone);
    Ok(PluginBundle::new(p.clone()).with_filter(&p))
}
