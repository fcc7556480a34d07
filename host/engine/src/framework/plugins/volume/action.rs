//! VolumeBinding's binding steps (upstream's `bindAPIUpdate` and the
//! `checkBindings` poll), carried out by the runtime's binder and, in
//! `simulate`, by [`super::simulated`].

use std::time::Duration;

use crate::model::volume::ClaimRef;

/// One of VolumeBinding's steps before the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeAction {
    /// Bind a PersistentVolume to a claim (a static binding): write
    /// `claimRef` (and, when `by_controller`,
    /// `pv.kubernetes.io/bound-by-controller`) to the PV, which must still
    /// be at `resource_version`. The PV controller binds the claim.
    BindVolume {
        pv: String,
        resource_version: u64,
        claim: ClaimRef,
        by_controller: bool,
    },
    /// Have a volume provisioned for a claim on `node`: annotate the
    /// claim, which must still be at `resource_version`, with
    /// `volume.kubernetes.io/selected-node`.
    SelectNode {
        namespace: String,
        claim: String,
        node: String,
        resource_version: u64,
    },
    /// Wait until the PV controller (and provisioners) completed the
    /// pod's bindings, at most `timeout` (upstream's `bindTimeoutSeconds`):
    /// the `(PV, namespace/claim)` static bindings and the provisioned
    /// claims.
    WaitForVolumes {
        bindings: Vec<(String, String)>,
        provisions: Vec<String>,
        timeout: Duration,
    },
}
