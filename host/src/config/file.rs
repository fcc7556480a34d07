//! The configuration file, in the shape of kube-scheduler's
//! KubeSchedulerConfiguration plus a `wasmPlugins` section.
//!
//! Every struct denies unknown fields: a typo is an error at start, with
//! the field's path, never a silently ignored setting.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use serde::{Deserialize, Serialize};

use super::{err, ConfigError};
use crate::wasm::FailurePolicy;

/// The most node-evaluation threads a configuration may ask for: each is
/// an OS thread (and a plugin instance per wasm plugin).
pub const MAX_PARALLELISM: usize = 1024;

/// The most bindings in flight a configuration may ask for.
pub const MAX_BIND_CONCURRENCY: usize = 1024;

/// Checks of single values that need nothing else; the rest is checked
/// when the profiles are built.
pub fn check(file: &ConfigFile) -> Result<(), ConfigError> {
    at_most("parallelism", file.parallelism, MAX_PARALLELISM)?;
    at_most(
        "bindConcurrency",
        file.bind_concurrency,
        MAX_BIND_CONCURRENCY,
    )?;
    let k = file;
    if k.extenders.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(err(
            "extenders",
            "scheduler extenders are not supported (a wasm plugin does an extender's Filter, Score and Bind in-process: docs/writing-plugins.md)",
        ));
    }
    backoff(file)?;
    if k.delay_cache_until_active == Some(true) {
        return Err(err(
            "delayCacheUntilActive",
            "not supported: standbys keep their caches warm (only false)",
        ));
    }
    for (field, value) in [
        ("healthzBindAddress", &k.healthz_bind_address),
        ("metricsBindAddress", &k.metrics_bind_address),
    ] {
        if value.as_deref().is_some_and(|v| !v.is_empty()) {
            return Err(err(
                field,
                "not a field of kube-scheduler's v1 configuration (removed in v1); use the flags --bind-address and --secure-port",
            ));
        }
    }
    Ok(())
}

/// The longest backoff a configuration may ask for (a day): a pod is
/// never parked for longer than that after a failed attempt.
pub const MAX_BACKOFF_SECONDS: i64 = 86_400;

/// `podInitialBackoffSeconds` and `podMaxBackoffSeconds` (kube-scheduler's
/// defaults 1 and 10 and its validation: the initial above 0, the maximum
/// not below the initial).
pub fn backoff(file: &ConfigFile) -> Result<crate::framework::queue::Backoff, ConfigError> {
    let initial = file.pod_initial_backoff_seconds.unwrap_or(1);
    let max = file.pod_max_backoff_seconds.unwrap_or(10);
    for (field, v) in [
        ("podInitialBackoffSeconds", initial),
        ("podMaxBackoffSeconds", max),
    ] {
        if v <= 0 {
            return Err(err(field, format!("must be greater than 0, got {v}")));
        }
        if v > MAX_BACKOFF_SECONDS {
            return Err(err(
                field,
                format!("must be at most {MAX_BACKOFF_SECONDS} (a day), got {v}"),
            ));
        }
    }
    if max < initial {
        return Err(err(
            "podMaxBackoffSeconds",
            format!(
                "must be greater than or equal to podInitialBackoffSeconds ({initial}), got {max}"
            ),
        ));
    }
    Ok(crate::framework::queue::Backoff {
        initial_ms: initial as u64 * 1000,
        max_ms: max as u64 * 1000,
    })
}

/// What the file sets that wasmsched reads but does not act on, one line
/// each (logged at start by `run`, printed by `profiles`): settings of
/// kube-scheduler's file that only make sense for a Go program or for its
/// client library.
pub fn unused_settings(file: &ConfigFile) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(cc) = &file.client_connection {
        for (field, value) in [
            ("clientConnection.contentType", &cc.content_type),
            (
                "clientConnection.acceptContentTypes",
                &cc.accept_content_types,
            ),
        ] {
            if let Some(v) = value
                .as_deref()
                .filter(|v| !v.is_empty() && !v.contains("json"))
            {
                notes.push(format!(
                    "{field} {v:?}: not used; wasmsched's client reads and writes the same objects as JSON"
                ));
            }
        }
    }
    for (field, value) in [
        ("enableProfiling", file.enable_profiling),
        (
            "enableContentionProfiling",
            file.enable_contention_profiling,
        ),
    ] {
        if value == Some(true) {
            notes.push(format!(
                "{field} true: not used; Go's /debug/pprof handlers do not exist in wasmsched"
            ));
        }
    }
    notes
}

