//! The scheduling constraints of a pod's spec, parsed and checked:
//! tolerations, node affinity, inter-pod affinity and topology spread.
//! Errors are `(field path, cause)`; [`super::pod::Pod::from_k8s`] names
//! the pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

use super::constraints::{
    NodeAffinity, PodAffinity, PodAffinityTerm, SpreadConstraint, Toleration, TolerationOp,
    WhenUnsatisfiable,
};
use super::selector::{LabelSelector, NodeSelectorTerm};
use super::validation::Invalid;
use super::TaintEffect;

/// A weight of a preferred term: 1..=100.
fn weight(w: i32, path: &str) -> Result<(), Invalid> {
    if (1..=100).contains(&w) {
        return Ok(());
    }
    Err((
        format!("{path}.weight"),
        format!("must be in 1..100, got {w}"),
    ))
}

/// `spec.tolerations`.
pub fn tolerations(spec: &k8s::PodSpec) -> Result<Vec<Toleration>, Invalid> {
    let mut out = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let path = format!("spec.tolerations[{i}]");
        let op = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => TolerationOp::Equal,
            Some("Exists") => TolerationOp::Exists,
            Some(o) => {
                return Err((
                    format!("{path}.operator"),
                    format!("unknown operator {o:?}"),
                ))
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(TaintEffect::parse(e).map_err(|c| (format!("{path}.effect"), c))?),
        };
        let key = t.key.clone().filter(|k| !k.is_empty());
        if key.is_none() && op != TolerationOp::Exists {
            return Err((
                format!("{path}.operator"),
                "an empty key needs operator Exists".into(),
            ));
        }
        out.push(Toleration {
            key,
            op,
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }
    Ok(out)
}

/// `spec.affinity.nodeAffinity`.
pub fn node_affinity(na: Option<&k8s::NodeAffinity>) -> Result<NodeAffinity, Invalid> {
    let mut out = NodeAffinity::default();
    let Some(na) = na else {
        return Ok(out);
    };
    let base = "spec.affinity.nodeAffinity";
    if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
        let mut terms = Vec::new();
        for (i, t) in req.node_selector_terms.iter().enumerate() {
            terms.push(NodeSelectorTerm::parse(t).map_err(|c| {
                let path = format!(
                    "{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
                );
                (path, c)
            })?);
        }
        out.required = Some(terms);
    }
    for (i, p) in na
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .enumerate()
    {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        weight(p.weight, &path)?;
        let term = NodeSelectorTerm::parse(&p.preference)
            .map_err(|c| (format!("{path}.preference"), c))?;
        out.preferred.push((p.weight, term));
    }
    Ok(out)
}

/// One pod (anti-)affinity term of a pod in `namespace`.
fn pod_affinity_term(
    t: &k8s::PodAffinityTerm,
    path: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<PodAffinityTerm, Invalid> {
    if t.topology_key.is_empty() {
        return Err((format!("{path}.topologyKey"), "must not be empty".into()));
    }
    let selector = t
        .label_selector
        .as_ref()
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|c| (format!("{path}.labelSelector"), c))?
        .map(|s| {
            s.with_label_keys(
                labels,
                t.match_label_keys.as_deref().unwrap_or_default(),
                t.mismatch_label_keys.as_deref().unwrap_or_default(),
            )
        });
    let namespace_selector = t
        .namespace_selector
        .as_ref()
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|c| (format!("{path}.namespaceSelector"), c))?;
    let mut namespaces = t.namespaces.clone().unwrap_or_default();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(namespace.to_string());
    }
    Ok(PodAffinityTerm {
        selector,
        namespaces,
        namespace_selector,
        topology_key: t.topology_key.clone(),
    })
}

/// The required and preferred terms of a `podAffinity` or
/// `podAntiAffinity` at `base`.
type Terms = (Vec<PodAffinityTerm>, Vec<(i32, PodAffinityTerm)>);

fn terms(
    required: Option<&Vec<k8s::PodAffinityTerm>>,
    preferred: Option<&Vec<k8s::WeightedPodAffinityTerm>>,
    base: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Terms, Invalid> {
    let mut out: Terms = (Vec::new(), Vec::new());
    for (i, t) in required.into_iter().flatten().enumerate() {
        let path = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.0.push(pod_affinity_term(t, &path, namespace, labels)?);
    }
    for (i, w) in preferred.into_iter().flatten().enumerate() {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        weight(w.weight, &path)?;
        let term = pod_affinity_term(
            &w.pod_affinity_term,
            &format!("{path}.podAffinityTerm"),
            namespace,
            labels,
        )?;
        out.1.push((w.weight, term));
    }
    Ok(out)
}

/// `spec.affinity.podAffinity` and `podAntiAffinity` of a pod in
/// `namespace` (terms without namespaces mean the pod's own).
pub fn pod_affinity(
    aff: Option<&k8s::Affinity>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<PodAffinity, Invalid> {
    let mut out = PodAffinity::default();
    let Some(aff) = aff else {
        return Ok(out);
    };
    if let Some(pa) = &aff.pod_affinity {
        (out.required_affinity, out.preferred_affinity) = terms(
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
            "spec.affinity.podAffinity",
            namespace,
            labels,
        )?;
    }
    if let Some(pa) = &aff.pod_anti_affinity {
        (out.required_anti_affinity, out.preferred_anti_affinity) = terms(
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
            "spec.affinity.podAntiAffinity",
            namespace,
            labels,
        )?;
    }
    Ok(out)
}

/// `spec.topologySpreadConstraints`.
pub fn spread(
    spec: &k8s::PodSpec,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<SpreadConstraint>, Invalid> {
    let mut out = Vec::new();
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.topologySpreadConstraints[{i}]");
        if c.max_skew < 1 {
            return Err((
                format!("{path}.maxSkew"),
                format!("must be at least 1, got {}", c.max_skew),
            ));
        }
        if c.topology_key.is_empty() {
            return Err((format!("{path}.topologyKey"), "must not be empty".into()));
        }
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            o => {
                return Err((
                    format!("{path}.whenUnsatisfiable"),
                    format!("unknown value {o:?}"),
                ))
            }
        };
        let selector = c
            .label_selector
            .as_ref()
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|m| (format!("{path}.labelSelector"), m))?
            .map(|s| {
                s.with_label_keys(
                    labels,
                    c.match_label_keys.as_deref().unwrap_or_default(),
                    &[],
                )
            });
        let policy = |v: Option<&str>, field: &str, default: bool| match v {
            None => Ok(default),
            Some("Honor") => Ok(true),
            Some("Ignore") => Ok(false),
            Some(o) => Err((
                format!("{path}.{field}"),
                format!("unknown value {o:?} (expected Honor or Ignore)"),
            )),
        };
        let honor_node_affinity = policy(
            c.node_affinity_policy.as_deref(),
            "nodeAffinityPolicy",
            true,
        )?;
        let honor_taints = policy(c.node_taints_policy.as_deref(), "nodeTaintsPolicy", false)?;
        if let Some(m) = c.min_domains {
            if m < 1 {
                return Err((
                    format!("{path}.minDomains"),
                    format!("must be at least 1, got {m}"),
                ));
            }
            if when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                return Err((
                    format!("{path}.minDomains"),
                    "may only be set with whenUnsatisfiable: DoNotSchedule".into(),
                ));
            }
        }
        out.push(SpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable,
            selector,
            honor_node_affinity,
            honor_taints,
            min_domains: c.min_domains,
        });
    }
    Ok(out)
}
