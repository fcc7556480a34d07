//! Reading a node's GPUs from its labels and annotations: the origin
//! design's `gpu.nvidia.com/*` labels and NVIDIA GPU Feature Discovery's
//! `nvidia.com/gpu.*` labels, the NVLink topology annotation, and GPU
//! utilization values. The built-in GpuTopology plugin reads nodes with
//! these functions; a plugin of your own sees nodes the same way.
//!
//! ```ignore
//! let gpus = wasmsched_plugin_sdk::gpu::read_labels(&node.node)?;
//! if gpus.capacity < 4 || gpus.memory_mib < Some(40 * 1024) { ... }
//! ```

use std::collections::BTreeSet;

use crate::types::Node;
use crate::view::NodeExt;
use crate::{reject_unresolvable, Rejection};

/// The extended resource kubelet's device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Node labels of the origin design.
pub const LABEL_MODEL: &str = "gpu.nvidia.com/model";
pub const LABEL_MEMORY: &str = "gpu.nvidia.com/memory";
pub const LABEL_COUNT: &str = "gpu.nvidia.com/count";
/// NVIDIA GPU Feature Discovery node labels.
pub const GFD_PRODUCT: &str = "nvidia.com/gpu.product";
pub const GFD_MEMORY: &str = "nvidia.com/gpu.memory";
pub const GFD_COUNT: &str = "nvidia.com/gpu.count";
/// Node annotation: NVLink/NVSwitch domains, `0,1,2,3;4,5,6,7`.
pub const ANN_TOPOLOGY: &str = "gpu.nvidia.com/topology";

/// The largest GPU count modelled per node (a per-GPU table is allocated
/// from it, so an absurd label must not allocate gigabytes).
pub const MAX_GPUS: u32 = 256;

/// The static GPU description of a node, from its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeGpus<'a> {
    /// GPUs the node offers: the count label (capped by allocatable
    /// `nvidia.com/gpu` when the node reports it), else allocatable.
    pub capacity: u32,
    pub model: Option<&'a str>,
    /// Memory per GPU in MiB.
    pub memory_mib: Option<u64>,
}

/// A non-negative decimal integer without sign, spaces or units.
pub fn parse_uint(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

fn bad_label(name: &str) -> Rejection {
    reject_unresolvable(format!("invalid node label {name}"))
}

/// The first of `names` the node carries, with its value.
fn first_label<'a>(node: &'a Node, names: [&'static str; 2]) -> Option<(&'static str, &'a str)> {
    names.iter().find_map(|n| node.label(n).map(|v| (*n, v)))
}

/// Reads the node's GPU labels (origin `gpu.nvidia.com/*` first, then GPU
/// Feature Discovery `nvidia.com/gpu.*`). A label that is present but
/// malformed rejects the node, naming the label (a countable reason).
pub fn read_labels(node: &Node) -> Result<NodeGpus<'_>, Rejection> {
    let count = match first_label(node, [LABEL_COUNT, GFD_COUNT]) {
        None => None,
        Some((name, v)) => match parse_uint(v) {
            Some(c) if c <= MAX_GPUS as u64 => Some(c as u32),
            _ => return Err(bad_label(name)),
        },
    };
    let allocatable = node
        .allocatable
        .iter()
        .find(|r| r.name == GPU_RESOURCE)
        .map(|r| r.amount.max(0));
    let capacity = match (count, allocatable) {
        (Some(c), Some(a)) => c.min(a.min(MAX_GPUS as i64) as u32),
        (Some(c), None) => c,
        (None, Some(a)) if a > MAX_GPUS as i64 => {
            return Err(reject_unresolvable(format!(
                "unsupported node allocatable {GPU_RESOURCE}"
            )))
        }
        (None, Some(a)) => a as u32,
        (None, None) => 0,
    };
    let model = match first_label(node, [LABEL_MODEL, GFD_PRODUCT]) {
        None => None,
        Some((name, v)) if v.trim().is_empty() => return Err(bad_label(name)),
        Some((_, v)) => Some(v),
    };
    let memory_mib = match first_label(node, [LABEL_MEMORY, GFD_MEMORY]) {
        None => None,
        Some((name, v)) => Some(parse_uint(v).ok_or_else(|| bad_label(name))?),
    };
    Ok(NodeGpus {
        capacity,
        model,
        memory_mib,
    })
}

/// A utilization value: a fraction `0..=1` (`0.35`) or a percent
/// `0%..=100%` (`35%`), rounded to a whole percent.
pub fn parse_utilization(v: &str) -> Option<u32> {
    let v = v.trim();
    let (number, max, scale) = match v.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0, 1.0),
        None => (v, 1.0, 100.0),
    };
    let x: f64 = number.parse().ok()?;
    if !x.is_finite() || !(0.0..=max).contains(&x) {
        return None;
    }
    Some(((x * scale).round() as u32).min(100))
}

