//! Setting a scenario up on the API server, and reading back what the
//! scheduler and the PV controller made of it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

use super::scenarios::{Scenario, NS};
use crate::env::*;

/// What happened to a pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Bound(String),
    Unschedulable(String),
}

/// Removes every node and pod, the claims and CSIStorageCapacities in
/// `ns`, and every PV, StorageClass, CSINode and CSIDriver (finalizers
/// included: no protection controller runs).
pub async fn reset_volumes(client: &Client, ns: &str) {
    reset(client, &[ns]).await;
    let strip = json!({"metadata": {"finalizers": null}});
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    for c in claims.list(&ListParams::default()).await.unwrap() {
        let name = c.metadata.name.unwrap();
        let _ = claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(&strip))
            .await;
        let _ = claims.delete(&name, &DeleteParams::default()).await;
    }
    for p in pvs.list(&ListParams::default()).await.unwrap() {
        let name = p.metadata.name.unwrap();
        let _ = pvs
            .patch(&name, &PatchParams::default(), &Patch::Merge(&strip))
            .await;
        let _ = pvs.delete(&name, &DeleteParams::default()).await;
    }
    let classes: Api<StorageClass> = Api::all(client.clone());
    let _ = classes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let csi_nodes: Api<CSINode> = Api::all(client.clone());
    let _ = csi_nodes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let drivers: Api<CSIDriver> = Api::all(client.clone());
    let _ = drivers
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let capacities: Api<CSIStorageCapacity> = Api::namespaced(client.clone(), ns);
    let _ = capacities
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    wait_until("volume cleanup", Duration::from_secs(60), || async {
        let lp = ListParams::default();
        claims.list(&lp).await.is_ok_and(|l| l.items.is_empty())
            && drivers.list(&lp).await.is_ok_and(|l| l.items.is_empty())
            && capacities.list(&lp).await.is_ok_and(|l| l.items.is_empty())
            && pvs.list(&lp).await.is_ok_and(|l| l.items.is_empty())
            && classes.list(&lp).await.is_ok_and(|l| l.items.is_empty())
            && csi_nodes.list(&lp).await.is_ok_and(|l| l.items.is_empty())
    })
    .await;
}

/// Creates any object of the scenarios from its JSON.
pub async fn create(client: &Client, obj: &Value) -> Value {
    let api_version = obj["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap());
    let ar = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    let created = api
        .create(&PostParams::default(), &o)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", obj["metadata"]));
    serde_json::to_value(created).unwrap()
}

/// Nodes and volume objects, then waits until the PV controller has seen
/// every PV (`Available` or `Bound`) and bound `bound_first`.
pub async fn set_up(client: &Client, s: &Scenario) {
    for n in &s.nodes {
        let node: Node = serde_json::from_value(n.clone()).unwrap();
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
    }
    for o in &s.objects {
        create(client, o).await;
    }
    wait_for_pv_controller(client, NS, &s.bound_first).await;
}

/// Waits until the PV controller has seen every PV (`Available` or
/// `Bound`) and bound the claims `bound_first` of `ns`.
pub async fn wait_for_pv_controller(client: &Client, ns: &str, bound_first: &[&str]) {
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    wait_until("the PV controller", Duration::from_secs(60), || async {
        let pv_ready = pvs.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items.iter().all(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                matches!(phase, Some("Available" | "Bound"))
            })
        });
        let mut bound = true;
        for c in bound_first {
            bound &= claims
                .get(c)
                .await
                .ok()
                .and_then(|c| c.status?.phase)
                .as_deref()
                == Some("Bound");
        }
        pv_ready && bound
    })
    .await;
}

