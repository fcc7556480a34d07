//! Live metrics of pods: Prometheus's HTTP API (one instant query per pod
//! and metric, from the configured PromQL templates) and each pod's own
//! metrics endpoint (Prometheus text format).
//!
//! Every value is checked: a metric must be a finite number >= 0. Anything
//! else, and every failure to get it, is a [`Fault`] naming the metric and
//! the cause; the controller then holds the pod's cost (no write) and
//! counts the fault, rather than writing a cost computed from garbage.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use serde::Deserialize;

use super::config::{PodEndpointSource, PrometheusSource};
use super::facts::PodFacts;

/// Pod annotations that override `podMetrics.port` / `podMetrics.path`
/// (the common scrape convention).
pub const PORT_ANNOTATION: &str = "prometheus.io/port";
pub const PATH_ANNOTATION: &str = "prometheus.io/path";

/// Queries or scrapes in flight at once.
const CONCURRENCY: usize = 8;

/// Why a metric of a pod has no usable value this pass.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Fault {
    #[error("Prometheus unreachable: {0}")]
    PrometheusUnreachable(String),
    #[error("Prometheus: {0}")]
    PrometheusBadResponse(String),
    #[error("pod metrics endpoint {url} unreachable: {cause}")]
    EndpointUnreachable { url: String, cause: String },
    #[error("pod metrics endpoint: {0}")]
    EndpointBadResponse(String),
    #[error("value is NaN")]
    NaN,
    #[error("value {0} is infinite")]
    Infinite(f64),
    #[error("value {0} is negative")]
    Negative(f64),
    #[error("{0} series where one is expected")]
    MultipleSeries(usize),
    #[error("series is missing (last value {last} at {at})")]
    Missing {
        last: f64,
        at: k8s_openapi::jiff::Timestamp,
    },
}

impl Fault {
    /// The `cause` label of `wasmsched_deletion_cost_errors_total`.
    pub fn cause(&self) -> &'static str {
        match self {
            Fault::PrometheusUnreachable(_) => "prometheus-unreachable",
            Fault::PrometheusBadResponse(_) => "prometheus-bad-response",
            Fault::EndpointUnreachable { .. } => "pod-endpoint-unreachable",
            Fault::EndpointBadResponse(_) => "pod-endpoint-bad-response",
            Fault::NaN => "metric-nan",
            Fault::Infinite(_) => "metric-infinite",
            Fault::Negative(_) => "metric-negative",
            Fault::MultipleSeries(_) => "metric-multiple-series",
            Fault::Missing { .. } => "metric-missing",
        }
    }
}

/// One metric of one pod as a source answered: a value, no series, or a
/// fault.
pub type Reading = Result<Option<f64>, Fault>;

/// A value the policy may use: finite and not negative.
pub fn check(v: f64) -> Result<f64, Fault> {
    if v.is_nan() {
        Err(Fault::NaN)
    } else if v.is_infinite() {
        Err(Fault::Infinite(v))
    } else if v < 0.0 {
        Err(Fault::Negative(v))
    } else {
        Ok(v)
    }
}

