//! Key interests (contract 0.2): which label and annotation keys a plugin
//! reads; metric interests (0.4): which node metrics. The host sends only
//! those, so a plugin's memory does not grow with annotations it never
//! looks at, and a pass of the node-metrics source costs it only what it
//! reads.

use std::collections::{BTreeMap, HashSet};

use crate::framework::MetricValues;

use super::bindings::types as wit;

/// Which keys of one map a plugin reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeySelector {
    #[default]
    All,
    Keys {
        exact: HashSet<String>,
        /// Keys declared with a trailing `*`, without it.
        prefixes: Vec<String>,
    },
}

impl KeySelector {
    pub fn wants(&self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::Keys { exact, prefixes } => {
                prefixes.iter().any(|p| key.starts_with(p.as_str())) || exact.contains(key)
            }
        }
    }

    /// The wanted entries of `map`, sorted by key.
    pub fn select(&self, map: &BTreeMap<String, String>) -> Vec<(String, String)> {
        match self {
            Self::All => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ if self.is_none() => Vec::new(),
            _ => map
                .iter()
                .filter(|(k, _)| self.wants(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

impl KeySelector {
    /// Selects from names as `metric-interests` declares them (a trailing
    /// `*` makes a prefix; an empty list selects nothing).
    pub fn from_names(names: Vec<String>) -> Self {
        let (prefixes, exact): (Vec<String>, Vec<String>) =
            names.into_iter().partition(|k| k.ends_with('*'));
        Self::Keys {
            exact: exact.into_iter().collect(),
            prefixes: prefixes
                .into_iter()
                .map(|p| p.trim_end_matches('*').to_string())
                .collect(),
        }
    }

    /// Whether it selects nothing at all.
    pub fn is_none(&self) -> bool {
        matches!(self, Self::Keys { exact, prefixes } if exact.is_empty() && prefixes.is_empty())
    }

    /// Appends the values of the wanted entries of a node's metrics (in
    /// their order) to `out`.
    pub fn select_values(&self, metrics: &MetricValues, out: &mut Vec<f64>) {
        match self {
            Self::All => out.extend(metrics.iter().map(|(_, v)| v)),
            _ => out.extend(
                metrics
                    .iter()
                    .filter(|(k, _)| self.wants(k))
                    .map(|(_, v)| v),
            ),
        }
    }

    /// The wanted entries of a node's metrics (kept in their order).
    pub fn select_metrics(&self, metrics: &MetricValues) -> Vec<(String, f64)> {
        match self {
            Self::All => metrics.to_vec(),
            _ if self.is_none() => Vec::new(),
            _ => metrics
                .iter()
                .filter(|(k, _)| self.wants(k))
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }
}

impl From<wit::KeySelector> for KeySelector {
    fn from(k: wit::KeySelector) -> Self {
        match k {
            wit::KeySelector::All => Self::All,
            wit::KeySelector::None => Self::Keys {
                exact: HashSet::new(),
                prefixes: Vec::new(),
            },
            wit::KeySelector::Keys(keys) => Self::from_names(keys),
        }
    }
}

/// What a plugin reads of pods' and nodes' labels and annotations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interests {
    pub pod_labels: KeySelector,
    pub pod_annotations: KeySelector,
    pub node_labels: KeySelector,
    pub node_annotations: KeySelector,
    /// The node metrics it reads, when it exports `metric-interests`
    /// (0.4): then a metrics-only change reaches it through `set-metrics`
    /// with these alone. `None`: every metric, and such a change as a
    /// whole `node-set`, as before 0.4.
    pub metrics: Option<KeySelector>,
}

impl From<wit::KeyInterests> for Interests {
    fn from(k: wit::KeyInterests) -> Self {
        Self {
            pod_labels: k.pod_labels.into(),
            pod_annotations: k.pod_annotations.into(),
            node_labels: k.node_labels.into(),
            node_annotations: k.node_annotations.into(),
            metrics: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_prefixes_select_entries() {
        let sel: KeySelector =
            wit::KeySelector::Keys(vec!["app".into(), "network.wasmsched.io/*".into()]).into();
        let map: BTreeMap<String, String> = [
            ("app", "web"),
            ("network.wasmsched.io/peers", "x"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            sel.select(&map),
            vec![
                ("app".to_string(), "web".to_string()),
                ("network.wasmsched.io/peers".to_string(), "x".to_string())
            ]
        );
        let none: KeySelector = wit::KeySelector::None.into();
        assert!(none.select(&map).is_empty());
        assert_eq!(KeySelector::All.select(&map).len(), 3);
    }
}
