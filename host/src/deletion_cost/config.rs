//! The validated `deletionCost:` section of the configuration file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::policy::{CostPolicy, PolicySpec};
use crate::config::file::{DeletionCostFile, PodMetricsFile, PrometheusFile};
use crate::config::{ConfigError, ConfigFile};
use crate::model::selector::LabelSelector;

/// Default opt-in label and annotation (value `"true"`).
pub const OPT_IN: &str = "deletion-cost.wasmsched.io/enabled";
/// The built-in policy.
pub const DEFAULT_PLUGIN: &str = "DeletionCost";

/// A configuration error for `field` (shared with `node_metrics`).
pub(crate) fn err(field: impl Into<String>, cause: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        cause: cause.into(),
    }
}

/// A positive duration, `default` when unset.
pub(crate) fn duration(
    field: &str,
    s: &Option<String>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(s) = s else { return Ok(default) };
    let d = humantime::parse_duration(s)
        .map_err(|e| err(field, format!("invalid duration {s:?}: {e}")))?;
    if d.is_zero() {
        return Err(err(field, "must be positive"));
    }
    Ok(d)
}

/// A PromQL query with `{pod}` and `{namespace}` placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryTemplate(String);

/// Escapes a value for a PromQL double-quoted string.
fn promql_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

impl QueryTemplate {
    pub fn parse(field: &str, text: &str) -> Result<Self, ConfigError> {
        if !text.contains("{pod}") {
            return Err(err(
                field,
                format!("query {text:?} has no {{pod}} placeholder, so every pod would get the same value"),
            ));
        }
        Ok(QueryTemplate(text.to_string()))
    }

    /// The query for one pod.
    pub fn render(&self, namespace: &str, pod: &str) -> String {
        self.0
            .replace("{pod}", &promql_escape(pod))
            .replace("{namespace}", &promql_escape(namespace))
    }
}

/// Metrics from Prometheus's HTTP API.
#[derive(Debug, Clone)]
pub struct PrometheusSource {
    pub endpoint: crate::prometheus::Endpoint,
    /// Metric name -> query.
    pub queries: BTreeMap<String, QueryTemplate>,
}

/// Metrics from each pod's own endpoint (`http://POD_IP:PORT/PATH`).
#[derive(Debug, Clone)]
pub struct PodEndpointSource {
    pub port: u16,
    pub path: String,
    pub timeout: Duration,
    /// Metric name -> series name in the exposition.
    pub metrics: BTreeMap<String, String>,
}

/// Which Deployments and ReplicaSets the controller manages.
#[derive(Debug, Clone)]
pub struct OptIn {
    pub label: String,
    pub annotation: String,
    /// (namespace or all, selector) on the workload's labels.
    pub selectors: Vec<(Option<String>, LabelSelector)>,
}

impl Default for OptIn {
    fn default() -> Self {
        OptIn {
            label: OPT_IN.to_string(),
            annotation: OPT_IN.to_string(),
            selectors: Vec::new(),
        }
    }
}

impl OptIn {
    /// Whether a workload (its namespace and metadata) opted in.
    pub fn selects(&self, namespace: &str, meta: &meta::ObjectMeta) -> bool {
        let is_true = |m: &Option<BTreeMap<String, String>>, key: &str| {
            m.as_ref()
                .and_then(|m| m.get(key))
                .is_some_and(|v| v == "true")
        };
        if is_true(&meta.labels, &self.label) || is_true(&meta.annotations, &self.annotation) {
            return true;
        }
        let empty = BTreeMap::new();
        let labels = meta.labels.as_ref().unwrap_or(&empty);
        self.selectors
            .iter()
            .any(|(ns, sel)| ns.as_deref().is_none_or(|ns| ns == namespace) && sel.matches(labels))
    }
}

/// The controller's settings, validated.
#[derive(Debug, Clone)]
pub struct DeletionCostConfig {
    /// How often costs are recomputed (default 30s).
    pub interval: Duration,
    /// A cost is rewritten only when it moves by more than this (default 10).
    pub hysteresis: u32,
    /// Global cap on pod patches per second (default 5).
    pub writes_per_second: f64,
    /// How long a series that disappeared (after a pod had it) holds the
    /// pod's cost before the metric counts as absent (default 5m).
    pub stale_after: Duration,
    pub prometheus: Option<PrometheusSource>,
    pub pod_metrics: Option<PodEndpointSource>,
    pub opt_in: OptIn,
    pub policy: PolicySpec,
}

pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
pub const DEFAULT_HYSTERESIS: u32 = 10;
pub const DEFAULT_WRITES_PER_SECOND: f64 = 5.0;
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(300);
pub const MAX_WRITES_PER_SECOND: f64 = 1000.0;

