//! The one client of Prometheus's HTTP API, shared by the deletion-cost
//! controller (`deletionCost.prometheus`) and the node-metrics source
//! (`nodeMetrics.prometheus`): the connection settings of a `prometheus:`
//! section (URL, per-query timeout, bearer token file), instant queries,
//! and the limits every answer is held to (size, sample values).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::file::PrometheusFile;
use crate::config::ConfigError;

/// The largest answer read from Prometheus; a larger one is a bad
/// response (it would hold the scheduler's memory hostage). 5000 nodes of
/// 8 GPUs, 3 DCGM series each, take about 40 MiB.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;
/// The default deadline of one query.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where Prometheus is and how to reach it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: reqwest::Url,
    pub timeout: Duration,
    /// Sent as `Authorization: Bearer ...`, read again for every query (a
    /// projected service-account token is rotated in place).
    pub bearer_token_file: Option<PathBuf>,
}

fn err(field: impl Into<String>, cause: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        cause: cause.into(),
    }
}

impl Endpoint {
    /// The connection settings of the `prometheus:` section at `field`
    /// (`queries` is the caller's).
    pub fn from_file(field: &str, p: &PrometheusFile) -> Result<Self, ConfigError> {
        let url = reqwest::Url::parse(&p.url).map_err(|e| {
            err(
                format!("{field}.url"),
                format!("invalid URL {:?}: {e}", p.url),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(err(
                format!("{field}.url"),
                format!("{:?}: must be an http or https URL", p.url),
            ));
        }
        let timeout = match &p.timeout {
            None => DEFAULT_TIMEOUT,
            Some(s) => {
                let d = humantime::parse_duration(s).map_err(|e| {
                    err(
                        format!("{field}.timeout"),
                        format!("invalid duration {s:?}: {e}"),
                    )
                })?;
                if d.is_zero() {
                    return Err(err(format!("{field}.timeout"), "must be positive"));
                }
                d
            }
        };
        if let Some(f) = &p.bearer_token_file {
            if f.as_os_str().is_empty() {
                return Err(err(format!("{field}.bearerTokenFile"), "must not be empty"));
            }
        }
        Ok(Endpoint {
            url,
            timeout,
            bearer_token_file: p.bearer_token_file.clone(),
        })
    }
}

/// Why a query has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// No answer at all (connection refused, timed out, token unreadable).
    #[error("Prometheus unreachable: {0}")]
    Unreachable(String),
    /// An answer that is not a usable query result.
    #[error("Prometheus: {0}")]
    BadResponse(String),
}

/// One series of an instant vector: its labels and its value as
/// Prometheus wrote it (`NaN` and infinities included; callers check).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    /// The sample's timestamp (the query's evaluation time), in seconds
    /// since the Unix epoch.
    pub at: f64,
}

/// The result of an instant query.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Vector(Vec<Sample>),
    Scalar(f64),
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
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// Interprets the body of an instant query (as `curl` of
/// `/api/v1/query` prints it).
pub fn parse_answer(status: u16, body: &str) -> Result<Answer, QueryError> {
    let resp: ApiResponse = serde_json::from_str(body).map_err(|e| {
        let snippet: String = body.chars().take(80).collect();
        QueryError::BadResponse(format!(
            "HTTP {status}, not a query API response ({e}): {snippet:?}"
        ))
    })?;
    if resp.status != "success" {
        return Err(QueryError::BadResponse(format!(
            "HTTP {status}, {}: {}",
            resp.error_type.unwrap_or_else(|| "error".into()),
            resp.error.unwrap_or_default()
        )));
    }
    let value = |raw: &str| {
        parse_value(raw)
            .ok_or_else(|| QueryError::BadResponse(format!("sample value {raw:?} is not a number")))
    };
    match resp.data {
        Some(ApiData::Vector(v)) => v
            .into_iter()
            .map(|s| {
                Ok(Sample {
                    value: value(&s.value.1)?,
                    at: s.value.0,
                    labels: s.metric,
                })
            })
            .collect::<Result<_, _>>()
            .map(Answer::Vector),
        Some(ApiData::Scalar((_, v))) => value(&v).map(Answer::Scalar),
        Some(ApiData::Matrix(_)) | Some(ApiData::String(_)) | None => Err(QueryError::BadResponse(
            "the query must return an instant vector or a scalar".into(),
        )),
    }
}

/// The HTTP client (one connection pool) for every query.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_else(|_| reqwest::Client::new()),
        }
    }
}

impl Client {
    /// The HTTP client, for the deletion-cost controller's scrapes of pod
    /// endpoints.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Runs one instant query.
    pub async fn query(&self, ep: &Endpoint, query: &str) -> Result<Answer, QueryError> {
        let url = ep
            .url
            .join("api/v1/query")
            .map_err(|e| QueryError::BadResponse(format!("URL: {e}")))?;
        let mut req = self
            .http
            .get(url)
            .query(&[("query", query)])
            .timeout(ep.timeout);
        if let Some(f) = &ep.bearer_token_file {
            let token = std::fs::read_to_string(f).map_err(|e| {
                QueryError::Unreachable(format!("bearer token file {}: {e}", f.display()))
            })?;
            req = req.bearer_auth(token.trim());
        }
        let unreachable = |what: &str, e: &reqwest::Error| {
            QueryError::Unreachable(format!("{}: {what}{}", ep.url, root_cause(e)))
        };
        let mut resp = req.send().await.map_err(|e| unreachable("", &e))?;
        let status = resp.status().as_u16();
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| unreachable("reading the answer: ", &e))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(QueryError::BadResponse(format!(
                    "query {query:?}: the answer is larger than {} MiB",
                    MAX_ANSWER_BYTES >> 20
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let body = String::from_utf8_lossy(&body);
        parse_answer(status, &body).map_err(|e| match e {
            QueryError::BadResponse(m) => QueryError::BadResponse(format!("query {query:?}: {m}")),
            e => e,
        })
    }
}

/// The innermost cause of an HTTP error ("Connection refused"), which is
/// what an operator needs, on one line.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
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
    fn answers() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"a","UUID":"GPU-1"},"value":[1700000000.5,"12.5"]},{"metric":{},"value":[1700000000.5,"NaN"]}]}}"#;
        let Ok(Answer::Vector(v)) = parse_answer(200, ok) else {
            panic!("not a vector")
        };
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].labels["UUID"], "GPU-1");
        assert_eq!((v[0].value, v[0].at), (12.5, 1700000000.5));
        assert!(v[1].value.is_nan());
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        assert_eq!(parse_answer(200, scalar), Ok(Answer::Scalar(3.0)));
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(parse_answer(200, matrix).is_err());
        let word = ok.replace("12.5", "twelve");
        assert_eq!(
            parse_answer(200, &word),
            Err(QueryError::BadResponse(
                "sample value \"twelve\" is not a number".into()
            ))
        );
    }

    #[test]
    fn endpoints() {
        let file = |url: &str, timeout: Option<&str>| PrometheusFile {
            url: url.into(),
            timeout: timeout.map(str::to_string),
            ..Default::default()
        };
        let ep = Endpoint::from_file("x", &file("http://p:9090/", Some("2s"))).unwrap();
        assert_eq!(ep.timeout, Duration::from_secs(2));
        let e = Endpoint::from_file("x", &file("ftp://p", None)).unwrap_err();
        assert_eq!(e.field, "x.url");
        let e = Endpoint::from_file("x", &file("http://p", Some("0s"))).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.cause.as_str()),
            ("x.timeout", "must be positive")
        );
    }
}
