//! DynamicResources' [`ExtendedClaimBinding`] step, as kube-scheduler's
//! `bindClaim` does it for a pod's extended resources backed by DRA:
//! the claim is created (generated name, the pod as controlling owner,
//! the `resource.kubernetes.io/extended-resource-claim` annotation), its
//! allocation and the pod's reservation written as for any claim
//! ([`super::claims`]), and the pod's `status.extendedResourceClaimStatus`
//! patched with the request mappings. When this or a later step fails the
//! claim is deleted again (upstream's Unreserve: the delete-protection
//! finalizer removed, then the claim deleted).

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::{BindResult, Binder};
use crate::framework::plugins::dynamic_resources::{ClaimBinding, ExtendedClaimBinding};
use crate::model::dra::DELETE_PROTECTION;
use crate::scheduler::Binding;

/// A claim this binding created.
#[derive(Debug, Clone)]
pub(super) struct Created {
    pub namespace: String,
    pub name: String,
}

impl Binder {
    /// Creates and writes the pod's extended resource claim. `Some`: the
    /// claim exists (to delete should the binding fail later).
    pub(super) async fn extended_claim(
        &self,
        req: &Binding,
        b: &ExtendedClaimBinding,
    ) -> (BindResult, Option<Created>) {
        if let Some(r) = self.ready(req).await {
            return (r, None);
        }
        let pod = req.pod();
        let namespace = pod.namespace.clone();
        let (api, version) = self.claims_api_versioned(&namespace).await;
        let mut object = json!({
            "apiVersion": format!("resource.k8s.io/{version}"),
            "kind": "ResourceClaim",
            "metadata": b.metadata,
            "spec": b.spec,
        });
        if version == "v1beta1" {
            flatten_requests(&mut object["spec"]);
        }
        let object: DynamicObject = match serde_json::from_value(object) {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(pod = %pod.key(), error = %e, "the extended resource claim cannot be built; the pod is retried");
                return (BindResult::Error, None);
            }
        };
        self.throttle.wait().await;
        let created = match api.create(&PostParams::default(), &object).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "create claim for extended resources failed; will retry");
                return (BindResult::Error, None);
            }
        };
        let name = created.metadata.name.clone().unwrap_or_default();
        let done = Created {
            namespace: namespace.clone(),
            name: name.clone(),
        };
        tracing::debug!(pod = %pod.key(), claim = %format!("{namespace}/{name}"), "created claim for extended resources");
        let binding = ClaimBinding {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: created.metadata.uid.clone().unwrap_or_default(),
            allocation: Some(b.allocation.clone()),
            pod_name: b.pod_name.clone(),
            pod_uid: b.pod_uid.clone(),
            resource_version: created
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
            finalizers: created.metadata.finalizers.clone().unwrap_or_default(),
            consumers: 0,
        };
        let r = self.claim_binding(req, &binding).await;
        if r != BindResult::Bound {
            return (r, Some(done));
        }
        (self.patch_extended_status(req, b, &name).await, Some(done))
    }

    /// The pod's `status.extendedResourceClaimStatus` (upstream's
    /// `patchPodExtendedResourceClaimStatus`).
    async fn patch_extended_status(
        &self,
        req: &Binding,
        b: &ExtendedClaimBinding,
        claim: &str,
    ) -> BindResult {
        let pod = req.pod();
        if b.mappings.is_empty() {
            tracing::warn!(pod = %pod.key(), "nil or empty request mappings, no update of pod ExtendedResourceClaimStatus");
            return BindResult::Error;
        }
        let mappings: Vec<Value> = b.mappings.iter().map(|m| m.to_json()).collect();
        let patch = json!({
            "metadata": {"uid": pod.uid},
            "status": {"extendedResourceClaimStatus": {
                "requestMappings": mappings,
                "resourceClaimName": claim,
            }},
        });
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace);
        self.throttle.wait().await;
        match api
            .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => BindResult::Bound,
            Err(kube::Error::Api(e)) if e.code == 404 => BindResult::Gone,
            Err(kube::Error::Api(e)) if e.code == 409 => BindResult::Conflict,
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "update pod ExtendedResourceClaimStatus failed; will retry");
                BindResult::Error
            }
        }
    }

    /// Deletes a claim this binding created (a later step failed).
    pub(super) async fn delete_created(&self, req: &Binding, c: &Created) {
        let api = self.claims_api(&c.namespace).await;
        self.throttle.wait().await;
        if let Err(e) = delete_claim(&api, &c.name).await {
            tracing::warn!(pod = %req.pod().key(), claim = %format!("{}/{}", c.namespace, c.name), error = %e, "deleting the extended resource claim failed; the next attempt deletes it");
        }
    }
}

/// Upstream's `deleteClaim`: the delete-protection finalizer removed (a
/// normal update, retried on conflicts), then the claim deleted; a claim
/// already gone is fine.
pub(crate) async fn delete_claim(api: &Api<DynamicObject>, name: &str) -> Result<(), kube::Error> {
    for _ in 0..5 {
        let mut obj = match api.get(name).await {
            Ok(o) => o,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        };
        let Some(finalizers) = obj.metadata.finalizers.as_mut() else {
            break;
        };
        let before = finalizers.len();
        finalizers.retain(|f| f != DELETE_PROTECTION);
        if finalizers.len() == before {
            break;
        }
        match api.replace(name, &PostParams::default(), &obj).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// `v1beta1` keeps a request's fields at its top level (`v1` has them in
/// `exactly`).
fn flatten_requests(spec: &mut Value) {
    let Some(requests) = spec
        .pointer_mut("/devices/requests")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for r in requests {
        let Some(obj) = r.as_object_mut() else {
            continue;
        };
        if let Some(Value::Object(exactly)) = obj.remove("exactly") {
            obj.extend(exactly);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1beta1_requests_are_flat() {
        let mut spec = json!({"devices": {"requests": [{"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu", "count": 2}}]}});
        flatten_requests(&mut spec);
        assert_eq!(
            spec,
            json!({"devices": {"requests": [{"name": "container-0-request-0", "deviceClassName": "gpu", "count": 2}]}})
        );
    }
}