fn metric_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn prometheus(p: &PrometheusFile) -> Result<PrometheusSource, ConfigError> {
    let f = "deletionCost.prometheus";
    let endpoint = crate::prometheus::Endpoint::from_file(f, p)?;
    let mut queries = BTreeMap::new();
    for (name, q) in &p.queries {
        let field = format!("{f}.queries.{name}");
        if !metric_name_ok(name) {
            return Err(err(field, "metric names are [a-zA-Z_][a-zA-Z0-9_]*"));
        }
        queries.insert(name.clone(), QueryTemplate::parse(&field, q)?);
    }
    if queries.is_empty() {
        return Err(err(
            format!("{f}.queries"),
            "at least one metric query is needed",
        ));
    }
    Ok(PrometheusSource { endpoint, queries })
}

fn pod_metrics(p: &PodMetricsFile) -> Result<PodEndpointSource, ConfigError> {
    let f = "deletionCost.podMetrics";
    let port = match p.port {
        Some(0) | None => return Err(err(format!("{f}.port"), "required (1..=65535)")),
        Some(port) => port,
    };
    let path = p.path.clone().unwrap_or_else(|| "/metrics".into());
    if !path.starts_with('/') {
        return Err(err(
            format!("{f}.path"),
            format!("{path:?} must start with /"),
        ));
    }
    let mut metrics = BTreeMap::new();
    for (name, series) in &p.metrics {
        if !metric_name_ok(name) || !metric_name_ok(series) {
            return Err(err(
                format!("{f}.metrics.{name}"),
                "metric and series names are [a-zA-Z_][a-zA-Z0-9_]*",
            ));
        }
        metrics.insert(name.clone(), series.clone());
    }
    if metrics.is_empty() {
        return Err(err(format!("{f}.metrics"), "at least one metric is needed"));
    }
    Ok(PodEndpointSource {
        port,
        path,
        timeout: duration(&format!("{f}.timeout"), &p.timeout, Duration::from_secs(2))?,
        metrics,
    })
}

fn opt_in(w: &crate::config::file::WorkloadsFile) -> Result<OptIn, ConfigError> {
    let f = "deletionCost.workloads";
    let mut o = OptIn::default();
    for (value, slot, name) in [
        (&w.label, &mut o.label, "label"),
        (&w.annotation, &mut o.annotation, "annotation"),
    ] {
        if let Some(v) = value {
            if v.is_empty() {
                return Err(err(format!("{f}.{name}"), "must not be empty"));
            }
            *slot = v.clone();
        }
    }
    for (i, s) in w.selectors.iter().enumerate() {
        let sel = meta::LabelSelector {
            match_labels: Some(s.match_labels.clone()),
            match_expressions: Some(s.match_expressions.clone()),
        };
        let parsed =
            LabelSelector::parse(&sel).map_err(|e| err(format!("{f}.selectors[{i}]"), e))?;
        o.selectors.push((s.namespace.clone(), parsed));
    }
    Ok(o)
}

impl DeletionCostConfig {
    /// The `deletionCost` section of `file` (relative paths against
    /// `base`), validated, with its policy compiled; `None` without one.
    pub fn from_file(file: &ConfigFile, base: &Path) -> Result<Option<Self>, ConfigError> {
        file.deletion_cost
            .as_ref()
            .map(|s| Self::from_section(s, file, base))
            .transpose()
    }

    /// Validates one section (the rest of `file` supplies `wasmPlugins`).
    pub fn from_section(
        s: &DeletionCostFile,
        file: &ConfigFile,
        base: &Path,
    ) -> Result<Self, ConfigError> {
        let f = "deletionCost";
        let writes_per_second = s.writes_per_second.unwrap_or(DEFAULT_WRITES_PER_SECOND);
        if !(writes_per_second > 0.0 && writes_per_second <= MAX_WRITES_PER_SECOND) {
            return Err(err(
                format!("{f}.writesPerSecond"),
                format!("must be in (0, {MAX_WRITES_PER_SECOND}], got {writes_per_second}"),
            ));
        }
        let prometheus = s.prometheus.as_ref().map(prometheus).transpose()?;
        let pod_metrics = s.pod_metrics.as_ref().map(pod_metrics).transpose()?;
        if let (Some(p), Some(e)) = (&prometheus, &pod_metrics) {
            if let Some(name) = p.queries.keys().find(|n| e.metrics.contains_key(*n)) {
                return Err(err(
                    format!("{f}.podMetrics.metrics.{name}"),
                    "also a prometheus query: each metric has one source",
                ));
            }
        }
        let name = s
            .plugin
            .clone()
            .unwrap_or_else(|| DEFAULT_PLUGIN.to_string());
        let (module, limits) =
            crate::config::deletion_cost_plugin(file, base, &name, &format!("{f}.plugin"))?;
        let args = match &s.args {
            serde_json::Value::Null => "{}".to_string(),
            v @ serde_json::Value::Object(_) => v.to_string(),
            _ => return Err(err(format!("{f}.args"), "must be a mapping")),
        };
        let policy = PolicySpec {
            name,
            module,
            limits,
            args,
        };
        // Runs the plugin's `init`: bad args fail at start, naming the field.
        CostPolicy::new(&policy)
            .map_err(|e| err(format!("{f}.args"), format!("plugin {}: {e}", policy.name)))?;
        Ok(DeletionCostConfig {
            interval: duration(&format!("{f}.interval"), &s.interval, DEFAULT_INTERVAL)?,
            hysteresis: s.hysteresis.unwrap_or(DEFAULT_HYSTERESIS),
            writes_per_second,
            stale_after: duration(
                &format!("{f}.staleAfter"),
                &s.stale_after,
                DEFAULT_STALE_AFTER,
            )?,
            prometheus,
            pod_metrics,
            opt_in: opt_in(&s.workloads)?,
            policy,
        })
    }