/// Whether the file is kube-scheduler's own `KubeSchedulerConfiguration`
/// (its defaults are then kube-scheduler's: no wasm built-ins unless
/// named).
pub fn is_kube_scheduler_file(file: &ConfigFile) -> bool {
    file.kind.as_deref() == Some("KubeSchedulerConfiguration")
        || file.api_version.as_deref() == Some("kubescheduler.config.k8s.io/v1")
}

fn at_most(field: &str, value: Option<usize>, max: usize) -> Result<(), ConfigError> {
    match value {
        Some(v) if v > max => Err(err(field, format!("must be at most {max}, got {v}"))),
        _ => Ok(()),
    }
}

/// The whole file.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    /// `wasmsched.io/v1alpha1` or `kubescheduler.config.k8s.io/v1`.
    pub api_version: Option<String>,
    /// `WasmSchedulerConfiguration` or `KubeSchedulerConfiguration`.
    pub kind: Option<String>,
    /// Fragments merged into this file (names or `*` patterns in its
    /// directory): `config::include`.
    #[serde(default)]
    pub include: Vec<String>,
    /// Threads that evaluate nodes in parallel (default: CPU count).
    pub parallelism: Option<usize>,
    /// Default for every profile; 0 or absent: upstream's adaptive rule.
    pub percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    pub profiles: Vec<ProfileFile>,
    /// Wasm components and how to run them.
    #[serde(default)]
    pub wasm_plugins: Vec<WasmPluginFile>,
    /// Directory of precompiled components (relative to this file), so a
    /// restart does not compile again. Absent: `$WASMSCHED_PLUGIN_CACHE`,
    /// else no disk cache. See docs/plugin-lifecycle.md.
    pub plugin_cache_dir: Option<PathBuf>,
    /// How `oci://` plugin paths are pulled: credentials, CA, plain-HTTP
    /// registries, timeout and retries. See docs/plugin-distribution.md.
    pub plugin_registry: Option<PluginRegistryFile>,
    /// `wasmsched run`: leader election on a Lease, as kube-scheduler's.
    pub leader_election: Option<LeaderElectionFile>,
    /// `wasmsched run`: how the scheduler talks to the API server.
    pub client_connection: Option<ClientConnectionFile>,
    /// `wasmsched run`: bindings in flight at once (default 16).
    pub bind_concurrency: Option<usize>,
    /// The pod-deletion-cost controller; `wasmsched run` starts it when
    /// present. See docs/deletion-cost.md.
    pub deletion_cost: Option<DeletionCostFile>,
    /// Live node metrics (DCGM's GPU utilization) from Prometheus, fed to
    /// plugins as node metrics; `wasmsched run` polls it when present.
    /// See docs/node-metrics.md.
    pub node_metrics: Option<NodeMetricsFile>,
    /// Scheduler extenders (webhooks): refused unless empty.
    pub extenders: Option<Vec<serde_json::Value>>,
    /// With fragments (`include`): the file that first named each plugin
    /// of a profile in an `enabled` list, by `schedulerName/plugin`
    /// (`wasmsched profiles` says where an entry came from).
    #[serde(skip)]
    pub plugin_origins: BTreeMap<String, String>,
    /// Backoff of pods after a failed attempt: first wait in seconds
    /// (default 1), doubled per attempt up to `podMaxBackoffSeconds`
    /// (default 10).
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    /// Informers before leadership: only `false` (the default).
    pub delay_cache_until_active: Option<bool>,
    /// Go's pprof handlers: accepted and named at start, none are served.
    pub enable_profiling: Option<bool>,
    pub enable_contention_profiling: Option<bool>,
    /// Not in kube-scheduler's v1 file; must be empty (use the flags
    /// `--bind-address` and `--secure-port`).
    pub healthz_bind_address: Option<String>,
    pub metrics_bind_address: Option<String>,
}

