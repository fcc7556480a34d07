//! A node's live measurements (a node-metrics source's values), kept
//! beside the node rather than in it: a pass of the source replaces them
//! without copying the node, and when the series are the ones the node
//! already had (the usual case) only the values are new; the names are
//! shared with the previous pass.

use std::sync::Arc;

/// Metric names, sorted, and their values, in the same order.
#[derive(Debug, Clone, Default)]
pub struct MetricValues {
    names: Arc<[String]>,
    values: Arc<[f64]>,
}

impl MetricValues {
    /// From `(name, value)` pairs sorted by name.
    pub fn new(list: Vec<(String, f64)>) -> Self {
        let values = list.iter().map(|(_, v)| *v).collect();
        let names = list.into_iter().map(|(n, _)| n).collect();
        Self { names, values }
    }

    /// The metrics of `list` (sorted by name), sharing this one's names
    /// when they are the same (then the second value is true).
    pub fn next(&self, list: Vec<(String, f64)>) -> (Self, bool) {
        let same = self.names.len() == list.len()
            && self.names.iter().zip(&list).all(|(a, (b, _))| a == b);
        if !same {
            return (Self::new(list), false);
        }
        let values = list.iter().map(|(_, v)| *v).collect();
        let next = Self {
            names: self.names.clone(),
            values,
        };
        (next, true)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// `(name, value)`, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.names
            .iter()
            .map(String::as_str)
            .zip(self.values.iter().copied())
    }

    /// The value of metric `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        let i = self.names.binary_search_by(|n| n.as_str().cmp(name)).ok()?;
        self.values.get(i).copied()
    }

    pub fn to_vec(&self) -> Vec<(String, f64)> {
        self.iter().map(|(n, v)| (n.to_string(), v)).collect()
    }
}

impl PartialEq<[(String, f64)]> for MetricValues {
    fn eq(&self, other: &[(String, f64)]) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|((a, x), (b, y))| a == b && x.to_bits() == y.to_bits())
    }
}

#[cfg(test)]
mod tests {
    use super::MetricValues;

    fn list(values: &[(&str, f64)]) -> Vec<(String, f64)> {
        values.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn same_series_share_names_and_compare_by_value() {
        let a = MetricValues::new(list(&[("DCGM_FI_DEV_GPU_UTIL", 10.0), ("z", 1.0)]));
        let (b, same) = a.next(list(&[("DCGM_FI_DEV_GPU_UTIL", 20.0), ("z", 1.0)]));
        assert!(same);
        assert!(std::sync::Arc::ptr_eq(&a.names, &b.names));
        assert_eq!(b.get("DCGM_FI_DEV_GPU_UTIL"), Some(20.0));
        assert_eq!(b.get("missing"), None);
        assert!(b == *list(&[("DCGM_FI_DEV_GPU_UTIL", 20.0), ("z", 1.0)]));
        assert!(b != *list(&[("DCGM_FI_DEV_GPU_UTIL", 10.0), ("z", 1.0)]));
        let (c, same) = b.next(list(&[("other", 1.0)]));
        assert!(!same);
        assert_eq!(c.to_vec(), list(&[("other", 1.0)]));
        let (d, same) = c.next(Vec::new());
        assert!(!same && d.is_empty());
        // NaN (a scrape's value) equals itself: no change is logged for it.
        let nan = MetricValues::new(list(&[("u", f64::NAN)]));
        assert!(nan == *list(&[("u", f64::NAN)]));
    }
}