/// A comma-separated list of distinct GPU indices (`0,1`); spaces around
/// an index are allowed.
pub fn parse_index_list(v: &str) -> Option<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    for part in v.split(',') {
        let i = parse_uint(part.trim())?;
        let i = u32::try_from(i).ok()?;
        if out.contains(&i) {
            return None;
        }
        out.push(i);
    }
    Some(out)
}

/// The node's NVLink/NVSwitch domains from `gpu.nvidia.com/topology`
/// (`0,1,2,3;4,5,6,7`), restricted to indices below `capacity`; an index
/// the annotation does not list is a domain of its own. `None` without
/// the annotation.
pub fn topology(node: &Node, capacity: u32) -> Result<Option<Vec<Vec<u32>>>, Rejection> {
    let Some(v) = node.annotation(ANN_TOPOLOGY) else {
        return Ok(None);
    };
    let bad = || reject_unresolvable(format!("invalid node annotation {ANN_TOPOLOGY}"));
    let mut seen = BTreeSet::new();
    let mut domains = Vec::new();
    for part in v.split(';') {
        let list = parse_index_list(part).ok_or_else(bad)?;
        for &i in &list {
            if !seen.insert(i) {
                return Err(bad());
            }
        }
        let list: Vec<u32> = list.into_iter().filter(|&i| i < capacity).collect();
        if !list.is_empty() {
            domains.push(list);
        }
    }
    for i in 0..capacity {
        if !seen.contains(&i) {
            domains.push(vec![i]);
        }
    }
    for d in &mut domains {
        d.sort_unstable();
    }
    Ok(Some(domains))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ResourceAmount;

    fn node(labels: &[(&str, &str)], annotations: &[(&str, &str)], gpus: Option<i64>) -> Node {
        let pairs = |kv: &[(&str, &str)]| {
            let mut v: Vec<(String, String)> = kv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            v.sort();
            v
        };
        Node {
            name: "n".into(),
            labels: pairs(labels),
            annotations: pairs(annotations),
            allocatable: gpus
                .map(|a| ResourceAmount {
                    name: GPU_RESOURCE.into(),
                    amount: a,
                })
                .into_iter()
                .collect(),
            taints: vec![],
            unschedulable: false,
            metrics: vec![],
        }
    }

    #[test]
    fn reads_origin_labels_before_gpu_feature_discovery() {
        let n = node(
            &[
                (LABEL_COUNT, "8"),
                (LABEL_MODEL, "A100"),
                (LABEL_MEMORY, "40960"),
                (GFD_PRODUCT, "NVIDIA-H100"),
                (GFD_MEMORY, "81920"),
            ],
            &[],
            Some(8),
        );
        let g = read_labels(&n).unwrap();
        assert_eq!(
            g,
            NodeGpus {
                capacity: 8,
                model: Some("A100"),
                memory_mib: Some(40960)
            }
        );
        let gfd = node(
            &[
                (GFD_PRODUCT, "NVIDIA-H100-80GB-HBM3"),
                (GFD_MEMORY, "81559"),
            ],
            &[],
            Some(4),
        );
        let g = read_labels(&gfd).unwrap();
        assert_eq!(
            (g.capacity, g.model, g.memory_mib),
            (4, Some("NVIDIA-H100-80GB-HBM3"), Some(81559))
        );
    }

    #[test]
    fn count_is_capped_by_allocatable_and_bad_labels_reject_the_node() {
        let n = node(&[(LABEL_COUNT, "8")], &[], Some(6));
        assert_eq!(read_labels(&n).unwrap().capacity, 6);
        assert_eq!(read_labels(&node(&[], &[], None)).unwrap().capacity, 0);
        let bad = read_labels(&node(&[(LABEL_COUNT, "eight")], &[], None)).unwrap_err();
        assert_eq!(bad.reason, "invalid node label gpu.nvidia.com/count");
        assert!(bad.unresolvable);
        assert!(read_labels(&node(&[(GFD_MEMORY, "40Gi")], &[], None)).is_err());
        assert!(read_labels(&node(&[(LABEL_COUNT, "100000")], &[], None)).is_err());
    }

    #[test]
    fn topology_domains_cover_every_gpu() {
        let n = node(&[], &[(ANN_TOPOLOGY, "0,1;2,3")], None);
        assert_eq!(
            topology(&n, 6).unwrap(),
            Some(vec![vec![0, 1], vec![2, 3], vec![4], vec![5]])
        );
        assert_eq!(topology(&node(&[], &[], None), 4).unwrap(), None);
        let dup = node(&[], &[(ANN_TOPOLOGY, "0,1;1,2")], None);
        assert!(topology(&dup, 4).is_err());
    }

    #[test]
    fn utilization_is_a_fraction_or_a_percent() {
        assert_eq!(parse_utilization("0.35"), Some(35));
        assert_eq!(parse_utilization("35%"), Some(35));
        assert_eq!(parse_utilization("1.5"), None);
        assert_eq!(parse_utilization("101%"), None);
        assert_eq!(parse_utilization("NaN"), None);
        assert_eq!(parse_index_list("0, 2,3"), Some(vec![0, 2, 3]));
        assert_eq!(parse_index_list("0,0"), None);
    }
}
