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

pub use crate::prometheus::parse_value;
use crate::prometheus::{root_cause, Answer, QueryError};

impl From<QueryError> for Fault {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Unreachable(m) => Fault::PrometheusUnreachable(m),
            QueryError::BadResponse(m) => Fault::PrometheusBadResponse(m),
        }
    }
}

/// One series (or a scalar) is the value, no series is `None`.
fn one_value(answer: Answer) -> Reading {
    let v = match answer {
        Answer::Scalar(v) => v,
        Answer::Vector(v) => match &v[..] {
            [] => return Ok(None),
            [one] => one.value,
            many => return Err(Fault::MultipleSeries(many.len())),
        },
    };
    check(v).map(Some)
}

/// Interprets the body of an instant query: one sample (or a scalar) is
/// the value, no sample is `None`.
pub fn parse_query_response(status: u16, body: &str) -> Reading {
    one_value(crate::prometheus::parse_answer(status, body)?)
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
    client: crate::prometheus::Client,
    prometheus: Option<PrometheusSource>,
    endpoint: Option<PodEndpointSource>,
}

/// The readings of every pod (by UID) in one pass.
pub type Readings = BTreeMap<String, BTreeMap<String, Reading>>;

impl Collector {
    pub fn new(prometheus: Option<PrometheusSource>, endpoint: Option<PodEndpointSource>) -> Self {
        Collector {
            client: crate::prometheus::Client::default(),
            prometheus,
            endpoint,
        }
    }

    async fn query(&self, p: &PrometheusSource, query: &str) -> Reading {
        one_value(self.client.query(&p.endpoint, query).await?)
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
        let resp = match self.client.http().get(&url).timeout(e.timeout).send().await {
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
