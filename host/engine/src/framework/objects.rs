//! API objects a plugin reads beside Nodes and Pods (upstream: the
//! informers a plugin opens through the framework's handle), what it asks
//! to write back (statuses), and what it adds to `simulate`'s report.
//! The drivers know these only through the kinds plugins name: `run`
//! watches each kind an enabled plugin names, `simulate` feeds it the
//! objects of those kinds found in the manifests.

use std::collections::HashSet;

use serde_json::Value;

/// An API kind, as a plugin names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiKind {
    pub group: &'static str,
    /// The versions the plugin reads, preferred first: `run` watches the
    /// first one the API server serves.
    pub versions: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// What to check when the kind cannot be watched (a CRD to install,
    /// an API to enable), for the log line.
    pub hint: &'static str,
}

impl ApiKind {
    /// `group/version` (or `version` for the core group).
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// Whether an object's `apiVersion` and `kind` are of this kind; the
    /// version when they are.
    pub fn version_of(&self, api_version: &str, kind: &str) -> Option<&'static str> {
        if kind != self.kind {
            return None;
        }
        self.versions
            .iter()
            .copied()
            .find(|v| self.api_version(v) == api_version)
    }
}

/// The key plugins know an object by: `namespace/name`, or `name` for a
/// cluster-scoped kind.
pub fn object_key(kind: &ApiKind, object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if kind.namespaced {
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        format!("{ns}/{name}")
    } else {
        name.to_string()
    }
}

/// A change to objects of a kind a plugin reads.
#[derive(Debug, Clone, Copy)]
pub enum ObjectEvent<'a> {
    /// Added or changed, as the API shows it (JSON) at `version`.
    Applied { version: &'a str, object: &'a Value },
    /// Deleted: its key ([`object_key`]).
    Deleted(&'a str),
    /// Listed again after a lost watch: the keys seen; the others are
    /// gone.
    Relisted(&'a HashSet<String>),
}

/// A status a plugin asks the leader to write (a merge patch of the
/// object's `status` subresource); a `null` status asks for the object's
/// deletion instead (after removing DRA's delete-protection finalizer:
/// DynamicResources deleting a pod's stale extended resource claim).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    pub kind: ApiKind,
    /// Empty for a cluster-scoped kind.
    pub namespace: String,
    pub name: String,
    pub status: Value,
}

/// What a plugin adds to `simulate`'s report: a section of the JSON
/// output (under `key`) and a table of the text output.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginReport {
    pub key: &'static str,
    pub json: Value,
    /// The table's title line, e.g. `Pod groups (2):`.
    pub title: String,
    pub header: Vec<&'static str>,
    /// Cells may hold several lines.
    pub rows: Vec<Vec<String>>,
}
