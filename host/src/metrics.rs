//! The scheduler's Prometheus metrics. One registry per [`Metrics`]; the
//! process uses [`Metrics::global`] (served over HTTP by the Kubernetes
//! runtime), tests may build their own to read values in isolation.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Plugin lifecycle metrics.
pub struct Metrics {
    registry: Registry,
    /// `wasmsched_plugin_reloads_total{plugin,result}`.
    pub plugin_reloads: IntCounterVec,
    /// `wasmsched_plugin_info{plugin,digest}`: 1 for the running version.
    pub plugin_info: IntGaugeVec,
    /// `wasmsched_plugin_compile_seconds{plugin,origin}`: time to compile a
    /// component (`compiled`) or load it from the disk cache (`disk-cache`).
    pub plugin_compile_seconds: HistogramVec,
    /// `wasmsched_plugin_log_dropped_bytes_total{plugin}`: plugin output
    /// (stdout, stderr, `host.log`) dropped by the per-plugin rate limit.
    pub plugin_log_dropped_bytes: IntCounterVec,
    /// The digest each plugin's info series carries, to retire it on swap.
    current: Mutex<HashMap<String, String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let registry = Registry::new();
        let plugin_reloads = IntCounterVec::new(
            Opts::new(
                "wasmsched_plugin_reloads_total",
                "Plugin reload attempts by result (success, rejected, deleted).",
            ),
            &["plugin", "result"],
        )
        .expect("valid metric");
        let plugin_info = IntGaugeVec::new(
            Opts::new(
                "wasmsched_plugin_info",
                "The running version of each wasm plugin (sha256 of the component); value 1.",
            ),
            &["plugin", "digest"],
        )
        .expect("valid metric");
        let plugin_compile_seconds = HistogramVec::new(
            HistogramOpts::new(
                "wasmsched_plugin_compile_seconds",
                "Time to compile a plugin component, or to load it from the disk cache.",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
            &["plugin", "origin"],
        )
        .expect("valid metric");
        let plugin_log_dropped_bytes = IntCounterVec::new(
            Opts::new(
                "wasmsched_plugin_log_dropped_bytes_total",
                "Bytes of plugin output (stdout, stderr, host.log) dropped by the per-plugin rate limit.",
            ),
            &["plugin"],
        )
        .expect("valid metric");
        for c in [
            Box::new(plugin_reloads.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(plugin_info.clone()),
            Box::new(plugin_compile_seconds.clone()),
            Box::new(plugin_log_dropped_bytes.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Self {
            registry,
            plugin_reloads,
            plugin_info,
            plugin_compile_seconds,
            plugin_log_dropped_bytes,
            current: Mutex::default(),
        }
    }

    /// The process-wide metrics.
    pub fn global() -> &'static Metrics {
        static GLOBAL: OnceLock<Metrics> = OnceLock::new();
        GLOBAL.get_or_init(Metrics::new)
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts a reload attempt.
    pub fn reload(&self, plugin: &str, result: &str) {
        self.plugin_reloads
            .with_label_values(&[plugin, result])
            .inc();
    }

    /// A reload count (for tests and status output).
    pub fn reloads(&self, plugin: &str, result: &str) -> u64 {
        self.plugin_reloads
            .with_label_values(&[plugin, result])
            .get()
    }

    /// Marks `digest` as the running version of `plugin` (and retires the
    /// previous one's series).
    pub fn set_plugin_version(&self, plugin: &str, digest: &str) {
        let mut current = self.current.lock();
        if let Some(old) = current.insert(plugin.to_string(), digest.to_string()) {
            if old != digest {
                let _ = self.plugin_info.remove_label_values(&[plugin, &old]);
            }
        }
        self.plugin_info.with_label_values(&[plugin, digest]).set(1);
    }

    /// A plugin the process runs: its version series, and zero reload
    /// counters so rate() and increase() work from the start.
    pub fn register_plugin(&self, plugin: &str, digest: &str) {
        self.set_plugin_version(plugin, digest);
        for result in ["success", "rejected", "deleted", "restored"] {
            self.plugin_reloads.with_label_values(&[plugin, result]);
        }
    }

    /// Records a compile (or disk-cache load); memory hits are not recorded.
    pub fn observe_compile(&self, plugin: &str, report: &crate::wasm::CompileReport) {
        if report.origin != crate::wasm::Origin::Memory {
            self.plugin_compile_seconds
                .with_label_values(&[plugin, report.origin.as_str()])
                .observe(report.elapsed.as_secs_f64());
        }
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_series_follows_the_running_version() {
        let m = Metrics::new();
        m.set_plugin_version("P", "aaa");
        m.set_plugin_version("P", "bbb");
        m.reload("P", "success");
        let text = m.encode();
        assert!(
            text.contains(r#"wasmsched_plugin_info{digest="bbb",plugin="P"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"digest="aaa""#), "{text}");
        assert_eq!(m.reloads("P", "success"), 1);
    }
}
