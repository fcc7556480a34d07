//! DynamicResources' PreBind step ([`ClaimBinding`]), as kube-scheduler's
//! `bindClaim` writes it: the delete-protection finalizer added when this
//! cycle allocated the claim; then one status write with
//! `status.allocation` (and `allocationTimestamp`) and the pod appended to
//! `status.reservedFor`. The first attempt writes against the claim as the
//! cycle saw it (JSON patches that test its `resourceVersion`: two writes,
//! no read, as upstream's first attempt); when the claim changed since,
//! it is read fresh and updated, retried on conflicts. When a
//! later step of the binding fails, the pod's reservation is taken back
//! (the allocation stays, as upstream: a later cycle may reuse or
//! deallocate it).

use std::sync::OnceLock;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::{BindResult, Binder};
use crate::framework::plugins::dynamic_resources::store::RESOURCE_CLAIM;
use crate::framework::plugins::dynamic_resources::ClaimBinding;
use crate::model::dra::DELETE_PROTECTION;
use crate::scheduler::Binding;

/// Upstream's `retry.DefaultRetry`: 5 attempts on a conflict.
const ATTEMPTS: u32 = 5;

/// The version of `resource.k8s.io` the claims are written in (the one
/// the watch reads).
fn resource(version: &str) -> ApiResource {
    ApiResource {
        group: RESOURCE_CLAIM.group.into(),
        version: version.into(),
        api_version: RESOURCE_CLAIM.api_version(version),
        kind: RESOURCE_CLAIM.kind.into(),
        plural: RESOURCE_CLAIM.plural.into(),
    }
}

static VERSION: OnceLock<String> = OnceLock::new();