/// `leaderElection` (kube-scheduler's field names and defaults).
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaderElectionFile {
    /// Default true.
    pub leader_elect: Option<bool>,
    /// How long a lease holds after its last renewal (default `15s`).
    pub lease_duration: Option<String>,
    /// The leader gives up when it could not renew for this long (default
    /// `10s`); must be shorter than `leaseDuration`.
    pub renew_deadline: Option<String>,
    /// Time between attempts to acquire or renew (default `2s`).
    pub retry_period: Option<String>,
    /// Only `leases` (a `coordination.k8s.io/v1` Lease).
    pub resource_lock: Option<String>,
    /// The Lease's name (default `wasmsched`).
    pub resource_name: Option<String>,
    /// The Lease's namespace (default `kube-system`).
    pub resource_namespace: Option<String>,
}

/// `clientConnection` (kube-scheduler's field names).
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClientConnectionFile {
    /// Kubeconfig file (default: `--kubeconfig`, `$KUBECONFIG`, then
    /// in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// Sustained API writes per second (default 50, as kube-scheduler).
    pub qps: Option<f32>,
    /// Burst of API writes (default 100).
    pub burst: Option<u32>,
    /// kube-scheduler's wire format (`application/vnd.kubernetes.protobuf`
    /// by default there): read and named at start; the client speaks JSON.
    pub content_type: Option<String>,
    /// The `Accept` header of kube-scheduler's client: likewise.
    pub accept_content_types: Option<String>,
}

/// `profiles[]`.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProfileFile {
    /// Absent in a file's only profile: `default-scheduler`, as
    /// kube-scheduler defaults it.
    #[serde(default)]
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    pub plugins: PluginsFile,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfigFile>,
}

/// `profiles[].plugins`: per extension point. PreFilter and PreScore are
/// part of Filter and Score here (a plugin's pre-step always runs with
/// its main step), so they are accepted only as aliases.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginsFile {
    pub multi_point: Option<PluginSet>,
    pub filter: Option<PluginSet>,
    pub score: Option<PluginSet>,
    /// Applied before `filter`, to the same list.
    pub pre_filter: Option<PluginSet>,
    /// Applied before `score`, to the same list (weights are Score's).
    pub pre_score: Option<PluginSet>,
    /// The other points: a plugin disabled at one leaves the profile
    /// (a plugin runs at every point it implements), one enabled joins.
    pub pre_enqueue: Option<PluginSet>,
    pub queue_sort: Option<PluginSet>,
    pub post_filter: Option<PluginSet>,
    pub reserve: Option<PluginSet>,
    pub permit: Option<PluginSet>,
    pub pre_bind: Option<PluginSet>,
    pub bind: Option<PluginSet>,
    pub post_bind: Option<PluginSet>,
    /// Kubernetes 1.37's workload-aware points (the Workload API's pod
    /// groups): accepted with nothing enabled; enabling a plugin there
    /// is refused until they exist here (issue 50).
    pub placement_generate: Option<PluginSet>,
    pub placement_score: Option<PluginSet>,
    pub pod_group_post_filter: Option<PluginSet>,
}

/// `enabled` / `disabled` lists.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// `name: "*"` disables every default plugin of the point.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

/// A plugin named in a set.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginRef {
    pub name: String,
    /// Score weight (default: the plugin's default, or 1).
    pub weight: Option<i64>,
}

/// `pluginConfig[]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginConfigFile {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

/// `wasmPlugins[]`: a component and its limits.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WasmPluginFile {
    /// The plugin's name in profiles (`plugins.*.enabled[].name`).
    pub name: String,
    /// The component file (`.wasm`, `.wasm.gz`, `.wasm.zst`), or an OCI
    /// artifact `oci://REGISTRY/NAME@sha256:DIGEST`. Absent for a
    /// built-in, which is then only re-configured.
    pub path: Option<PathBuf>,
    /// An `oci://` path may name a tag instead of a digest (a tag is
    /// resolved when the configuration is read; a digest never moves).
    pub allow_tags: Option<bool>,
    /// Deadline of each per-pod call, e.g. `250ms`.
    pub timeout: Option<String>,
    /// Deadline of `init` and of a full state sync, e.g. `10s`.
    pub init_timeout: Option<String>,
    /// Cap on the instance's memory, a quantity such as `64Mi`.
    pub memory_limit: Option<String>,
    /// `Fail` (default) or `Ignore`.
    pub failure_policy: Option<FailurePolicy>,
}