/// Parses a sample value as Prometheus writes it (`NaN`, `+Inf`, `-Inf`,
/// decimals).
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        s => s.parse().ok(),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiResponse {
    status: String,
    data: Option<ApiData>,
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum ApiData {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    // Read only to say that they are the wrong kind of result.
    #[allow(dead_code)]
    Matrix(serde_json::Value),
    #[allow(dead_code)]
    String(serde_json::Value),
}

#[derive(Deserialize)]
struct VectorSample {
    value: (f64, String),
}

/// Interprets the body of an instant query: one sample (or a scalar) is
/// the value, no sample is `None`.
pub fn parse_query_response(status: u16, body: &str) -> Reading {
    let resp: ApiResponse = serde_json::from_str(body).map_err(|e| {
        let snippet: String = body.chars().take(80).collect();
        Fault::PrometheusBadResponse(format!(
            "HTTP {status}, not a query API response ({e}): {snippet:?}"
        ))
    })?;
    if resp.status != "success" {
        return Err(Fault::PrometheusBadResponse(format!(
            "HTTP {status}, {}: {}",
            resp.error_type.unwrap_or_else(|| "error".into()),
            resp.error.unwrap_or_default()
        )));
    }
    let raw = match resp.data {
        Some(ApiData::Vector(v)) => match &v[..] {
            [] => return Ok(None),
            [one] => one.value.1.clone(),
            many => return Err(Fault::MultipleSeries(many.len())),
        },
        Some(ApiData::Scalar((_, v))) => v,
        Some(ApiData::Matrix(_)) | Some(ApiData::String(_)) | None => {
            return Err(Fault::PrometheusBadResponse(
                "the query must return an instant vector or a scalar".into(),
            ))
        }
    };
    let v = parse_value(&raw).ok_or_else(|| {
        Fault::PrometheusBadResponse(format!("sample value {raw:?} is not a number"))
    })?;
    check(v).map(Some)
}

/// The values of `metrics` (metric name -> series name) in a text
/// exposition.
pub fn parse_exposition(
    body: &str,
    metrics: &BTreeMap<String, String>,
) -> BTreeMap<String, Reading> {
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())));
    let samples = match scrape {
        Ok(s) => s.samples,
        Err(e) => {
            let f = Fault::EndpointBadResponse(format!("unreadable exposition: {e}"));
            return metrics
                .keys()
                .map(|m| (m.clone(), Err(f.clone())))
                .collect();
        }
    };
    metrics
        .iter()
        .map(|(name, series)| {
            let found: Vec<&prometheus_parse::Sample> =
                samples.iter().filter(|s| &s.metric == series).collect();
            let reading = match &found[..] {
                [] => Ok(None),
                [one] => match one.value {
                    prometheus_parse::Value::Counter(v)
                    | prometheus_parse::Value::Gauge(v)
                    | prometheus_parse::Value::Untyped(v) => check(v).map(Some),
                    _ => Err(Fault::EndpointBadResponse(format!(
                        "{series} is a histogram or summary, not a number"
                    ))),
                },
                many => Err(Fault::MultipleSeries(many.len())),
            };
            (name.clone(), reading)
        })
        .collect()
}

/// Fetches metrics from the configured sources.
pub struct Collector {
    http: reqwest::Client,
    prometheus: Option<PrometheusSource>,
    endpoint: Option<PodEndpointSource>,
}

/// The readings of every pod (by UID) in one pass.
pub type Readings = BTreeMap<String, BTreeMap<String, Reading>>;

impl Collector {
    pub fn new(prometheus: Option<PrometheusSource>, endpoint: Option<PodEndpointSource>) -> Self {
        Collector {
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_else(|_| reqwest::Client::new()),
            prometheus,
            endpoint,
        }
    }

    async fn query(&self, p: &PrometheusSource, query: &str) -> Reading {
        let url = p
            .url
            .join("api/v1/query")
            .map_err(|e| Fault::PrometheusBadResponse(format!("URL: {e}")))?;
        let resp = self
            .http
            .get(url)
            .query(&[("query", query)])
            .timeout(p.timeout)
            .send()
            .await
            .map_err(|e| Fault::PrometheusUnreachable(format!("{}: {}", p.url, root_cause(&e))))?;
        let status = resp.status().as_u16();
        let body = resp.text().await.map_err(|e| {
            Fault::PrometheusUnreachable(format!(
                "{}: reading the answer: {}",
                p.url,
                root_cause(&e)
            ))
        })?;
        parse_query_response(status, &body).map_err(|f| match f {
            Fault::PrometheusBadResponse(m) => {
                Fault::PrometheusBadResponse(format!("query {query:?}: {m}"))
            }
            f => f,
        })
    }

