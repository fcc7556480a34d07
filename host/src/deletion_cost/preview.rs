//! `wasmsched scale-down-preview`: which pods the ReplicaSet controller
//! would delete to reach a replica count, in order, and the rule that put
//! each pod before the next.

use std::path::PathBuf;

use comfy_table::{Cell, Table};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::facts::PodFacts;
use super::ranking::{self, Decision};
use super::workload::{Inventory, ResolvedReplicaSet};
use crate::manifest::{self, ManifestError};

/// Upstream `burstReplicas`: the most pods one ReplicaSet sync deletes.
pub const BURST_REPLICAS: usize = 500;

/// One pod in the order.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewPod {
    /// 1-based position in the deletion order.
    pub position: usize,
    pub pod: String,
    pub node: Option<String>,
    pub phase: String,
    pub ready: bool,
    pub deletion_cost: i32,
    /// Active pods of the workload on the pod's node (rule 5).
    pub colocated: usize,
    pub restarts: u32,
    pub age: Option<String>,
    pub deleted: bool,
    /// Why this pod sorts before the next one (none for the last).
    pub before_next: Option<Decision>,
}

/// The answer for one ReplicaSet and target.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub workload: String,
    /// Active pods of the ReplicaSet (not terminating, not finished).
    pub active: usize,
    pub target: u32,
    /// Pods deleted by the next sync.
    pub deletes: usize,
    /// The time the ages are computed at (RFC 3339).
    pub now: String,
    pub pods: Vec<PreviewPod>,
    pub notes: Vec<String>,
}

/// Orders the active pods of `rs` as the ReplicaSet controller does at
/// `now` and marks the ones a scale-down to `target` replicas deletes.
pub fn preview(rs: &ResolvedReplicaSet, target: u32, now: Timestamp) -> Preview {
    let active: Vec<&PodFacts> = rs.pods.iter().copied().filter(|p| p.active()).collect();
    let inactive = rs.pods.len() - active.len();
    let mut notes = Vec::new();
    let diff = active.len().saturating_sub(target as usize);
    let deletes = diff.min(BURST_REPLICAS);
    if diff > BURST_REPLICAS {
        notes.push(format!(
            "the controller deletes at most {BURST_REPLICAS} pods per sync; the other {} go in later syncs, ordered again then",
            diff - BURST_REPLICAS
        ));
    }
    if deletes > 0 && deletes == active.len() {
        notes.push("every pod is deleted: the controller does not sort them".into());
    }
    if inactive > 0 {
        notes.push(format!(
            "{inactive} terminating or finished pod(s) are not counted and not listed"
        ));
    }
    if let Some(r) = rs.replicas {
        if r < 0 || r as usize != active.len() {
            notes.push(format!(
                "spec.replicas is {r} while {} pods are active: the ReplicaSet controller is catching up",
                active.len()
            ));
        }
    }
    let ranked = ranking::rank(&active, &rs.related);
    let order = ranking::deletion_order(ranked, now);
    let pods = order
        .iter()
        .enumerate()
        .map(|(i, r)| PreviewPod {
            position: i + 1,
            pod: r.pod.name.clone(),
            node: r.pod.node.clone(),
            phase: r.pod.phase.as_str().to_string(),
            ready: r.pod.ready,
            deletion_cost: r.pod.deletion_cost(),
            colocated: r.colocated,
            restarts: r.pod.restarts.max_regular,
            age: r.pod.created.map(|c| ranking::age(c, now)),
            deleted: i < deletes,
            before_next: order
                .get(i + 1)
                .map(|next| ranking::compare(r, next, now).1),
        })
        .collect();
    Preview {
        workload: rs.label(),
        active: active.len(),
        target,
        deletes,
        now: now.to_string(),
        pods,
        notes,
    }
}

impl Preview {
    /// The pods deleted, in order.
    pub fn deleted(&self) -> Vec<&str> {
        self.pods
            .iter()
            .filter(|p| p.deleted)
            .map(|p| p.pod.as_str())
            .collect()
    }

    pub fn table(&self) -> String {
        let mut out = if self.deletes == 0 {
            format!(
                "{}: {} active pod(s), target {}: nothing is deleted. Current order:\n",
                self.workload, self.active, self.target
            )
        } else {
            format!(
                "{}: {} active pod(s), target {}: the ReplicaSet controller deletes {}, in this order:\n",
                self.workload, self.active, self.target, self.deletes
            )
        };
        let mut t = Table::new();
        t.set_header(vec![
            "#",
            "POD",
            "ACTION",
            "NODE",
            "PHASE",
            "READY",
            "COST",
            "ON NODE",
            "RESTARTS",
            "AGE",
            "BEFORE THE NEXT POD BECAUSE",
        ]);
        for p in &self.pods {
            let why = match &p.before_next {
                None => String::new(),
                Some(d) => match d.rule {
                    Some(rule) => format!("{rule}: {}", d.detail),
                    None => d.detail.clone(),
                },
            };
            t.add_row(vec![
                Cell::new(p.position),
                Cell::new(&p.pod),
                Cell::new(if p.deleted { "delete" } else { "keep" }),
                Cell::new(p.node.as_deref().unwrap_or("-")),
                Cell::new(if p.phase.is_empty() { "-" } else { &p.phase }),
                Cell::new(if p.ready { "yes" } else { "no" }),
                Cell::new(p.deletion_cost),
                Cell::new(p.colocated),
                Cell::new(p.restarts),
                Cell::new(p.age.as_deref().unwrap_or("-")),
                Cell::new(why),
            ]);
        }
        out.push_str(&format!("{}\n", crate::output::plain(t)));
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// Deployments, ReplicaSets and Pods from manifest files (other kinds are
/// skipped).
pub fn load_manifests(paths: &[PathBuf]) -> Result<Inventory, ManifestError> {
    let mut inventory = Inventory::default();
    for o in manifest::raw_objects(paths)? {
        match o.kind.as_str() {
            "Deployment" => inventory.deployments.push(o.decode::<Deployment>()?),
            "ReplicaSet" => inventory.replica_sets.push(o.decode::<ReplicaSet>()?),
            "Pod" => inventory.pods.push(PodFacts::from_k8s(&o.decode::<Pod>()?)),
            _ => {}
        }
    }
    Ok(inventory)
}

/// [`live`] with a client from `kubeconfig` (or the in-cluster
/// configuration) on a runtime of its own: the `scale-down-preview`
/// command's live mode.
pub fn live_blocking(
    kubeconfig: Option<&std::path::Path>,
    workload: &super::workload::WorkloadRef,
    replicas: u32,
    now: Timestamp,
) -> anyhow::Result<Preview> {
    crate::runtime::tokio_runtime()?.block_on(async {
        let client = crate::runtime::client::client(kubeconfig).await?;
        live(&client, workload, replicas, now).await
    })
}

/// The preview of a live workload (read through `client`).
pub async fn live(
    client: &kube::Client,
    workload: &super::workload::WorkloadRef,
    replicas: u32,
    now: Timestamp,
) -> anyhow::Result<Preview> {
    let inventory = super::cluster::list_namespace(client, &workload.namespace).await?;
    let rs = inventory.resolve(workload)?;
    Ok(preview(&rs, replicas, now))
}
