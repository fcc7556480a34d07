//! What PodTopologySpread's default constraints spread a pod by (upstream's
//! `helper.DefaultSelector`): the selectors of the Services that select
//! the pod, and of the ReplicationController, ReplicaSet or StatefulSet
//! that controls it.

use std::collections::{BTreeMap, HashMap};

use super::constraints::SpreadConstraint;
use super::pod::Pod;
use super::selector::{LabelSelector, Requirement, SelectorOp};

/// A controller kind whose selector counts (upstream's `rcKind`, `rsKind`,
/// `ssKind`, matched on the owner reference's group and kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl ControllerKind {
    /// The kind an owner reference (`apiVersion`, `kind`) names, if it is
    /// one of the three at the versions upstream compares with.
    pub fn of_owner(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("v1", "ReplicationController") => Some(Self::ReplicationController),
            ("apps/v1", "ReplicaSet") => Some(Self::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(Self::StatefulSet),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReplicationController => "ReplicationController",
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
        }
    }
}

/// The Services' and controllers' selectors of the cluster.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Workloads {
    /// namespace -> Service name -> `spec.selector` (Services without a
    /// selector are not kept).
    services: HashMap<String, BTreeMap<String, BTreeMap<String, String>>>,
    /// (namespace, kind, name) -> selector.
    controllers: HashMap<(String, ControllerKind, String), LabelSelector>,
}

impl Workloads {
    /// Adds or replaces a Service; `None` (no selector) removes it.
    pub fn set_service(
        &mut self,
        namespace: &str,
        name: &str,
        selector: Option<BTreeMap<String, String>>,
    ) {
        match selector {
            Some(s) => {
                self.services
                    .entry(namespace.to_string())
                    .or_default()
                    .insert(name.to_string(), s);
            }
            None => self.remove_service(namespace, name),
        }
    }

    pub fn remove_service(&mut self, namespace: &str, name: &str) {
        if let Some(m) = self.services.get_mut(namespace) {
            m.remove(name);
            if m.is_empty() {
                self.services.remove(namespace);
            }
        }
    }

    /// Adds or replaces a controller's selector; `None` (a selector that
    /// does not parse, which upstream skips) removes it.
    pub fn set_controller(
        &mut self,
        namespace: &str,
        kind: ControllerKind,
        name: &str,
        selector: Option<LabelSelector>,
    ) {
        let key = (namespace.to_string(), kind, name.to_string());
        match selector {
            Some(s) => {
                self.controllers.insert(key, s);
            }
            None => {
                self.controllers.remove(&key);
            }
        }
    }

    pub fn remove_controller(&mut self, namespace: &str, kind: ControllerKind, name: &str) {
        self.controllers
            .remove(&(namespace.to_string(), kind, name.to_string()));
    }

    /// After a relist of Services: keeps the `namespace/name`s seen.
    pub fn retain_services(&mut self, keep: impl Fn(&str, &str) -> bool) {
        for (ns, m) in self.services.iter_mut() {
            m.retain(|name, _| keep(ns, name));
        }
        self.services.retain(|_, m| !m.is_empty());
    }

    /// After a relist of one controller kind: keeps the `namespace/name`s
    /// seen.
    pub fn retain_controllers(&mut self, kind: ControllerKind, keep: impl Fn(&str, &str) -> bool) {
        self.controllers
            .retain(|(ns, k, name), _| *k != kind || keep(ns, name));
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.controllers.is_empty()
    }

    /// Upstream's `DefaultSelector`: the union of the selectors of the
    /// pod's namespace's Services that select it, and of its controller
    /// (by its controller owner reference). Empty when there are none.
    pub fn default_selector(&self, pod: &Pod) -> LabelSelector {
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        if let Some(services) = self.services.get(&pod.namespace) {
            for selector in services.values() {
                if selector
                    .iter()
                    .all(|(k, v)| pod.labels.get(k).is_some_and(|pv| pv == v))
                {
                    labels.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
        let owner = pod
            .owner
            .as_ref()
            .and_then(|o| Some((ControllerKind::of_owner(&o.api_version, &o.kind)?, &o.name)));
        let mut extra = Vec::new();
        if let Some((kind, name)) = owner {
            let key = (pod.namespace.clone(), kind, name.clone());
            if let Some(sel) = self.controllers.get(&key) {
                match kind {
                    // A ReplicationController's selector is a label map,
                    // merged as the Services' are.
                    ControllerKind::ReplicationController => {
                        for r in &sel.requirements {
                            if let [v] = r.values.as_slice() {
                                labels.insert(r.key.clone(), v.clone());
                            }
                        }
                    }
                    _ => extra.extend(sel.requirements.iter().cloned()),
                }
            }
        }
        let mut requirements: Vec<Requirement> = labels
            .into_iter()
            .map(|(key, v)| Requirement {
                key,
                op: SelectorOp::In,
                values: vec![v],
            })
            .collect();
        requirements.extend(extra);
        LabelSelector { requirements }
    }
}

/// `PodTopologySpreadArgs.defaultConstraints` (a JSON list of
/// `topologySpreadConstraints` entries), validated as a pod's are plus
/// upstream's rules for defaults: no `labelSelector` (it is deduced per
/// pod), no two with the same `topologyKey` and `whenUnsatisfiable`. The
/// error names the entry's field.
pub fn default_spread_constraints(
    list: &serde_json::Value,
) -> Result<Vec<SpreadConstraint>, String> {
    let items = list
        .as_array()
        .ok_or_else(|| "defaultConstraints: expected an array".to_string())?;
    for (i, c) in items.iter().enumerate() {
        if c.get("labelSelector").is_some() {
            return Err(format!(
                "defaultConstraints[{i}].labelSelector: must not be set: default constraints spread \
                 by the pod's Services and controller"
            ));
        }
    }
    let spec: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(
        serde_json::json!({"containers": [], "topologySpreadConstraints": list}),
    )
    .map_err(|e| format!("defaultConstraints: {e}"))?;
    let out = super::pod_spec::spread(&spec, &Default::default()).map_err(|(field, cause)| {
        format!(
            "{}: {cause}",
            field.replacen("spec.topologySpreadConstraints", "defaultConstraints", 1)
        )
    })?;
    for (i, c) in out.iter().enumerate() {
        if out[..i].iter().any(|p| {
            p.topology_key == c.topology_key && p.when_unsatisfiable == c.when_unsatisfiable
        }) {
            return Err(format!(
                "defaultConstraints[{i}]: duplicate topologyKey {:?} with whenUnsatisfiable {:?}",
                c.topology_key, c.when_unsatisfiable
            ));
        }
    }
    Ok(out)
}
