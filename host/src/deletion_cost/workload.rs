//! Deployments, ReplicaSets and their pods: which pods a ReplicaSet
//! controls, which pods are "related" (upstream: the pods of every
//! ReplicaSet of the same Deployment), and which ReplicaSets opted in to
//! the deletion-cost controller.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::OptIn;
use super::facts::{controller_ref, ControllerRef, PodFacts};

/// A workload named on the command line: `NAMESPACE/KIND/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRef {
    pub namespace: String,
    pub kind: WorkloadKind,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Deployment,
    ReplicaSet,
}

impl std::fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}/{}", self.kind, self.namespace, self.name)
    }
}

impl std::str::FromStr for WorkloadRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let [ns, kind, name] = parts[..] else {
            return Err(format!(
                "workload {s:?}: expected NAMESPACE/KIND/NAME, e.g. shop/Deployment/web"
            ));
        };
        let kind = match kind.to_ascii_lowercase().as_str() {
            "deployment" | "deployments" | "deploy" => WorkloadKind::Deployment,
            "replicaset" | "replicasets" | "rs" => WorkloadKind::ReplicaSet,
            _ => {
                return Err(format!(
                    "workload {s:?}: kind {kind:?} is not Deployment or ReplicaSet (pod-deletion-cost applies to ReplicaSet pods only)"
                ))
            }
        };
        if ns.is_empty() || name.is_empty() {
            return Err(format!("workload {s:?}: empty namespace or name"));
        }
        Ok(WorkloadRef {
            namespace: ns.to_string(),
            kind,
            name: name.to_string(),
        })
    }
}

/// Why a workload cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WorkloadError(pub String);

/// The objects a preview or a controller pass works on.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub deployments: Vec<Deployment>,
    pub replica_sets: Vec<ReplicaSet>,
    pub pods: Vec<PodFacts>,
}

fn ns_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// Whether `owner` (a controller reference) points at the object `meta`
/// of `kind`: by UID when both have one, else by name.
fn refers_to(owner: &ControllerRef, kind: &str, meta: &ObjectMeta) -> bool {
    owner.kind == kind
        && match meta.uid.as_deref() {
            Some(uid) if !owner.uid.is_empty() => owner.uid == uid,
            _ => owner.name == name_of(meta),
        }
}

/// One ReplicaSet (possibly known only from its pods' owner references)
/// and the pods that matter for its scale-down.
#[derive(Debug, Clone)]
pub struct ResolvedReplicaSet<'a> {
    pub namespace: String,
    pub name: String,
    /// `spec.replicas`, when the ReplicaSet object is known.
    pub replicas: Option<i32>,
    /// The Deployment owning it, if any.
    pub deployment: Option<String>,
    /// Pods it controls (active or not).
    pub pods: Vec<&'a PodFacts>,
    /// Pods of every ReplicaSet of the same Deployment (its own included).
    pub related: Vec<&'a PodFacts>,
}

impl ResolvedReplicaSet<'_> {
    pub fn label(&self) -> String {
        match &self.deployment {
            Some(d) => format!(
                "ReplicaSet {}/{} (Deployment {d})",
                self.namespace, self.name
            ),
            None => format!("ReplicaSet {}/{}", self.namespace, self.name),
        }
    }
}

impl Inventory {
    fn pods_controlled_by(
        &self,
        namespace: &str,
        rs_name: &str,
        rs: Option<&ReplicaSet>,
    ) -> Vec<&PodFacts> {
        self.pods
            .iter()
            .filter(|p| p.namespace == namespace)
            .filter(|p| match (&p.owner, rs) {
                (Some(o), Some(rs)) => refers_to(o, "ReplicaSet", &rs.metadata),
                (Some(o), None) => o.kind == "ReplicaSet" && o.name == rs_name,
                (None, _) => false,
            })
            .collect()
    }

    fn deployment_of(&self, rs: &ReplicaSet) -> Option<&Deployment> {
        let owner = controller_ref(&rs.metadata)?;
        self.deployments.iter().find(|d| {
            ns_of(&d.metadata) == ns_of(&rs.metadata)
                && refers_to(&owner, "Deployment", &d.metadata)
        })
    }

    /// The ReplicaSets controlled by the same owner as `rs` (upstream
    /// `getReplicaSetsWithSameController`), `rs` included.
    fn siblings<'s>(&'s self, rs: &'s ReplicaSet) -> Vec<&'s ReplicaSet> {
        let Some(owner) = controller_ref(&rs.metadata) else {
            return vec![rs];
        };
        self.replica_sets
            .iter()
            .filter(|o| ns_of(&o.metadata) == ns_of(&rs.metadata))
            .filter(|o| controller_ref(&o.metadata).is_some_and(|c| c == owner))
            .collect()
    }

    /// The ReplicaSet object `namespace/name`, if present.
    pub fn replica_set(&self, namespace: &str, name: &str) -> Option<&ReplicaSet> {
        self.replica_sets
            .iter()
            .find(|r| ns_of(&r.metadata) == namespace && name_of(&r.metadata) == name)
    }