    async fn scrape(&self, e: &PodEndpointSource, pod: &PodFacts) -> BTreeMap<String, Reading> {
        let all = |f: Fault| {
            e.metrics
                .keys()
                .map(|m| (m.clone(), Err(f.clone())))
                .collect()
        };
        let Some(ip) = pod.pod_ip.as_deref() else {
            return all(Fault::EndpointBadResponse("the pod has no IP yet".into()));
        };
        let port = match pod.annotations.get(PORT_ANNOTATION) {
            None => e.port,
            Some(v) => match v.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => {
                    return all(Fault::EndpointBadResponse(format!(
                        "annotation {PORT_ANNOTATION}={v:?} is not a port"
                    )))
                }
            },
        };
        let path = pod
            .annotations
            .get(PATH_ANNOTATION)
            .filter(|p| p.starts_with('/'))
            .unwrap_or(&e.path);
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        let url = format!("http://{host}:{port}{path}");
        let resp = match self.http.get(&url).timeout(e.timeout).send().await {
            Ok(r) => r,
            Err(err) => {
                return all(Fault::EndpointUnreachable {
                    url,
                    cause: root_cause(&err),
                })
            }
        };
        if !resp.status().is_success() {
            return all(Fault::EndpointBadResponse(format!(
                "{url}: HTTP {}",
                resp.status()
            )));
        }
        match resp.text().await {
            Ok(body) => parse_exposition(&body, &e.metrics),
            Err(err) => all(Fault::EndpointUnreachable {
                url,
                cause: root_cause(&err),
            }),
        }
    }

    /// Every configured metric of every pod. When Prometheus is
    /// unreachable, the remaining queries of the pass are not sent (each
    /// would wait for its own timeout) and fail the same way.
    pub async fn collect(&self, pods: &[&PodFacts]) -> Readings {
        let down = Down::default();
        // A Vec of futures rather than a closure over the stream: the
        // future stays Send for any caller (no higher-ranked closure).
        let jobs: Vec<_> = pods
            .iter()
            .map(|pod| self.readings_of(pod, &down))
            .collect();
        futures::stream::iter(jobs)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await
    }

    async fn readings_of(
        &self,
        pod: &PodFacts,
        down: &Down,
    ) -> (String, BTreeMap<String, Reading>) {
        let mut readings = BTreeMap::new();
        if let Some(p) = &self.prometheus {
            for (name, q) in &p.queries {
                let reading = if down.flag.load(Ordering::Relaxed) {
                    Err(Fault::PrometheusUnreachable(down.cause.lock().clone()))
                } else {
                    let r = self.query(p, &q.render(&pod.namespace, &pod.name)).await;
                    if let Err(Fault::PrometheusUnreachable(c)) = &r {
                        *down.cause.lock() = c.clone();
                        down.flag.store(true, Ordering::Relaxed);
                    }
                    r
                };
                readings.insert(name.clone(), reading);
            }
        }
        if let Some(e) = &self.endpoint {
            readings.extend(self.scrape(e, pod).await);
        }
        (pod.uid.clone(), readings)
    }
}

/// Prometheus found unreachable during a pass, and why.
#[derive(Default)]
struct Down {
    flag: AtomicBool,
    cause: parking_lot::Mutex<String>,
}

/// The innermost cause of an HTTP error ("Connection refused"), which is
/// what an operator needs, on one line.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    let inner = cur.to_string();
    if e.to_string().contains("timed out") || inner.contains("timed out") {
        return "timed out".into();
    }
    inner.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_responses() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1700000000.1,"12.5"]}]}}"#;
        assert_eq!(parse_query_response(200, ok), Ok(Some(12.5)));
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(parse_query_response(200, empty), Ok(None));
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        assert_eq!(parse_query_response(200, scalar), Ok(Some(3.0)));
        let nan = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
        assert_eq!(parse_query_response(200, nan), Err(Fault::NaN));
        let neg = ok.replace("12.5", "-4");
        assert_eq!(parse_query_response(200, &neg), Err(Fault::Negative(-4.0)));
        let inf = ok.replace("12.5", "+Inf");
        assert_eq!(
            parse_query_response(200, &inf),
            Err(Fault::Infinite(f64::INFINITY))
        );
        let two = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]},{"metric":{},"value":[1,"2"]}]}}"#;
        assert_eq!(
            parse_query_response(200, two),
            Err(Fault::MultipleSeries(2))
        );
        let bad = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#;
        let e = parse_query_response(400, bad).unwrap_err().to_string();
        assert_eq!(e, "Prometheus: HTTP 400, bad_data: parse error at char 4");
        let garbage = parse_query_response(502, "<html>bad gateway</html>").unwrap_err();
        assert_eq!(garbage.cause(), "prometheus-bad-response");
        assert!(garbage.to_string().contains("HTTP 502"), "{garbage}");
    }

    #[test]
    fn exposition() {
        let body = "# HELP app_active_requests In flight.\n# TYPE app_active_requests gauge\napp_active_requests 7\n\
                    # TYPE app_conn gauge\napp_conn{port=\"80\"} 1\napp_conn{port=\"443\"} 2\n\
                    # TYPE app_bad gauge\napp_bad NaN\napp_neg -1\n";
        let metrics: BTreeMap<String, String> = [
            ("active_requests", "app_active_requests"),
            ("active_connections", "app_conn"),
            ("bad", "app_bad"),
            ("neg", "app_neg"),
            ("absent", "app_absent"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let r = parse_exposition(body, &metrics);
        assert_eq!(r["active_requests"], Ok(Some(7.0)));
        assert_eq!(r["active_connections"], Err(Fault::MultipleSeries(2)));
        assert_eq!(r["bad"], Err(Fault::NaN));
        assert_eq!(r["neg"], Err(Fault::Negative(-1.0)));
        assert_eq!(r["absent"], Ok(None));
    }
}
