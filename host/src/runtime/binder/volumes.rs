//! The binding cycle's volume actions (VolumeBinding's PreBind): the PV
//! and claim writes of upstream's `bindAPIUpdate` (each at the version the
//! cycle saw, so a PV that changed meanwhile is not taken), then the poll
//! of its `checkBindings` on the watched objects until the PV controller
//! (and the provisioner) completed every binding, or the timeout.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

use super::{BindResult, Binder};
use crate::framework::plugins::volume::VolumeAction;
use crate::model::volume::{ClaimRef, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE};
use crate::runtime::events::{PodRef, Report};
use crate::scheduler::Binding;

/// How often the wait looks at the watched objects (upstream polls its
/// informer caches every second; this reads memory only).
const POLL: Duration = Duration::from_millis(200);

/// The resource versions this binding cycle wrote, so that its wait does
/// not take the watch's older copy for a reset binding.
#[derive(Debug, Default)]
pub(super) struct Written {
    pvs: HashMap<String, u64>,
    pvcs: HashMap<String, u64>,
}

fn version_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `metadata` of a write at `version` (optimistic concurrency: the API
/// server answers 409 when the object changed since).
fn meta_at(version: u64, annotations: Value) -> Value {
    let mut m = json!({ "annotations": annotations });
    if version > 0 {
        m["resourceVersion"] = json!(version.to_string());
    }
    m
}

impl Binder {
    /// Runs one volume action of `req`'s binding cycle.
    pub(super) async fn volume_action(
        &self,
        req: &Binding,
        action: &VolumeAction,
        written: &mut Written,
    ) -> BindResult {
        if let Some(r) = self.ready(req).await {
            return r;
        }
        let outcome = match action {
            VolumeAction::BindVolume {
                pv,
                resource_version,
                claim,
                by_controller,
            } => self
                .bind_volume(pv, *resource_version, claim, *by_controller)
                .await
                .map(|v| {
                    written.pvs.insert(pv.clone(), v);
                }),
            VolumeAction::SelectNode {
                namespace,
                claim,
                node,
                resource_version,
            } => self
                .select_node(namespace, claim, node, *resource_version)
                .await
                .map(|v| {
                    written.pvcs.insert(format!("{namespace}/{claim}"), v);
                }),
            VolumeAction::WaitForVolumes {
                bindings,
                provisions,
                timeout,
            } => {
                return self
                    .wait_for_volumes(req, bindings, provisions, *timeout, written)
                    .await
            }
        };
        match outcome {
            Ok(()) => BindResult::Bound,
            Err(e) => self.volume_failure(req, &e),
        }
    }

    /// Writes `claimRef` into the PV; returns the version written.
    async fn bind_volume(
        &self,
        pv: &str,
        version: u64,
        claim: &ClaimRef,
        by_controller: bool,
    ) -> Result<u64, String> {
        self.throttle.wait().await;
        let annotations = if by_controller {
            json!({ ANN_BOUND_BY_CONTROLLER: "yes" })
        } else {
            json!({})
        };
        let patch = json!({
            "metadata": meta_at(version, annotations),
            "spec": {"claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": claim.namespace,
                "name": claim.name,
                "uid": claim.uid,
            }},
        });
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.patch(pv, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|o| version_of(&o.metadata))
            .map_err(|e| format!("binding PersistentVolume {pv:?}: {e}"))
    }

    /// Annotates the claim with the selected node; returns the version
    /// written.
    async fn select_node(
        &self,
        namespace: &str,
        claim: &str,
        node: &str,
        version: u64,
    ) -> Result<u64, String> {
        self.throttle.wait().await;
        let patch = json!({ "metadata": meta_at(version, json!({ ANN_SELECTED_NODE: node })) });
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|o| version_of(&o.metadata))
            .map_err(|e| format!("selecting node {node} for claim {namespace}/{claim}: {e}"))
    }

    /// Polls until every binding is complete (upstream's
    /// `checkBindings`), the pod is no longer assumed there, or `timeout`.
    async fn wait_for_volumes(
        &self,
        req: &Binding,
        bindings: &[(String, String)],
        provisions: &[String],
        timeout: Duration,
        written: &Written,
    ) -> BindResult {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(r) = self.ready(req).await {
                return r;
            }
            match self.check_bindings(req.node(), bindings, provisions, written) {
                Ok(true) => return BindResult::Bound,
                Ok(false) => {}
                Err(e) => return self.volume_failure(req, &format!("binding volumes: {e}")),
            }
            if tokio::time::Instant::now() >= deadline {
                let e = "binding volumes: timed out waiting for the condition";
                return self.volume_failure(req, e);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Upstream's `checkBindings` on the watched objects: `Ok(false)` to
    /// keep waiting, an error when a binding can no longer complete.
    fn check_bindings(
        &self,
        node: &str,
        bindings: &[(String, String)],
        provisions: &[String],
        written: &Written,
    ) -> Result<bool, String> {
        let cache = self.shared.cache.lock();
        let info = cache
            .snapshot
            .by_name(node)
            .ok_or_else(|| format!("failed to get node {node:?}"))?;
        let labels = &info.node.labels;
        let store = cache.snapshot.volumes();
        let affinity = |pv: &str| {
            format!("pv {pv:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms")
        };
        for (pv_name, key) in bindings {
            let missing = |what: &str| format!("failed to check binding: {what} not found");
            let pv = store.api_pv(pv_name).ok_or_else(|| missing(pv_name))?;
            let pvc = store.api_pvc_by_key(key).ok_or_else(|| missing(key))?;
            if written
                .pvs
                .get(pv_name)
                .is_some_and(|v| *v > pv.resource_version)
            {
                return Ok(false);
            }
            if !pv.fits_node(labels) {
                return Err(affinity(pv_name));
            }
            if pv.claim_ref.as_ref().is_none_or(|r| r.uid.is_empty()) {
                return Err(format!("ClaimRef got reset for pv {pv_name:?}"));
            }
            if !pvc.fully_bound() {
                return Ok(false);
            }
        }
        for key in provisions {
            let pvc = store
                .api_pvc_by_key(key)
                .ok_or_else(|| format!("failed to check provisioning pvc: {key} not found"))?;
            if written
                .pvcs
                .get(key)
                .is_some_and(|v| *v > pvc.resource_version)
            {
                return Ok(false);
            }
            if pvc.selected_node() != Some(node) {
                return Err(format!("provisioning failed for PVC {:?}", pvc.name));
            }
            if !pvc.volume_name.is_empty() {
                match store.api_pv(&pvc.volume_name) {
                    None => return Ok(false),
                    Some(pv) if !pv.fits_node(labels) => return Err(affinity(&pv.name)),
                    Some(_) => {}
                }
            }
            if !pvc.fully_bound() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A failed volume action: said on the pod as upstream's PreBind
    /// failure, then retried (the reservation is undone by the caller).
    fn volume_failure(&self, req: &Binding, cause: &str) -> BindResult {
        let pod = req.pod();
        tracing::warn!(pod = %pod.key(), node = %req.node(), error = %cause, "volume binding failed; will retry");
        let _ = self.reports.send(Report::Failed {
            pod: PodRef::from(&**pod),
            message: format!(
                "error while running \"VolumeBinding\" prebind plugin for pod {:?}: {cause}",
                pod.name
            ),
            profile: req.profile.clone(),
        });
        BindResult::Error
    }
}