/// Now as `metav1.Time`.
fn now() -> String {
    let t =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

impl Binder {
    pub(super) async fn claims_api(&self, namespace: &str) -> Api<DynamicObject> {
        self.claims_api_versioned(namespace).await.0
    }

    /// The claims API of `namespace` and the version it speaks.
    pub(super) async fn claims_api_versioned(
        &self,
        namespace: &str,
    ) -> (Api<DynamicObject>, &'static str) {
        if VERSION.get().is_none() {
            let served = match kube::discovery::group(&self.client, RESOURCE_CLAIM.group).await {
                Ok(g) => {
                    let served: Vec<String> = g.versions().map(str::to_string).collect();
                    RESOURCE_CLAIM
                        .versions
                        .iter()
                        .find(|v| served.iter().any(|s| s == *v))
                        .copied()
                        .unwrap_or("v1")
                }
                Err(_) => "v1",
            };
            let _ = VERSION.set(served.to_string());
        }
        let version = match VERSION.get().map_or("v1", String::as_str) {
            "v1beta1" => "v1beta1",
            "v1beta2" => "v1beta2",
            _ => "v1",
        };
        (
            Api::namespaced_with(self.client.clone(), namespace, &resource(version)),
            version,
        )
    }

    /// Writes the claim's allocation and reservation.
    pub(super) async fn claim_binding(&self, req: &Binding, c: &ClaimBinding) -> BindResult {
        if let Some(r) = self.ready(req).await {
            return r;
        }
        let api = self.claims_api(&c.namespace).await;
        let key = format!("{}/{}", c.namespace, c.name);
        let failed = |what: String| {
            tracing::warn!(pod = %req.pod().key(), claim = %key, error = %what, "PreBind of DynamicResources failed; will retry");
            BindResult::Error
        };
        match self.write_as_seen(&api, c).await {
            Ok(()) => return BindResult::Bound,
            Err(Some(e)) => return failed(format!("write claim {key}: {e}")),
            // The claim changed since the cycle saw it: read it below.
            Err(None) => {}
        }
        for _ in 0..ATTEMPTS {
            self.throttle.wait().await;
            let mut obj = match api.get(&c.name).await {
                Ok(o) => o,
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    return failed(format!("claim {key} got deleted in the meantime"))
                }
                Err(e) => return failed(format!("get claim {key}: {e}")),
            };
            if obj.metadata.uid.as_deref() != Some(c.uid.as_str())
                || obj.metadata.deletion_timestamp.is_some()
            {
                return failed(format!("claim {key} got deleted in the meantime"));
            }
            if let Some(allocation) = &c.allocation {
                if !obj.data["status"]["allocation"].is_null() {
                    return failed(format!(
                        "claim {key} got allocated elsewhere in the meantime"
                    ));
                }
                let finalizers = obj.metadata.finalizers.get_or_insert_with(Vec::new);
                if !finalizers.iter().any(|f| f == DELETE_PROTECTION) {
                    finalizers.push(DELETE_PROTECTION.into());
                    self.throttle.wait().await;
                    obj = match api.replace(&c.name, &PostParams::default(), &obj).await {
                        Ok(o) => o,
                        Err(kube::Error::Api(e)) if e.code == 409 => continue,
                        Err(e) => return failed(format!("add finalizer to claim {key}: {e}")),
                    };
                }
                let mut a = allocation.clone();
                a["allocationTimestamp"] = json!(now());
                obj.data["status"]["allocation"] = a;
            } else if obj.data["status"]["allocation"].is_null() {
                return failed(format!(
                    "claim {key} got deallocated elsewhere in the meantime"
                ));
            }
            let consumers = &mut obj.data["status"]["reservedFor"];
            if !consumers.is_array() {
                *consumers = json!([]);
            }
            let listed = consumers
                .as_array()
                .is_some_and(|l| l.iter().any(|r| r["uid"] == json!(c.pod_uid)));
            if !listed {
                if let Some(l) = consumers.as_array_mut() {
                    l.push(json!({"resource": "pods", "name": c.pod_name, "uid": c.pod_uid}));
                }
            }
            self.throttle.wait().await;
            match api
                .replace_status(&c.name, &PostParams::default(), &obj)
                .await
            {
                Ok(_) => return BindResult::Bound,
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => {
                    let what = if c.allocation.is_some() {
                        "add allocation and reservation to claim"
                    } else {
                        "add reservation to claim"
                    };
                    return failed(format!("{what} {key}: {e}"));
                }
            }
        }
        failed(format!("claim {key}: conflicts on every attempt"))
    }

    /// The first attempt, against the claim as the cycle saw it: JSON
    /// patches that test its `resourceVersion`, so that nothing is read
    /// first and nothing written over a change. `Err(None)`: the claim
    /// changed (the test failed, a conflict, or it is gone);
    /// `Err(Some(_))`: another error.
    async fn write_as_seen(
        &self,
        api: &Api<DynamicObject>,
        c: &ClaimBinding,
    ) -> Result<(), Option<kube::Error>> {
        let changed = |e: kube::Error| match &e {
            // A failed `test` is 422 (Unprocessable Entity), a conflict
            // 409; a deleted claim (404) is reported by the read below.
            kube::Error::Api(a) if matches!(a.code, 404 | 409 | 422) => None,
            _ => Some(e),
        };
        let mut version = c.resource_version.clone();
        if version.is_empty() {
            return Err(None);
        }
        let test = |version: &str| json!({"op": "test", "path": "/metadata/resourceVersion", "value": version});
        let consumer = json!({"resource": "pods", "name": c.pod_name, "uid": c.pod_uid});
        let status_ops = if let Some(allocation) = &c.allocation {
            if !c.finalizers.iter().any(|f| f == DELETE_PROTECTION) {
                let mut finalizers = c.finalizers.clone();
                finalizers.push(DELETE_PROTECTION.into());
                let ops = json!([test(&version), {"op": "add", "path": "/metadata/finalizers", "value": finalizers}]);
                self.throttle.wait().await;
                let patched = api
                    .patch(
                        &c.name,
                        &PatchParams::default(),
                        &Patch::<Value>::Json(
                            serde_json::from_value(ops)
                                .map_err(|e| Some(kube::Error::SerdeError(e)))?,
                        ),
                    )
                    .await
                    .map_err(changed)?;
                version = patched.metadata.resource_version.unwrap_or_default();
            }
            let mut a = allocation.clone();
            a["allocationTimestamp"] = json!(now());
            // Not allocated when seen, so no consumers and no device
            // statuses (both need an allocation): the whole status.
            json!([test(&version), {"op": "add", "path": "/status", "value": {"allocation": a, "reservedFor": [consumer]}}])
        } else if c.consumers == 0 {
            json!([test(&version), {"op": "add", "path": "/status/reservedFor", "value": [consumer]}])
        } else {
            json!([test(&version), {"op": "add", "path": "/status/reservedFor/-", "value": consumer}])
        };
        let patch =
            serde_json::from_value(status_ops).map_err(|e| Some(kube::Error::SerdeError(e)))?;
        self.throttle.wait().await;
        api.patch_status(
            &c.name,
            &PatchParams::default(),
            &Patch::<Value>::Json(patch),
        )
        .await
        .map_err(changed)?;
        Ok(())
    }

    /// Takes the pod's reservation back from claims it was added to (a
    /// later step of the binding failed): upstream's Unreserve patch.
    pub(super) async fn unreserve_claims(&self, req: &Binding, done: &[&ClaimBinding]) {
        for c in done {
            let api = self.claims_api(&c.namespace).await;
            let patch: Value = json!({
                "metadata": {"uid": c.uid},
                "status": {"reservedFor": [{"$patch": "delete", "uid": c.pod_uid}]},
            });
            self.throttle.wait().await;
            if let Err(e) = api
                .patch_status(&c.name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                tracing::warn!(pod = %req.pod().key(), claim = %format!("{}/{}", c.namespace, c.name), error = %e, "taking the reservation back failed");
            }
        }
    }
}
