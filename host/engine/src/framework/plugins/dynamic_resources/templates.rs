//! Claims made from ResourceClaimTemplates, as kube-controller-manager's
//! resourceclaim controller makes them (`pkg/controller/resourceclaim`),
//! for `simulate`, which has no controller: one claim per pod and pod
//! claim, owned by the pod, with the template's labels, annotations and
//! spec, recorded in the pod's `status.resourceClaimStatuses`. The
//! controller names a claim `<pod>-<pod claim>-<random suffix>`; here it is
//! `<pod>-<pod claim>` (a run must be reproducible).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::store::RESOURCE_CLAIM_TEMPLATE;
use crate::framework::objects::object_key;
use crate::model::dra::to_v1;
use crate::model::Pod;

/// The annotation the controller puts on the claims it makes.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// The claims of the pending `pods` that name a template and have no claim
/// yet; the pods' statuses name them.
pub fn claims_from_templates(pods: &mut [Pod], templates: &[(&str, &Value)]) -> Vec<Value> {
    let by_key: HashMap<String, Value> = templates
        .iter()
        .map(|(version, t)| {
            let v1 = to_v1(RESOURCE_CLAIM_TEMPLATE.kind, version, (*t).clone());
            (object_key(&RESOURCE_CLAIM_TEMPLATE, t), v1)
        })
        .collect();
    let mut out = Vec::new();
    for pod in pods.iter_mut().filter(|p| p.node_name.is_none()) {
        for pc in &pod.resource_claims {
            let Some(template) = &pc.template else {
                continue;
            };
            if pc.claim.is_some() || pod.claim_statuses.contains_key(&pc.name) {
                continue;
            }
            let Some(t) = by_key.get(&format!("{}/{template}", pod.namespace)) else {
                // Upstream waits for the template; so does the pod here.
                continue;
            };
            let name = format!("{}-{}", pod.name, pc.name);
            let mut annotations = t["spec"]["metadata"]["annotations"].clone();
            if !annotations.is_object() {
                annotations = json!({});
            }
            annotations[POD_CLAIM_NAME] = json!(pc.name);
            out.push(json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": name,
                    "namespace": pod.namespace,
                    "uid": format!("{}/{name}", pod.namespace),
                    "labels": t["spec"]["metadata"]["labels"],
                    "annotations": annotations,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                        "uid": pod.uid, "controller": true, "blockOwnerDeletion": true}],
                },
                "spec": t["spec"]["spec"],
            }));
        }
        for pc in &pod.resource_claims {
            if pc.template.is_some() && !pod.claim_statuses.contains_key(&pc.name) {
                let name = format!("{}-{}", pod.name, pc.name);
                if out.iter().any(|c| c["metadata"]["name"] == json!(name)) {
                    pod.claim_statuses.insert(pc.name.clone(), Some(name));
                }
            }
        }
    }
    out
}
