//! The plugin's resident index of placed pods, kept up to date from the
//! host's deltas (`observe`), so a cycle looks only at the placed pods its
//! pod's peer selectors can match and at the declaring pods whose selectors
//! can match the pod, never at every placed pod.
//!
//! Both directions index by label: a selector requirement `k in (v...)`
//! (or `k=v`) can only match pods with label `k` set to one of the values,
//! and `k` (exists) only pods with label `k`. A selector with neither
//! (only `!=`, `notin`, `!k`) cannot be narrowed and is answered by a scan.
//! Candidates are always a superset of the matches; callers still match
//! the whole selector and the namespaces.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use wasmsched_plugin_sdk::locality::{Location, PeerSpec};
use wasmsched_plugin_sdk::selector::{Op, Selector};
use wasmsched_plugin_sdk::types::{Node, Pod};

/// A placed pod, as the index keeps it.
pub struct Placed {
    pub uid: String,
    pub node: u32,
    pub namespace: String,
    pub labels: Vec<(String, String)>,
    /// Its parsed peers annotation; `None` without one or when invalid.
    pub spec: Option<Rc<PeerSpec>>,
    /// The `(key, value)` slots of `by_declared` it is filed under
    /// (`None` value: an exists requirement).
    declared_keys: Vec<(String, Option<String>)>,
    /// Filed in `declared_unindexed`.
    declared_unindexed: bool,
}

/// Slot numbers of placed pods.
type Slots = HashSet<u32>;

/// Declaring pods filed under one label key.
#[derive(Default)]
struct Declared {
    /// By the value their entry requires.
    by_value: HashMap<String, Slots>,
    /// Their entry requires the key to exist.
    any: Slots,
}

impl Declared {
    fn set(&mut self, value: &Option<String>) -> &mut Slots {
        match value {
            Some(v) => self.by_value.entry(v.clone()).or_default(),
            None => &mut self.any,
        }
    }

