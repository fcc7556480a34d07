//! The values of the node-metrics source: per node and per device, each
//! with the time it was last seen. What is older than the staleness bound
//! is unknown: plugins no longer get it, and it is dropped.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::config::Naming;
use super::DEVICE_SEPARATOR;
use crate::prometheus::Sample;

/// The node-metric name of `metric` on one device.
pub fn device_metric(metric: &str, device: &str) -> String {
    format!("{metric}{DEVICE_SEPARATOR}{device}")
}

/// One value and when it was last seen (seconds since the Unix epoch, or
/// since any fixed origin the caller keeps to).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub value: f64,
    pub seen: f64,
}

/// What one answer had that the store could not use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ingested {
    /// Samples kept.
    pub series: usize,
    /// Samples without the node label.
    pub unlabeled: usize,
    /// Samples whose value is NaN, infinite or negative.
    pub invalid: usize,
}

/// Every node's values, by node name, then by node-metric name (`METRIC`
/// or `METRIC/DEVICE`).
#[derive(Debug, Clone, Default)]
pub struct Store {
    nodes: HashMap<String, BTreeMap<String, Value>>,
}

impl Store {
    /// Takes the samples of metric `metric` answered at `now`: per device
    /// (samples with the device label) as `METRIC/DEVICE`, and the node's
    /// `METRIC` as the mean over its devices in this answer (a sample
    /// without the device label is the node's value itself).
    pub fn ingest(
        &mut self,
        naming: &Naming,
        metric: &str,
        samples: &[Sample],
        now: f64,
    ) -> Ingested {
        let mut out = Ingested::default();
        // node -> (sum over devices, devices, the node's own value)
        let mut per_node: HashMap<&str, (f64, u32, Option<f64>)> = HashMap::new();
        for s in samples {
            let Some(node) = s.labels.get(&naming.node_label).filter(|n| !n.is_empty()) else {
                out.unlabeled += 1;
                continue;
            };
            if !s.value.is_finite() || s.value < 0.0 {
                out.invalid += 1;
                continue;
            }
            out.series += 1;
            let acc = per_node.entry(node.as_str()).or_default();
            match s.labels.get(&naming.device_label).filter(|d| !d.is_empty()) {
                Some(device) => {
                    acc.0 += s.value;
                    acc.1 += 1;
                    self.set(node, device_metric(metric, device), s.value, now);
                }
                None => acc.2 = Some(s.value),
            }
        }
        for (node, (sum, devices, own)) in per_node {
            let v = own.unwrap_or(sum / f64::from(devices.max(1)));
            self.set(node, metric.to_string(), v, now);
        }
        out
    }

    /// Sets one value.
    pub fn set(&mut self, node: &str, name: String, value: f64, seen: f64) {
        let values = match self.nodes.get_mut(node) {
            Some(v) => v,
            None => self.nodes.entry(node.to_string()).or_default(),
        };
        values.insert(name, Value { value, seen });
    }

    /// Drops what is older than `stale_after` at `now`.
    pub fn expire(&mut self, stale_after: Duration, now: f64) {
        let bound = stale_after.as_secs_f64();
        self.nodes.retain(|_, values| {
            values.retain(|_, v| now - v.seen <= bound);
            !values.is_empty()
        });
    }

    /// Every node's metrics as plugins get them (sorted by name).
    pub fn node_metrics(&self) -> HashMap<String, Vec<(String, f64)>> {
        self.nodes
            .iter()
            .map(|(n, values)| {
                let list = values.iter().map(|(k, v)| (k.clone(), v.value)).collect();
                (n.clone(), list)
            })
            .collect()
    }

    /// The values of one node.
    pub fn node(&self, name: &str) -> Option<&BTreeMap<String, Value>> {
        self.nodes.get(name)
    }

    /// Nodes with at least one value.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The age of the oldest value at `now` (0 when empty).
    pub fn oldest_age(&self, now: f64) -> f64 {
        self.nodes
            .values()
            .flat_map(|v| v.values())
            .map(|v| now - v.seen)
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
            at: 0.0,
        }
    }

    #[test]
    fn devices_nodes_and_staleness() {
        let naming = Naming::default();
        let mut s = Store::default();
        let util = [
            sample(&[("Hostname", "a"), ("UUID", "GPU-1")], 10.0),
            sample(&[("Hostname", "a"), ("UUID", "GPU-2")], 30.0),
            sample(&[("Hostname", "b")], 70.0),
            sample(&[("UUID", "GPU-9")], 1.0),
            sample(&[("Hostname", "b"), ("UUID", "GPU-3")], f64::NAN),
            sample(&[("Hostname", "b"), ("UUID", "GPU-4")], -1.0),
        ];
        let got = s.ingest(&naming, "DCGM_FI_DEV_GPU_UTIL", &util, 100.0);
        assert_eq!(
            got,
            Ingested {
                series: 3,
                unlabeled: 1,
                invalid: 2
            }
        );
        let m = s.node_metrics();
        assert_eq!(
            m["a"],
            [
                ("DCGM_FI_DEV_GPU_UTIL".to_string(), 20.0),
                ("DCGM_FI_DEV_GPU_UTIL/GPU-1".to_string(), 10.0),
                ("DCGM_FI_DEV_GPU_UTIL/GPU-2".to_string(), 30.0),
            ]
        );
        assert_eq!(m["b"], [("DCGM_FI_DEV_GPU_UTIL".to_string(), 70.0)]);
        // Node a's series stop; b's go on.
        s.ingest(&naming, "DCGM_FI_DEV_GPU_UTIL", &util[2..3], 130.0);
        assert_eq!(s.oldest_age(130.0), 30.0);
        s.expire(Duration::from_secs(60), 130.0);
        assert_eq!(s.nodes(), 2);
        s.expire(Duration::from_secs(60), 161.0);
        assert_eq!(s.nodes(), 1);
        assert!(s.node("a").is_none());
        assert_eq!(s.node("b").unwrap()["DCGM_FI_DEV_GPU_UTIL"].seen, 130.0);
    }
}
