//! Namespaces and their labels, for the `namespaceSelector` of pod
//! (anti-)affinity terms (upstream's `GetNamespaceLabelsSnapshot`).

use std::collections::{BTreeMap, HashMap};

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// The cluster's namespaces by name, with their labels.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Namespaces {
    labels: HashMap<String, BTreeMap<String, String>>,
}

impl Namespaces {
    /// The labels of `name`; none when the namespace is unknown (upstream
    /// matches an unknown namespace's labels as empty, so only an empty
    /// selector selects it).
    pub fn labels(&self, name: &str) -> &BTreeMap<String, String> {
        self.labels.get(name).unwrap_or(&NO_LABELS)
    }

    /// Adds or replaces a namespace.
    pub fn set(&mut self, name: &str, labels: BTreeMap<String, String>) {
        self.labels.insert(name.to_string(), labels);
    }

    pub fn contains(&self, name: &str) -> bool {
        self.labels.contains_key(name)
    }

    pub fn remove(&mut self, name: &str) {
        self.labels.remove(name);
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The names, for a relist that drops the namespaces not seen.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.labels.retain(|n, _| keep(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_namespaces_have_no_labels() {
        let mut ns = Namespaces::default();
        ns.set("team-a", BTreeMap::from([("team".into(), "a".into())]));
        assert_eq!(
            ns.labels("team-a").get("team").map(String::as_str),
            Some("a")
        );
        assert!(ns.labels("elsewhere").is_empty());
        ns.remove("team-a");
        assert!(ns.labels("team-a").is_empty());
    }
}