    fn unfile(&mut self, value: &Option<String>, slot: u32) {
        match value {
            Some(v) => unfile(&mut self.by_value, v, slot),
            None => {
                self.any.remove(&slot);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.by_value.is_empty() && self.any.is_empty()
    }
}

/// Placed pods by label and placed declaring pods by what they select.
#[derive(Default)]
pub struct PeerIndex {
    pods: Vec<Option<Placed>>,
    free: Vec<u32>,
    by_uid: HashMap<String, u32>,
    /// label key -> value -> placed pods with that label.
    by_label: HashMap<String, HashMap<String, Slots>>,
    /// label key -> placed declaring pods with an entry that can only
    /// select pods with that label.
    by_declared: HashMap<String, Declared>,
    /// Declaring pods with an entry the index cannot narrow.
    declared_unindexed: Slots,
    /// Interned (zone, region) of each node, by node index.
    node_loc: Vec<Option<u32>>,
    locs: Vec<(Option<String>, Option<String>)>,
}

/// The requirements of `selector` that narrow candidates, as `(key,
/// values)` (`None` values: exists); none for a selector of only `!=`,
/// `notin` and `!k`.
fn narrowing(selector: &Selector) -> impl Iterator<Item = (&str, Option<&[String]>)> {
    selector.requirements.iter().filter_map(|r| match r.op {
        Op::In => Some((r.key.as_str(), Some(r.values.as_slice()))),
        Op::Exists => Some((r.key.as_str(), None)),
        Op::NotIn | Op::DoesNotExist => None,
    })
}

impl PeerIndex {
    /// Files `pod` placed on `node` (replacing an earlier entry of its
    /// uid); `spec` is its parsed peers annotation.
    pub fn add(&mut self, pod: &Pod, node: u32, spec: Option<Rc<PeerSpec>>) {
        self.remove(&pod.uid);
        let slot = self.free.pop().unwrap_or(self.pods.len() as u32);
        for (k, v) in &pod.labels {
            let values = self.by_label.entry(k.clone()).or_default();
            values.entry(v.clone()).or_default().insert(slot);
        }
        let (declared_keys, declared_unindexed) = match &spec {
            Some(spec) => self.file_declared(spec, slot),
            None => (Vec::new(), false),
        };
        let placed = Placed {
            uid: pod.uid.clone(),
            node,
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            spec,
            declared_keys,
            declared_unindexed,
        };
        if slot as usize == self.pods.len() {
            self.pods.push(Some(placed));
        } else {
            self.pods[slot as usize] = Some(placed);
        }
        self.by_uid.insert(pod.uid.clone(), slot);
    }

    /// Files a declaring pod under one narrowing requirement per entry.
    fn file_declared(
        &mut self,
        spec: &PeerSpec,
        slot: u32,
    ) -> (Vec<(String, Option<String>)>, bool) {
        let mut keys = Vec::new();
        let mut unindexed = false;
        for entry in &spec.entries {
            // The first narrowing requirement: any one is a superset.
            match narrowing(&entry.selector).next() {
                Some((k, Some(values))) => {
                    keys.extend(values.iter().map(|v| (k.to_string(), Some(v.clone()))))
                }
                Some((k, None)) => keys.push((k.to_string(), None)),
                None => unindexed = true,
            }
        }
        keys.sort();
        keys.dedup();
        for (k, v) in &keys {
            let declared = self.by_declared.entry(k.clone()).or_default();
            declared.set(v).insert(slot);
        }
        if unindexed {
            self.declared_unindexed.insert(slot);
        }
        (keys, unindexed)
    }

    /// Forgets the pod with `uid`, if filed.
    pub fn remove(&mut self, uid: &str) {
        let Some(slot) = self.by_uid.remove(uid) else {
            return;
        };
        let Some(placed) = self.pods[slot as usize].take() else {
            return;
        };
        for (k, v) in &placed.labels {
            if let Some(by_value) = self.by_label.get_mut(k) {
                unfile(by_value, v, slot);
                if by_value.is_empty() {
                    self.by_label.remove(k);
                }
            }
        }
        for (k, v) in &placed.declared_keys {
            if let Some(declared) = self.by_declared.get_mut(k) {
                declared.unfile(v, slot);
                if declared.is_empty() {
                    self.by_declared.remove(k);
                }
            }
        }
        if placed.declared_unindexed {
            self.declared_unindexed.remove(&slot);
        }
        self.free.push(slot);
    }

    /// Forgets every pod placed on `node`.
    pub fn remove_node(&mut self, node: u32) {
        let uids: Vec<String> = self
            .pods
            .iter()
            .flatten()
            .filter(|p| p.node == node)
            .map(|p| p.uid.clone())
            .collect();
        for uid in uids {
            self.remove(&uid);
        }
        if let Some(slot) = self.node_loc.get_mut(node as usize) {
            *slot = None;
        }
    }

    /// Records where node `index` is.
    pub fn set_node(&mut self, index: u32, node: &Node) {
        let loc = Location::of(&node.name, node.labels.as_slice());
        let key = (loc.zone.map(str::to_string), loc.region.map(str::to_string));
        let id = match self.locs.iter().position(|l| *l == key) {
            Some(i) => i as u32,
            None => {
                self.locs.push(key);
                (self.locs.len() - 1) as u32
            }
        };
        let i = index as usize;
        if self.node_loc.len() <= i {
            self.node_loc.resize(i + 1, None);
        }
        self.node_loc[i] = Some(id);
    }

    /// The interned location of node `index` (see [`PeerIndex::location`]).
    pub fn node_location(&self, index: u32) -> Option<u32> {
        self.node_loc.get(index as usize).copied().flatten()
    }

    /// The (zone, region) of an interned location.
    pub fn location(&self, id: u32) -> (Option<&str>, Option<&str>) {
        let (z, r) = &self.locs[id as usize];
        (z.as_deref(), r.as_deref())
    }

    /// How many locations are interned.
    pub fn locations(&self) -> usize {
        self.locs.len()
    }

    pub fn get(&self, slot: u32) -> Option<&Placed> {
        self.pods.get(slot as usize).and_then(|p| p.as_ref())
    }

    /// Every placed pod.
    pub fn all(&self) -> impl Iterator<Item = &Placed> {
        self.pods.iter().flatten()
    }

    /// Placed pods that may match one of `spec`'s selectors (sorted, no
    /// duplicates); `None` when some selector cannot be narrowed (scan
    /// [`PeerIndex::all`]).
    pub fn selected_candidates(&self, spec: &PeerSpec) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        for entry in &spec.entries {
            let best = narrowing(&entry.selector)
                .map(|(k, values)| self.labelled(k, values))
                .min_by_key(|sets| sets.iter().map(|s| s.len()).sum::<usize>())?;
            for set in best {
                out.extend(set.iter().copied());
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// The sets of placed pods with label `key` (set to one of `values`).
    fn labelled(&self, key: &str, values: Option<&[String]>) -> Vec<&Slots> {
        let Some(by_value) = self.by_label.get(key) else {
            return Vec::new();
        };
        match values {
            Some(values) => values.iter().filter_map(|v| by_value.get(v)).collect(),
            None => by_value.values().collect(),
        }
    }

    /// Declaring pods whose selectors may match a pod with `labels`
    /// (sorted, no duplicates).
    pub fn declaring_candidates(&self, labels: &[(String, String)]) -> Vec<u32> {
        let mut out: Vec<u32> = self.declared_unindexed.iter().copied().collect();
        for (k, v) in labels {
            let Some(declared) = self.by_declared.get(k) else {
                continue;
            };
            if let Some(set) = declared.by_value.get(v) {
                out.extend(set.iter().copied());
            }
            out.extend(declared.any.iter().copied());
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Takes `slot` out of `value`'s set, dropping the set when empty.
fn unfile(by_value: &mut HashMap<String, Slots>, value: &str, slot: u32) {
    if let Some(set) = by_value.get_mut(value) {
        set.remove(&slot);
        if set.is_empty() {
            by_value.remove(value);
        }
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