    /// The defaults with the built-in policy and no metric source (the
    /// warm-up and tier rules still apply): what `wasmsched deletion-cost`
    /// runs without a configuration file.
    pub fn builtin_default() -> Result<Self, ConfigError> {
        let file = ConfigFile::default();
        Self::from_section(&DeletionCostFile::default(), &file, Path::new("."))
    }

    /// The metric names the policy may receive.
    pub fn metric_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .prometheus
            .iter()
            .flat_map(|p| p.queries.keys())
            .chain(self.pod_metrics.iter().flat_map(|p| p.metrics.keys()))
            .map(String::as_str)
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(yaml: &str) -> Result<DeletionCostConfig, ConfigError> {
        let file = crate::config::parse(&format!("deletionCost:\n{yaml}"))?;
        Ok(DeletionCostConfig::from_file(&file, Path::new("."))?.expect("section present"))
    }

    #[test]
    fn full_section_parses() {
        let c = section(
            r#"
  interval: 10s
  hysteresis: 5
  writesPerSecond: 2.5
  prometheus:
    url: http://127.0.0.1:9090
    queries:
      active_requests: 'sum(http_active{namespace="{namespace}",pod="{pod}"})'
  podMetrics:
    port: 9100
    metrics: {active_connections: app_connections}
  workloads:
    label: team/cost
    selectors:
    - namespace: shop
      matchLabels: {app: web}
  args: {warmUpSeconds: 60}
"#,
        )
        .unwrap();
        assert_eq!(c.interval, Duration::from_secs(10));
        assert_eq!(c.hysteresis, 5);
        assert_eq!(c.metric_names(), ["active_connections", "active_requests"]);
        let q = &c.prometheus.as_ref().unwrap().queries["active_requests"];
        assert_eq!(
            q.render("shop", "web-1"),
            r#"sum(http_active{namespace="shop",pod="web-1"})"#
        );
        assert_eq!(c.pod_metrics.as_ref().unwrap().path, "/metrics");
        assert_eq!(c.policy.args, r#"{"warmUpSeconds":60}"#);
        let meta = meta::ObjectMeta {
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        };
        assert!(c.opt_in.selects("shop", &meta));
        assert!(!c.opt_in.selects("other", &meta));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("  bogus: 1\n", "unknown field `bogus`"),
            ("  writesPerSecond: 0\n", "deletionCost.writesPerSecond"),
            ("  interval: 0s\n", "deletionCost.interval"),
            (
                "  prometheus: {url: 'http://x', queries: {a: 'up'}}\n",
                "deletionCost.prometheus.queries.a",
            ),
            (
                "  prometheus: {url: 'ftp://x', queries: {a: '{pod}'}}\n",
                "deletionCost.prometheus.url",
            ),
            ("  podMetrics: {metrics: {a: b}}\n", "deletionCost.podMetrics.port"),
            (
                "  prometheus: {url: 'http://x', queries: {a: '{pod}'}}\n  podMetrics: {port: 1, metrics: {a: b}}\n",
                "deletionCost.podMetrics.metrics.a",
            ),
            ("  plugin: Nope\n", "deletionCost.plugin"),
            ("  plugin: GpuTopology\n", "does not export deletion-cost"),
            ("  args: [1]\n", "deletionCost.args"),
            (
                "  args: {cap: 0}\n",
                "deletionCost.args: plugin DeletionCost: rejected its args: deletion-cost args: field `cap`",
            ),
            (
                "  workloads: {selectors: [{matchExpressions: [{key: a, operator: Bad}]}]}\n",
                "deletionCost.workloads.selectors[0]",
            ),
        ];
        for (yaml, needle) in cases {
            let e = section(yaml).unwrap_err().to_string();
            assert!(e.contains(needle), "{yaml:?}: {e}");
        }
    }
}