/// The scheduler's first verdict on a pod: bound (once its claims are
/// bound too), or its FailedScheduling message.
pub async fn outcome(client: &Client, pod: &Value, log: &dyn Fn() -> String) -> Outcome {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let failed =
        ListParams::default().fields(&format!("involvedObject.uid={uid},reason=FailedScheduling"));
    let start = Instant::now();
    loop {
        if let Ok(l) = events.list(&failed).await {
            if let Some(e) = l.items.into_iter().next() {
                return Outcome::Unschedulable(e.message.unwrap_or_default());
            }
        }
        if let Ok(p) = pods.get(name).await {
            if let Some(node) = p.spec.and_then(|s| s.node_name) {
                return Outcome::Bound(node);
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no verdict on {NS}/{name}; the scheduler's log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each PV's claim (`namespace/name`, if bound or pre-bound) and each
/// claim's volume.
pub struct Bindings {
    pub pv_claims: BTreeMap<String, Option<String>>,
    pub claim_volumes: BTreeMap<String, Option<String>>,
    /// PV -> the hostnames its node affinity allows (None: any node).
    pub pv_nodes: BTreeMap<String, Option<Vec<String>>>,
}

pub async fn bindings(client: &Client) -> Bindings {
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default();
    let mut out = Bindings {
        pv_claims: BTreeMap::new(),
        claim_volumes: BTreeMap::new(),
        pv_nodes: BTreeMap::new(),
    };
    for p in pvs.list(&lp).await.unwrap() {
        let name = p.metadata.name.clone().unwrap();
        let spec = p.spec.unwrap_or_default();
        let claim = spec.claim_ref.map(|r| {
            format!(
                "{}/{}",
                r.namespace.unwrap_or_default(),
                r.name.unwrap_or_default()
            )
        });
        let hosts = spec.node_affinity.and_then(|a| a.required).map(|r| {
            r.node_selector_terms
                .iter()
                .flat_map(|t| t.match_expressions.iter().flatten())
                .flat_map(|e| e.values.clone().unwrap_or_default())
                .collect()
        });
        out.pv_claims.insert(name.clone(), claim);
        out.pv_nodes.insert(name, hosts);
    }
    for c in claims.list(&lp).await.unwrap() {
        let key = format!("{NS}/{}", c.metadata.name.unwrap());
        let volume = c.spec.and_then(|s| s.volume_name).filter(|v| !v.is_empty());
        out.claim_volumes.insert(key, volume);
    }
    out
}

/// Every PV bound to at most one claim, every claim to at most one PV,
/// and both sides agreeing; every bound pod's claims bound to PVs its
/// node may use.
pub fn check_bindings(
    b: &Bindings,
    pods: &[Value],
    outcomes: &BTreeMap<String, Outcome>,
) -> Result<(), String> {
    let mut users: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (claim, volume) in &b.claim_volumes {
        if let Some(v) = volume {
            users.entry(v).or_default().push(claim);
        }
    }
    for (pv, claims) in &users {
        if claims.len() > 1 {
            return Err(format!(
                "PV {pv} is the volume of several claims: {claims:?}"
            ));
        }
        let bound = b.pv_claims.get(*pv).cloned().flatten();
        if bound.as_deref() != Some(claims[0]) {
            return Err(format!(
                "claim {} names PV {pv}, whose claimRef is {bound:?}",
                claims[0]
            ));
        }
    }
    for p in pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        let Some(Outcome::Bound(node)) = outcomes.get(name) else {
            continue;
        };
        for v in p["spec"]["volumes"].as_array().unwrap() {
            let claim = format!(
                "{NS}/{}",
                v["persistentVolumeClaim"]["claimName"].as_str().unwrap()
            );
            let Some(Some(pv)) = b.claim_volumes.get(&claim) else {
                return Err(format!(
                    "pod {name} on {node} runs with unbound claim {claim}"
                ));
            };
            if let Some(Some(hosts)) = b.pv_nodes.get(pv) {
                if !hosts.contains(node) {
                    return Err(format!("pod {name} on {node} uses PV {pv} of {hosts:?}"));
                }
            }
        }
    }
    Ok(())
}
