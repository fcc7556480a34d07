//! kube-scheduler's FitError message: why a pod fits no node.

use std::collections::BTreeMap;

/// Upstream truncates event messages to this many bytes.
const MAX_MESSAGE: usize = 1024;

/// Per-node reasons from a failed cycle, turned into
/// `0/N nodes are available: <count> <reason>, ... .`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// reason -> number of nodes that failed with it.
    pub reasons: BTreeMap<String, usize>,
    /// A reason that applies to the pod as a whole (PreFilter rejection,
    /// a plugin refusing the pod), replacing the per-node counts.
    pub pod_reason: Option<String>,
    /// The pod reason is upstream's PreFilter status, which every node
    /// gets: it is counted once per node (`0/3 nodes are available: 3
    /// <reason>.`).
    pub pod_reason_counts_nodes: bool,
    /// What PostFilter said when it found no way (upstream appends it,
    /// for example `preemption: 0/5 nodes are available: ...`).
    pub post_filter: Vec<String>,
    /// The plugins that rejected the pod (upstream's
    /// `Diagnosis.UnschedulablePlugins`): PreFilter's, or every Filter
    /// plugin that rejected a node.
    pub unschedulable_plugins: std::collections::BTreeSet<String>,
}

impl FitError {
    pub fn add(&mut self, reason: &str) {
        *self.reasons.entry(reason.to_string()).or_insert(0) += 1;
    }

    /// The message as kube-scheduler's `FitError.Error()` prints it: the
    /// `<count> <reason>` strings sorted as strings.
    pub fn message(&self) -> String {
        let mut msg = if let Some(reason) = &self.pod_reason {
            let n = self.num_all_nodes;
            if self.pod_reason_counts_nodes {
                format!("0/{n} nodes are available: {n} {reason}.")
            } else {
                format!("0/{n} nodes are available: {reason}.")
            }
        } else {
            let mut parts: Vec<String> = self
                .reasons
                .iter()
                .map(|(r, c)| format!("{c} {r}"))
                .collect();
            parts.sort();
            if parts.is_empty() {
                format!("0/{} nodes are available.", self.num_all_nodes)
            } else {
                format!(
                    "0/{} nodes are available: {}.",
                    self.num_all_nodes,
                    parts.join(", ")
                )
            }
        };
        // An empty PostFilter message is a plugin with nothing to add.
        for extra in self.post_filter.iter().filter(|e| !e.is_empty()) {
            msg.push(' ');
            msg.push_str(extra);
        }
        if msg.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE - 4;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
            msg.push_str(" ...");
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_matches_upstream_format() {
        let mut e = FitError {
            num_all_nodes: 5,
            ..Default::default()
        };
        for _ in 0..3 {
            e.add("Insufficient cpu");
        }
        e.add("node(s) had untolerated taint(s)");
        e.add("Insufficient memory");
        e.add("Insufficient cpu");
        // sorted as strings: "1 Insufficient memory" < "1 node(s)..." < "4 Insufficient cpu"
        assert_eq!(
            e.message(),
            "0/5 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint(s), 4 Insufficient cpu."
        );
    }

    #[test]
    fn long_messages_are_truncated() {
        let mut e = FitError {
            num_all_nodes: 500,
            ..Default::default()
        };
        for i in 0..200 {
            e.add(&format!("reason number {i}"));
        }
        let m = e.message();
        assert_eq!(m.len(), 1024);
        assert!(m.ends_with(" ..."));
    }
}
