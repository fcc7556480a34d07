//! Logging as Kubernetes components log (klog's conventions):
//!
//! - `-v N` with klog's meanings: 0 (default) warnings and errors, 1
//!   start-up and configuration, 2 one line per binding ("Successfully
//!   bound pod to node") and per failed attempt ("Unable to schedule pod;
//!   no fit; waiting"), 4 and more per-plugin detail, 10 every score.
//! - `--logging-format json`: one JSON object per line with klog's keys
//!   (`ts` in seconds, `v`, `msg`, then the structured fields; `pod` as
//!   `{"name","namespace"}`, `node` as `{"name"}`, `err` for errors).
//! - The wasm engine's internals (wasmtime, cranelift, regalloc2) are
//!   capped at warnings whatever `-v` says: compiling a component logs
//!   thousands of lines at debug level.
//!
//! `--log` (a tracing filter) still replaces the level directives.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

static VERBOSITY: AtomicU8 = AtomicU8::new(0);

/// Sets the process's `-v` level.
pub fn set_verbosity(v: u8) {
    VERBOSITY.store(v, Ordering::Relaxed);
}

/// klog's `V(level).Enabled()`: whether lines of `level` are logged.
pub fn v(level: u8) -> bool {
    VERBOSITY.load(Ordering::Relaxed) >= level
}

/// kube-scheduler's `-v=2` line for a pod bound to `node` (`run` and
/// `simulate` alike).
pub fn bound(pod: &str, node: &str, profile: &str) {
    if v(2) {
        tracing::info!(v = 2, pod = %pod, node = %node, profile = %profile, "Successfully bound pod to node");
    }
}

/// kube-scheduler's `-v=2` line for a failed attempt.
pub fn unschedulable(pod: &str, profile: &str, err: &str) {
    if v(2) {
        tracing::info!(v = 2, pod = %pod, profile = %profile, err = %err, "Unable to schedule pod; no fit; waiting");
    }
}

/// `-v=2`: a pod waiting at Permit.
pub fn waiting(pod: &str, reason: &str) {
    if v(2) {
        tracing::info!(v = 2, pod = %pod, reason = %reason, "Pod is waiting at Permit");
    }
}

/// `-v=4`: each plugin that rejected the pod in a failed attempt.
pub fn rejected(f: &crate::scheduler::Failure) {
    if !v(4) {
        return;
    }
    if let crate::scheduler::FailureKind::Unschedulable(fit) = &f.kind {
        for plugin in &fit.unschedulable_plugins {
            tracing::debug!(
                v = 4,
                pod = %f.pod.key(),
                plugin = %plugin,
                profile = %f.profile,
                "Plugin rejected the pod"
            );
        }
    }
}

/// Crates whose logs are capped at warnings: the wasm compiler and
/// runtime.
const ENGINE_INTERNALS: &[&str] = &["wasmtime", "cranelift", "regalloc2", "wasmparser", "winch"];

/// The tracing filter of `-v level`.
pub fn filter(level: u8) -> String {
    let ours = match level {
        0 => "warn",
        1..=3 => "info",
        4..=9 => "debug",
        _ => "trace",
    };
    let mut f = format!("warn,wasmsched={ours},wasmsched_engine={ours}");
    for c in ENGINE_INTERNALS {
        let _ = write!(f, ",{c}=warn");
    }
    f
}

/// The filter `--log` gives, with the wasm engine's internals still
/// capped unless it names them.
pub fn with_internals_capped(directives: &str) -> String {
    let mut f = directives.to_string();
    for c in ENGINE_INTERNALS {
        if !directives.contains(c) {
            let _ = write!(f, ",{c}=warn");
        }
    }
    f
}

/// The `-v` level a tracing level stands for in JSON lines.
fn level_v(level: &Level) -> u8 {
    match *level {
        Level::ERROR | Level::WARN | Level::INFO => 0,
        Level::DEBUG => 4,
        Level::TRACE => 10,
    }
}

/// klog's JSON format.
pub struct KubeJson;

#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, name: &str, value: Value) {
        let key = match name {
            "message" => "msg",
            "error" => "err",
            n => n,
        };
        let value = match (key, value) {
            ("pod", Value::String(s)) => object_ref(&s),
            ("node", Value::String(s)) => serde_json::json!({"name": s}),
            (_, v) => v,
        };
        self.0.insert(key.to_string(), value);
    }
}

/// `ns/name` as klog's `KObj` in JSON.
fn object_ref(key: &str) -> Value {
    match key.split_once('/') {
        Some((ns, name)) => serde_json::json!({"name": name, "namespace": ns}),
        None => serde_json::json!({"name": key}),
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field.name(), Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field.name(), Value::String(value.to_string()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field.name(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field.name(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field.name(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field.name(), value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field.name(), Value::String(value.to_string()));
    }
}

impl<S, N> FormatEvent<S, N> for KubeJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut line = Map::new();
        line.insert("ts".into(), ts.into());
        if let Some(file) = meta.file() {
            let caller = format!("{}:{}", file, meta.line().unwrap_or(0));
            line.insert("caller".into(), caller.into());
        }
        let msg = fields
            .0
            .remove("msg")
            .unwrap_or(Value::String(String::new()));
        line.insert("msg".into(), msg);
        let v = fields.0.remove("v").unwrap_or(level_v(meta.level()).into());
        if *meta.level() > Level::WARN {
            line.insert("v".into(), v);
        }
        line.extend(fields.0);
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_klog() {
        assert!(filter(0).starts_with("warn,wasmsched=warn"));
        assert!(filter(2).starts_with("warn,wasmsched=info"));
        assert!(filter(4).starts_with("warn,wasmsched=debug"));
        assert!(filter(10).starts_with("warn,wasmsched=trace"));
        for v in [0, 4, 10] {
            assert!(filter(v).contains(",cranelift=warn"), "{v}");
            assert!(filter(v).contains(",wasmtime=warn"), "{v}");
        }
        assert_eq!(
            with_internals_capped("debug,wasmtime=debug"),
            "debug,wasmtime=debug,cranelift=warn,regalloc2=warn,wasmparser=warn,winch=warn"
        );
    }

    #[test]
    fn pods_and_nodes_are_object_refs() {
        let mut f = Fields::default();
        f.put("pod", "ml/train-0".into());
        f.put("node", "gpu-1".into());
        f.put("error", "boom".into());
        f.put("message", "m".into());
        assert_eq!(
            Value::Object(f.0),
            serde_json::json!({
                "pod": {"name": "train-0", "namespace": "ml"},
                "node": {"name": "gpu-1"},
                "err": "boom",
                "msg": "m"
            })
        );
    }
}