/// `pluginRegistry`: how `oci://` plugin paths are pulled.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginRegistryFile {
    /// A docker config file with the registries' credentials: the
    /// `.dockerconfigjson` key of a `kubernetes.io/dockerconfigjson`
    /// Secret, mounted (relative to this file). Read at every pull.
    /// Absent: anonymous.
    pub credentials_file: Option<PathBuf>,
    /// More CA certificates (PEM) to trust, beside the public roots.
    pub ca_file: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP.
    #[serde(default, rename = "plainHTTP")]
    pub plain_http: Vec<String>,
    /// Deadline of each request, e.g. `60s` (the default).
    pub timeout: Option<String>,
    /// Attempts after the first on connection errors, timeouts, 429 and
    /// 5xx (default 3; at most 10).
    pub retries: Option<u32>,
}

/// `deletionCost`: the pod-deletion-cost controller. Validated into
/// `deletion_cost::DeletionCostConfig`, which documents each default.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeletionCostFile {
    /// How often costs are recomputed, e.g. `30s`.
    pub interval: Option<String>,
    /// A cost is rewritten only when it moves by more than this.
    pub hysteresis: Option<u32>,
    /// Global cap on annotation writes (pod patches) per second.
    pub writes_per_second: Option<f64>,
    /// How long a metric series that disappeared still holds a pod's cost.
    pub stale_after: Option<String>,
    pub prometheus: Option<PrometheusFile>,
    pub pod_metrics: Option<PodMetricsFile>,
    #[serde(default)]
    pub workloads: WorkloadsFile,
    /// The deletion-cost policy: `DeletionCost` (built in) or the name of
    /// a `wasmPlugins` entry.
    pub plugin: Option<String>,
    /// The policy's args (JSON object).
    #[serde(default)]
    pub args: serde_json::Value,
}

/// `nodeMetrics`: validated into `node_metrics::NodeMetricsConfig`, which
/// documents each default.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeMetricsFile {
    /// `queries`: metric name -> PromQL (default: the DCGM series).
    pub prometheus: Option<PrometheusFile>,
    /// The label naming the node (dcgm-exporter: `Hostname`).
    pub node_label: Option<String>,
    /// The label naming the device (dcgm-exporter: `UUID`).
    pub device_label: Option<String>,
    /// How often Prometheus is queried, e.g. `15s`.
    pub interval: Option<String>,
    /// How old a value may be before it counts as unknown, e.g. `1m`.
    pub stale_after: Option<String>,
}

/// `deletionCost.prometheus` and `nodeMetrics.prometheus`: metrics from
/// Prometheus's HTTP API (`crate::prometheus`).
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusFile {
    pub url: String,
    /// Deadline of each query, e.g. `5s`.
    pub timeout: Option<String>,
    /// A file holding a bearer token sent with every query (read for
    /// each query, so a rotated token is picked up).
    pub bearer_token_file: Option<PathBuf>,
    /// Metric name -> PromQL (in `deletionCost`, with `{pod}` and
    /// `{namespace}` placeholders).
    #[serde(default)]
    pub queries: BTreeMap<String, String>,
}

/// `deletionCost.podMetrics`: metrics scraped from each pod's own
/// endpoint (Prometheus text format).
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodMetricsFile {
    pub port: Option<u16>,
    pub path: Option<String>,
    pub timeout: Option<String>,
    /// Metric name -> the series name in the pod's exposition.
    #[serde(default)]
    pub metrics: BTreeMap<String, String>,
}

/// `deletionCost.workloads`: which ReplicaSets (directly or through their
/// Deployment) the controller manages.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadsFile {
    /// Opt-in label on a Deployment or ReplicaSet (value `"true"`).
    pub label: Option<String>,
    /// Opt-in annotation on a Deployment or ReplicaSet (value `"true"`).
    pub annotation: Option<String>,
    #[serde(default)]
    pub selectors: Vec<WorkloadSelectorFile>,
}

/// `deletionCost.workloads.selectors[]`: Deployments or ReplicaSets whose
/// labels match (in `namespace`, or in every namespace).
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSelectorFile {
    pub namespace: Option<String>,
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}
