//! The scheduler's view of a Node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

use super::resources::{Resources, PODS};
use super::{validation, ModelError, TaintEffect};
use crate::escape;

/// The taint `spec.unschedulable` stands for (upstream's
/// `TaintNodeUnschedulable`).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl std::fmt::Display for Taint {
    /// kube-scheduler's rendering in "untolerated taint {key: value}".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{{}: {}}}", self.key, self.value)
    }
}

/// A node as the framework uses it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub allocatable: Resources,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    /// The images the kubelet reports (`status.images`): every name of
    /// each, with its size in bytes (ImageLocality).
    pub images: BTreeMap<String, i64>,
    /// `status.declaredFeatures`: the features its kubelet declares
    /// (NodeDeclaredFeatures), as listed.
    pub declared_features: Vec<String>,
}

impl Node {
    pub fn from_k8s(node: &k8s::Node) -> Result<Self, ModelError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let err = |field: &str, cause: String| ModelError {
            object: format!("Node {}", escape::name(&name)),
            field: field.to_string(),
            cause,
        };
        validation::node(node).map_err(|(field, cause)| err(&field, cause))?;
        let spec = node.spec.clone().unwrap_or_default();
        let mut taints = Vec::new();
        for (i, t) in spec.taints.iter().flatten().enumerate() {
            let effect = TaintEffect::parse(&t.effect)
                .map_err(|c| err(&format!("spec.taints[{i}].effect"), c))?;
            taints.push(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            });
        }
        let stated = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let mut allocatable = match stated {
            Some(a) => Resources::from_k8s(a)
                .map_err(|(res, e)| err(&format!("status.allocatable.{res}"), e.to_string()))?,
            None => Resources::default(),
        };
        if !stated.is_some_and(|a| a.contains_key(PODS)) {
            // A node that states no pod capacity gets kubelet's default;
            // one that states 0 takes no pods.
            allocatable.set(PODS, 110);
        }
        let mut images = BTreeMap::new();
        for image in node
            .status
            .as_ref()
            .and_then(|s| s.images.as_ref())
            .into_iter()
            .flatten()
        {
            let size = image.size_bytes.unwrap_or(0).max(0);
            for n in image.names.iter().flatten() {
                images.insert(n.clone(), size);
            }
        }
        Ok(Self {
            name: name.clone(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            annotations: node.metadata.annotations.clone().unwrap_or_default(),
            allocatable,
            taints,
            unschedulable: spec.unschedulable.unwrap_or(false),
            images,
            declared_features: node
                .status
                .as_ref()
                .and_then(|s| s.declared_features.clone())
                .unwrap_or_default(),
        })
    }
}
