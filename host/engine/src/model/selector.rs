//! Label selectors (`metav1.LabelSelector`) and node selector terms
//! (`v1.NodeSelectorTerm`), parsed and validated once so that matching in
//! the hot path cannot fail.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// A label-selector requirement operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Node selectors only: the label parses as an integer greater than the value.
    Gt,
    /// Node selectors only: the label parses as an integer less than the value.
    Lt,
}

/// One `key operator values` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: SelectorOp,
    pub values: Vec<String>,
}

impl Requirement {
    fn parse(key: &str, op: &str, values: &[String], allow_gt_lt: bool) -> Result<Self, String> {
        let op = match op {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            "Gt" if allow_gt_lt => SelectorOp::Gt,
            "Lt" if allow_gt_lt => SelectorOp::Lt,
            other => return Err(format!("unknown operator {other:?}")),
        };
        match op {
            SelectorOp::In | SelectorOp::NotIn if values.is_empty() => {
                return Err(format!("operator {op:?} needs at least one value"))
            }
            SelectorOp::Exists | SelectorOp::DoesNotExist if !values.is_empty() => {
                return Err(format!("operator {op:?} takes no values"))
            }
            SelectorOp::Gt | SelectorOp::Lt
                if values.len() != 1 || values[0].parse::<i64>().is_err() =>
            {
                return Err(format!("operator {op:?} needs exactly one integer value"));
            }
            _ => {}
        }
        Ok(Self {
            key: key.to_string(),
            op,
            values: values.to_vec(),
        })
    }

    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let v = labels.get(&self.key);
        match self.op {
            SelectorOp::In => v.is_some_and(|v| self.values.contains(v)),
            SelectorOp::NotIn => v.is_none_or(|v| !self.values.contains(v)),
            SelectorOp::Exists => v.is_some(),
            SelectorOp::DoesNotExist => v.is_none(),
            SelectorOp::Gt | SelectorOp::Lt => {
                let (Some(v), Ok(bound)) = (v, self.values[0].parse::<i64>()) else {
                    return false;
                };
                let Ok(v) = v.parse::<i64>() else {
                    return false;
                };
                if self.op == SelectorOp::Gt {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }
}

/// A parsed `metav1.LabelSelector`. An empty selector matches everything;
/// an absent one (`None` where it is optional) matches nothing, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    pub fn parse(sel: &meta::LabelSelector) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: k.clone(),
                op: SelectorOp::In,
                values: vec![v.clone()],
            });
        }
        for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
            let values = e.values.clone().unwrap_or_default();
            requirements.push(
                Requirement::parse(&e.key, &e.operator, &values, false)
                    .map_err(|m| format!("matchExpressions[{i}]: {m}"))?,
            );
        }
        Ok(Self { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// A label map's selector (`key In (value)` each), as a
    /// ReplicationController's or Service's `selector` means.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        Self {
            requirements: labels
                .iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    op: SelectorOp::In,
                    values: vec![v.clone()],
                })
                .collect(),
        }
    }

    /// `matchLabelKeys` and `mismatchLabelKeys` merged in, as the API
    /// server merges them (KEP-3633, KEP-3243): `key In (pod's value)` and
    /// `key NotIn (pod's value)` for each key the pod has (keys it lacks
    /// are ignored). A selector the server already merged is unchanged in
    /// meaning (the requirements repeat).
    pub fn with_label_keys(
        mut self,
        labels: &BTreeMap<String, String>,
        match_keys: &[String],
        mismatch_keys: &[String],
    ) -> Self {
        for (keys, op) in [
            (match_keys, SelectorOp::In),
            (mismatch_keys, SelectorOp::NotIn),
        ] {
            for k in keys {
                let Some(v) = labels.get(k) else { continue };
                let r = Requirement {
                    key: k.clone(),
                    op,
                    values: vec![v.clone()],
                };
                if !self.requirements.contains(&r) {
                    self.requirements.push(r);
                }
            }
        }
        self
    }
}

/// A parsed `v1.NodeSelectorTerm`: all expressions and fields must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
    /// Requirements on node fields; only `metadata.name` exists upstream.
    pub match_fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    pub fn parse(term: &k8s::NodeSelectorTerm) -> Result<Self, String> {
        let mut t = Self::default();
        for (i, e) in term.match_expressions.iter().flatten().enumerate() {
            let values = e.values.clone().unwrap_or_default();
            t.match_expressions.push(
                Requirement::parse(&e.key, &e.operator, &values, true)
                    .map_err(|m| format!("matchExpressions[{i}]: {m}"))?,
            );
        }
        for (i, e) in term.match_fields.iter().flatten().enumerate() {
            if e.key != "metadata.name" {
                return Err(format!(
                    "matchFields[{i}]: unsupported field {:?} (only metadata.name)",
                    e.key
                ));
            }
            let values = e.values.clone().unwrap_or_default();
            t.match_fields.push(
                Requirement::parse(&e.key, &e.operator, &values, false)
                    .map_err(|m| format!("matchFields[{i}]: {m}"))?,
            );
        }
        Ok(t)
    }

    /// Upstream: a term with no requirements matches no node.
    pub fn matches(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        let fields = BTreeMap::from([("metadata.name".to_string(), node_name.to_string())]);
        self.match_expressions.iter().all(|r| r.matches(labels))
            && self.match_fields.iter().all(|r| r.matches(&fields))
    }
}

/// Terms are ORed.
pub fn any_term_matches(
    terms: &[NodeSelectorTerm],
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    terms.iter().any(|t| t.matches(node_name, labels))
}
