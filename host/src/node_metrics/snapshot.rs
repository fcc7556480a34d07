//! `simulate --metrics FILE`: node metrics from a file, so that a what-if
//! run uses the values the cluster had. Two formats:
//!
//! - Prometheus's text format (what dcgm-exporter serves on `/metrics`,
//!   or `promtool`/federation output): each sample whose series name is a
//!   configured metric name;
//! - a query API answer as `curl` prints it (`{"status":"success",
//!   "data":{"resultType":"vector",...}}`), each sample named by its
//!   `__name__` label (ask for the series themselves, e.g.
//!   `{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_FREE"}`).
//!
//! Ages are relative to the newest sample of the file (a sample without
//! a timestamp is as new as the file); values older than `staleAfter`
//! are unknown, as in `run`.

use std::collections::BTreeMap;
use std::path::Path;

use super::config::Naming;
use super::store::{device_metric, Store};
use crate::prometheus::{Answer, Sample};

/// The node metrics a file holds.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub store: Store,
    /// The newest sample's time (seconds since the epoch).
    pub now: f64,
    /// Where the values came from, for `--explain` (`file PATH`).
    pub source: String,
}

#[derive(Debug, thiserror::Error)]
#[error("--metrics {path}: {cause}")]
pub struct SnapshotError {
    pub path: String,
    pub cause: String,
}

/// Reads `path`.
pub fn load(path: &Path, naming: &Naming) -> Result<Snapshot, SnapshotError> {
    let fail = |cause: String| SnapshotError {
        path: path.display().to_string(),
        cause,
    };
    let limit = crate::input::Limits::DEFAULT.file_bytes;
    let len = std::fs::metadata(path)
        .map_err(|e| fail(e.to_string()))?
        .len();
    if len > limit {
        return Err(fail(format!(
            "{} is larger than the limit of {}",
            crate::input::bytes(len),
            crate::input::bytes(limit)
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let samples = if text.trim_start().starts_with('{') {
        api_samples(&text).map_err(fail)?
    } else {
        text_samples(&text).map_err(fail)?
    };
    if samples.is_empty() {
        return Err(fail("no samples".into()));
    }
    let now = samples.iter().map(|(_, s)| s.at).fold(f64::MIN, f64::max);
    let mut store = Store::default();
    let mut by_metric: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
    for (name, s) in samples {
        if let Some((metric, _)) = naming.queries.get_key_value(name.as_str()) {
            by_metric.entry(metric.as_str()).or_default().push(s);
        }
    }
    if by_metric.is_empty() {
        return Err(fail(format!(
            "no series named {}",
            naming
                .queries
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    for (metric, samples) in by_metric {
        // The node's value from all its devices at once (their mean), as
        // old as its newest sample; then each device's as old as its own.
        let mut per_node: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for s in &samples {
            if let Some(n) = s.labels.get(&naming.node_label) {
                per_node.entry(n.as_str()).or_default().push(s.clone());
            }
        }
        for (node, all) in per_node {
            let at = all.iter().map(|s| s.at).fold(f64::MIN, f64::max);
            store.ingest(naming, metric, &all, at);
            for s in &all {
                if let Some(device) = s.labels.get(&naming.device_label) {
                    if s.value.is_finite() && s.value >= 0.0 {
                        store.set(node, device_metric(metric, device), s.value, s.at);
                    }
                }
            }
        }
    }
    store.expire(naming.stale_after, now);
    Ok(Snapshot {
        store,
        now,
        source: format!("file {}", path.display()),
    })
}

/// The samples of a query API answer, with their `__name__`.
fn api_samples(text: &str) -> Result<Vec<(String, Sample)>, String> {
    let samples = match crate::prometheus::parse_answer(200, text).map_err(|e| e.to_string())? {
        Answer::Vector(v) => v,
        Answer::Scalar(_) => return Err("a scalar, not series per node".into()),
    };
    samples
        .into_iter()
        .map(|mut s| {
            let name = s.labels.remove("__name__").ok_or_else(|| {
                "a sample has no __name__ label (query the series themselves, not an expression)"
                    .to_string()
            })?;
            Ok((name, s))
        })
        .collect()
}

/// The samples of a text exposition.
fn text_samples(text: &str) -> Result<Vec<(String, Sample)>, String> {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .map_err(|e| format!("not Prometheus text format: {e}"))?;
    Ok(scrape
        .samples
        .into_iter()
        .filter_map(|s| {
            let value = match s.value {
                prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            let labels = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let sample = Sample {
                labels,
                value,
                at: s.timestamp.timestamp_millis() as f64 / 1000.0,
            };
            Some((s.metric, sample))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmsched-snapshot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn text_and_api_files() {
        let naming = Naming::default();
        let text = "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 20 1700000000000\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"n1\"} 40 1700000000000\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-c\",Hostname=\"n2\"} 90 1700000030000\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-d\",Hostname=\"old\"} 5 1699999000000\n\
            other_metric{Hostname=\"n1\"} 1 1700000030000\n";
        let s = load(&write("m.prom", text), &naming).unwrap();
        assert_eq!(s.now, 1_700_000_030.0);
        let n1 = s.store.node("n1").unwrap();
        assert_eq!(n1["DCGM_FI_DEV_GPU_UTIL"].value, 30.0);
        assert_eq!(s.now - n1["DCGM_FI_DEV_GPU_UTIL"].seen, 30.0);
        assert_eq!(n1["DCGM_FI_DEV_GPU_UTIL/GPU-b"].value, 40.0);
        assert!(s.store.node("old").is_none(), "older than staleAfter");
        let api = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_FB_FREE","Hostname":"n1","UUID":"GPU-a"},"value":[1700000000,"1024"]}]}}"#;
        let s = load(&write("m.json", api), &naming).unwrap();
        assert_eq!(
            s.store.node("n1").unwrap()["DCGM_FI_DEV_FB_FREE"].value,
            1024.0
        );
        let unnamed = api.replace(r#""__name__":"DCGM_FI_DEV_FB_FREE","#, "");
        let e = load(&write("u.json", &unnamed), &naming)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no __name__ label"), "{e}");
        let e = load(&write("e.prom", "nothing_here 1\n"), &naming)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("no series named DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_GPU_UTIL"),
            "{e}"
        );
    }
}
