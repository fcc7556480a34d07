//! The validated `nodeMetrics:` section of the configuration file.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::file::NodeMetricsFile;
use crate::config::{ConfigError, ConfigFile};
use crate::deletion_cost::config::{duration, err};
use crate::prometheus::Endpoint;

/// dcgm-exporter's series the source asks for when `queries` is not set:
/// those GpuTopology reads. Every value is sent to every plugin instance
/// when it changes, so the default asks for no more (BENCHMARKS.md, "Node
/// metrics").
pub const DEFAULT_QUERIES: [&str; 2] = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_FREE"];
/// dcgm-exporter's label naming the node (its `NODE_NAME`, the Kubernetes
/// node name when deployed by the GPU operator or its Helm chart).
pub const DEFAULT_NODE_LABEL: &str = "Hostname";
/// dcgm-exporter's label naming the GPU.
pub const DEFAULT_DEVICE_LABEL: &str = "UUID";
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);
/// Four passes at the default interval.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);

/// How metrics are named and when they are too old: what `run` and
/// `simulate --metrics` share.
#[derive(Debug, Clone)]
pub struct Naming {
    /// Metric name -> PromQL (for a file: the series name is the metric
    /// name).
    pub queries: BTreeMap<String, String>,
    pub node_label: String,
    pub device_label: String,
    pub stale_after: Duration,
}

impl Default for Naming {
    fn default() -> Self {
        Naming {
            queries: DEFAULT_QUERIES
                .iter()
                .map(|q| (q.to_string(), q.to_string()))
                .collect(),
            node_label: DEFAULT_NODE_LABEL.into(),
            device_label: DEFAULT_DEVICE_LABEL.into(),
            stale_after: DEFAULT_STALE_AFTER,
        }
    }
}

/// The node-metrics source's settings.
#[derive(Debug, Clone)]
pub struct NodeMetricsConfig {
    /// None: only `simulate --metrics` uses the section.
    pub prometheus: Option<Endpoint>,
    pub naming: Naming,
    pub interval: Duration,
}

fn name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl NodeMetricsConfig {
    /// The file's `nodeMetrics` section, or `None` without one.
    pub fn from_file(file: &ConfigFile) -> Result<Option<Self>, ConfigError> {
        file.node_metrics
            .as_ref()
            .map(Self::from_section)
            .transpose()
    }

    pub fn from_section(s: &NodeMetricsFile) -> Result<Self, ConfigError> {
        let f = "nodeMetrics";
        let mut naming = Naming::default();
        let prometheus = match &s.prometheus {
            None => None,
            Some(p) => {
                let endpoint = Endpoint::from_file(&format!("{f}.prometheus"), p)?;
                if !p.queries.is_empty() {
                    naming.queries.clear();
                }
                for (name, q) in &p.queries {
                    let field = format!("{f}.prometheus.queries.{name}");
                    if !name_ok(name) {
                        return Err(err(field, "metric names are [a-zA-Z_][a-zA-Z0-9_]*"));
                    }
                    if q.trim().is_empty() {
                        return Err(err(field, "empty query"));
                    }
                    naming.queries.insert(name.clone(), q.clone());
                }
                Some(endpoint)
            }
        };
        for (value, slot, name) in [
            (&s.node_label, &mut naming.node_label, "nodeLabel"),
            (&s.device_label, &mut naming.device_label, "deviceLabel"),
        ] {
            if let Some(v) = value {
                if !name_ok(v) {
                    return Err(err(
                        format!("{f}.{name}"),
                        format!("{v:?} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
                    ));
                }
                *slot = v.clone();
            }
        }
        if naming.node_label == naming.device_label {
            return Err(err(
                format!("{f}.deviceLabel"),
                "must differ from nodeLabel",
            ));
        }
        let interval = duration(&format!("{f}.interval"), &s.interval, DEFAULT_INTERVAL)?;
        naming.stale_after = duration(
            &format!("{f}.staleAfter"),
            &s.stale_after,
            DEFAULT_STALE_AFTER.max(interval * 2),
        )?;
        if naming.stale_after < interval {
            return Err(err(
                format!("{f}.staleAfter"),
                format!(
                    "{} is shorter than the interval ({}): every value would be unknown between passes",
                    humantime::format_duration(naming.stale_after),
                    humantime::format_duration(interval)
                ),
            ));
        }
        Ok(NodeMetricsConfig {
            prometheus,
            naming,
            interval,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(yaml: &str) -> Result<NodeMetricsConfig, ConfigError> {
        let s: NodeMetricsFile = crate::input::yaml::typed(yaml, &Default::default()).unwrap();
        NodeMetricsConfig::from_section(&s)
    }

    #[test]
    fn defaults_and_errors() {
        let c = section("prometheus: {url: 'http://p:9090'}").unwrap();
        assert_eq!(c.naming.queries.len(), 2);
        assert_eq!(c.naming.node_label, "Hostname");
        assert_eq!(c.interval, DEFAULT_INTERVAL);
        assert_eq!(c.naming.stale_after, DEFAULT_STALE_AFTER);
        let c = section("prometheus: {url: 'http://p', queries: {util: 'avg by (Hostname, UUID) (DCGM_FI_DEV_GPU_UTIL)'}}\ninterval: 2m").unwrap();
        assert_eq!(c.naming.queries.keys().collect::<Vec<_>>(), ["util"]);
        assert_eq!(c.naming.stale_after, Duration::from_secs(240));
        for (yaml, field) in [
            ("prometheus: {url: 'ftp://p'}", "nodeMetrics.prometheus.url"),
            (
                "prometheus: {url: 'http://p', queries: {'a-b': up}}",
                "nodeMetrics.prometheus.queries.a-b",
            ),
            ("nodeLabel: 'a b'", "nodeMetrics.nodeLabel"),
            ("deviceLabel: Hostname", "nodeMetrics.deviceLabel"),
            ("interval: 0s", "nodeMetrics.interval"),
            ("interval: 1m\nstaleAfter: 10s", "nodeMetrics.staleAfter"),
        ] {
            let e = section(yaml).unwrap_err();
            assert_eq!(e.field, field, "{yaml}: {e}");
        }
    }
}
