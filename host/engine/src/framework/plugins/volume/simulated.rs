//! `simulate` has no API server, PV controller or provisioner: when a
//! binding cycle's actions bind volumes, this applies what they would do.
//! A static binding completes (the PV controller binds the claim); a claim
//! annotated for provisioning stays so (no volume is invented), which
//! keeps every other pod using it on the selected node, as upstream while
//! the provisioner works.

use super::VolumeAction;
use crate::framework::volumes::VolumeStore;
use crate::framework::BindAction;
use crate::model::volume::{
    claim_key, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE,
};

/// Applies the volume actions among `actions` to `store`.
pub fn apply(store: &VolumeStore, actions: &[BindAction]) {
    for a in actions.iter().filter_map(BindAction::get::<VolumeAction>) {
        match a {
            VolumeAction::BindVolume {
                pv,
                claim,
                by_controller,
                ..
            } => {
                store.update_pv_api(pv, |p| {
                    p.claim_ref = Some(claim.clone());
                    if *by_controller {
                        p.annotations
                            .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
                    }
                    p.phase = "Bound".into();
                });
                store.update_pvc_api(&claim_key(&claim.namespace, &claim.name), |c| {
                    c.volume_name = pv.clone();
                    c.annotations
                        .insert(ANN_BIND_COMPLETED.into(), "yes".into());
                    c.annotations
                        .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
                    c.phase = "Bound".into();
                });
            }
            VolumeAction::SelectNode {
                namespace,
                claim,
                node,
                ..
            } => store.update_pvc_api(&claim_key(namespace, claim), |c| {
                c.annotations.insert(ANN_SELECTED_NODE.into(), node.clone());
            }),
            VolumeAction::WaitForVolumes { .. } => {}
        }
    }
}