    fn resolve_rs<'s>(&'s self, namespace: &str, name: &str) -> ResolvedReplicaSet<'s> {
        match self.replica_set(namespace, name) {
            Some(rs) => {
                let related = self
                    .siblings(rs)
                    .into_iter()
                    .flat_map(|s| self.pods_controlled_by(namespace, name_of(&s.metadata), Some(s)))
                    .collect();
                ResolvedReplicaSet {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    replicas: rs.spec.replicas,
                    deployment: self
                        .deployment_of(rs)
                        .map(|d| name_of(&d.metadata).to_string())
                        .or_else(|| {
                            controller_ref(&rs.metadata)
                                .filter(|o| o.kind == "Deployment")
                                .map(|o| o.name)
                        }),
                    pods: self.pods_controlled_by(namespace, name, Some(rs)),
                    related,
                }
            }
            None => {
                let pods = self.pods_controlled_by(namespace, name, None);
                ResolvedReplicaSet {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    replicas: None,
                    deployment: None,
                    related: pods.clone(),
                    pods,
                }
            }
        }
    }

    /// The ReplicaSet a scale-down of `target` acts on. A Deployment must
    /// have exactly one ReplicaSet with replicas or pods (mid-rollout, the
    /// Deployment controller scales several proportionally: name one).
    pub fn resolve(&self, target: &WorkloadRef) -> Result<ResolvedReplicaSet<'_>, WorkloadError> {
        let ns = target.namespace.as_str();
        match target.kind {
            WorkloadKind::ReplicaSet => {
                let r = self.resolve_rs(ns, &target.name);
                if r.replicas.is_none() && r.pods.is_empty() {
                    return Err(WorkloadError(format!(
                        "{target}: not found (no such ReplicaSet and no pod it controls)"
                    )));
                }
                Ok(r)
            }
            WorkloadKind::Deployment => {
                let Some(dep) = self
                    .deployments
                    .iter()
                    .find(|d| ns_of(&d.metadata) == ns && name_of(&d.metadata) == target.name)
                else {
                    return Err(WorkloadError(format!("{target}: not found")));
                };
                let owned: Vec<&ReplicaSet> = self
                    .replica_sets
                    .iter()
                    .filter(|rs| ns_of(&rs.metadata) == ns)
                    .filter(|rs| {
                        controller_ref(&rs.metadata)
                            .is_some_and(|o| refers_to(&o, "Deployment", &dep.metadata))
                    })
                    .collect();
                let live: Vec<&ReplicaSet> = owned
                    .iter()
                    .copied()
                    .filter(|rs| {
                        rs.spec.replicas.unwrap_or(1) > 0
                            || self
                                .pods_controlled_by(ns, name_of(&rs.metadata), Some(rs))
                                .iter()
                                .any(|p| p.active())
                    })
                    .collect();
                match live[..] {
                    [rs] => Ok(self.resolve_rs(ns, name_of(&rs.metadata))),
                    [] if owned.is_empty() => Err(WorkloadError(format!(
                        "{target}: no ReplicaSet controlled by it (include the ReplicaSets in the manifests)"
                    ))),
                    [] => Err(WorkloadError(format!(
                        "{target}: none of its ReplicaSets has replicas"
                    ))),
                    _ => Err(WorkloadError(format!(
                        "{target}: {} ReplicaSets have replicas (a rollout in progress scales them proportionally); name one with --workload {ns}/ReplicaSet/NAME: {}",
                        live.len(),
                        live.iter().map(|r| name_of(&r.metadata)).collect::<Vec<_>>().join(", ")
                    ))),
                }
            }
        }
    }

    /// The only ReplicaSet the pods belong to, for a manifest preview
    /// without `--workload`.
    pub fn single_workload(&self) -> Result<WorkloadRef, WorkloadError> {
        let mut owners: BTreeMap<(String, String), ()> = BTreeMap::new();
        for p in &self.pods {
            if let Some(o) = p.owner.as_ref().filter(|o| o.kind == "ReplicaSet") {
                owners.insert((p.namespace.clone(), o.name.clone()), ());
            }
        }
        let keys: Vec<_> = owners.into_keys().collect();
        match &keys[..] {
            [(ns, name)] => Ok(WorkloadRef {
                namespace: ns.clone(),
                kind: WorkloadKind::ReplicaSet,
                name: name.clone(),
            }),
            [] => Err(WorkloadError(
                "no pod controlled by a ReplicaSet in the manifests".into(),
            )),
            many => Err(WorkloadError(format!(
                "pods of {} ReplicaSets; choose one with --workload NAMESPACE/ReplicaSet/NAME: {}",
                many.len(),
                many.iter()
                    .map(|(ns, n)| format!("{ns}/{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The ReplicaSets the controller manages: opted in themselves, or
    /// through their Deployment, or matched by a configured selector.
    pub fn managed<'s>(&'s self, opt_in: &OptIn) -> Vec<ResolvedReplicaSet<'s>> {
        self.replica_sets
            .iter()
            .filter(|rs| {
                opt_in.selects(ns_of(&rs.metadata), &rs.metadata)
                    || self
                        .deployment_of(rs)
                        .is_some_and(|d| opt_in.selects(ns_of(&d.metadata), &d.metadata))
            })
            .map(|rs| self.resolve_rs(ns_of(&rs.metadata), name_of(&rs.metadata)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_workload_refs() {
        let w: WorkloadRef = "shop/Deployment/web".parse().unwrap();
        assert_eq!(w.kind, WorkloadKind::Deployment);
        let w: WorkloadRef = "shop/rs/web-1".parse().unwrap();
        assert_eq!(
            (w.kind, w.name.as_str()),
            (WorkloadKind::ReplicaSet, "web-1")
        );
        let e = "shop/StatefulSet/db".parse::<WorkloadRef>().unwrap_err();
        assert!(
            e.contains("StatefulSet") && e.contains("ReplicaSet pods only"),
            "{e}"
        );
        assert!("web"
            .parse::<WorkloadRef>()
            .unwrap_err()
            .contains("NAMESPACE/KIND/NAME"));
    }
}
