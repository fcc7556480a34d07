//! A test provisioner, as an external CSI provisioner behaves with
//! `WaitForFirstConsumer`: for every claim the PV controller hands to it
//! (`volume.beta.kubernetes.io/storage-provisioner`) once the scheduler
//! selected a node (`volume.kubernetes.io/selected-node`), it creates a PV
//! pre-bound to the claim, on that node; the PV controller binds them.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::json;

use super::scenarios::{NS, PROVISIONER};

const ANN_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// Runs until the task is aborted.
pub async fn run(client: Client) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pvs: Api<PersistentVolume> = Api::all(client);
    let stream = watcher::watcher(claims, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        if let Ok(Event::Apply(c) | Event::InitApply(c)) = event {
            provision(&pvs, &c).await;
        }
    }
}

async fn provision(pvs: &Api<PersistentVolume>, claim: &PersistentVolumeClaim) {
    let meta = &claim.metadata;
    let ann = meta.annotations.clone().unwrap_or_default();
    let (Some(node), Some(p)) = (ann.get(ANN_SELECTED_NODE), ann.get(ANN_PROVISIONER)) else {
        return;
    };
    let spec = claim.spec.clone().unwrap_or_default();
    if p != PROVISIONER || spec.volume_name.is_some_and(|v| !v.is_empty()) {
        return;
    }
    let uid = meta.uid.clone().unwrap_or_default();
    let size = spec
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").cloned())
        .map(|q| q.0)
        .unwrap_or_else(|| "1Gi".into());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": format!("pvc-{uid}"),
                     "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.access_modes,
            "storageClassName": spec.storage_class_name,
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": NS, "name": meta.name, "uid": uid},
            "csi": {"driver": PROVISIONER, "volumeHandle": format!("vol-{uid}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        }
    }))
    .expect("a valid PV");
    // Already created on an earlier event: fine.
    let _ = pvs.create(&PostParams::default(), &pv).await;
}
