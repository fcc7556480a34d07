//! Key interests (contract 0.2): which label and annotation keys a plugin
//! reads. The host sends only those, so a plugin's memory does not grow
//! with annotations it never looks at.

use std::collections::{BTreeMap, HashSet};

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
                exact.contains(key) || prefixes.iter().any(|p| key.starts_with(p.as_str()))
            }
        }
    }

    /// The wanted entries of `map`, sorted by key.
    pub fn select(&self, map: &BTreeMap<String, String>) -> Vec<(String, String)> {
        match self {
            Self::All => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Self::Keys { exact, prefixes } if exact.is_empty() && prefixes.is_empty() => Vec::new(),
            _ => map
                .iter()
                .filter(|(k, _)| self.wants(k))
                .map(|(k, v)| (k.clone(), v.clone()))
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
            wit::KeySelector::Keys(keys) => {
                let (prefixes, exact): (Vec<String>, Vec<String>) =
                    keys.into_iter().partition(|k| k.ends_with('*'));
                Self::Keys {
                    exact: exact.into_iter().collect(),
                    prefixes: prefixes
                        .into_iter()
                        .map(|p| p.trim_end_matches('*').to_string())
                        .collect(),
                }
            }
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
}

impl From<wit::KeyInterests> for Interests {
    fn from(k: wit::KeyInterests) -> Self {
        Self {
            pod_labels: k.pod_labels.into(),
            pod_annotations: k.pod_annotations.into(),
            node_labels: k.node_labels.into(),
            node_annotations: k.node_annotations.into(),
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
