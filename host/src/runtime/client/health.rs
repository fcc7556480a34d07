//! What the API server's answers say about it: client-go's request
//! metrics, the `Retry-After` it asked for (429 from API Priority and
//! Fairness, 503 when overloaded), whether it answers at all, and a
//! timeout on every request that is not a watch (a black-holed connection
//! must not hold a binding, a lease renewal or an event for ever).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use parking_lot::Mutex;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use tower::{BoxError, Layer, Service};

/// How long a request that is not a watch may wait for its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `Retry-After` honoured (a larger one is taken as this).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// client-go's buckets of `rest_client_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// client-go's `rest_client_*` metrics.
struct RestMetrics {
    requests: IntCounterVec,
    duration: HistogramVec,
    retries: IntCounterVec,
}

impl RestMetrics {
    fn register() -> Self {
        let m = Self {
            requests: IntCounterVec::new(
                Opts::new(
                    "rest_client_requests_total",
                    "Number of HTTP requests, partitioned by status code, method, and host.",
                ),
                &["code", "method", "host"],
            )
            .expect("valid metric"),
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "rest_client_request_duration_seconds",
                    "Request latency in seconds until the response headers (watches: until the watch is established). Broken down by verb and host.",
                )
                .buckets(DURATION_BUCKETS.to_vec()),
                &["verb", "host"],
            )
            .expect("valid metric"),
            retries: IntCounterVec::new(
                Opts::new(
                    "rest_client_request_retries_total",
                    "Number of request retries, partitioned by status code, verb, and host.",
                ),
                &["code", "verb", "host"],
            )
            .expect("valid metric"),
        };
        let registry = crate::metrics::Metrics::global().registry();
        let _ = registry.register(Box::new(m.requests.clone()));
        let _ = registry.register(Box::new(m.duration.clone()));
        let _ = registry.register(Box::new(m.retries.clone()));
        m
    }
}

/// The process's view of the API server.
pub struct ApiHealth {
    metrics: RestMetrics,
    /// Until when the server asked us to wait.
    retry_after_until: Mutex<Option<Instant>>,
    /// Answers 429 and 5xx (with or without Retry-After), ever.
    throttled: AtomicU64,
    unavailable: AtomicU64,
    /// The last Retry-After, seconds.
    last_retry_after: AtomicU64,
    /// Any answer received at all (the server was reached once).
    reached: AtomicBool,
    /// The last transport failure or timeout.
    last_error: Mutex<Option<String>>,
    host: Mutex<String>,
}

impl ApiHealth {
    /// The one instance of the process (every client reports to it).
    pub fn global() -> &'static Arc<ApiHealth> {
        static HEALTH: OnceLock<Arc<ApiHealth>> = OnceLock::new();
        HEALTH.get_or_init(|| {
            Arc::new(ApiHealth {
                metrics: RestMetrics::register(),
                retry_after_until: Mutex::new(None),
                throttled: AtomicU64::new(0),
                unavailable: AtomicU64::new(0),
                last_retry_after: AtomicU64::new(0),
                reached: AtomicBool::new(false),
                last_error: Mutex::new(None),
                host: Mutex::new(String::new()),
            })
        })
    }

    /// How long the server's last Retry-After still asks to wait.
    pub fn retry_after_left(&self) -> Duration {
        self.retry_after_until
            .lock()
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or_default()
    }

    /// Waits out the server's Retry-After, plus up to a fifth of it.
    pub async fn wait_retry_after(&self) {
        let left = self.retry_after_left();
        if !left.is_zero() {
            let extra = left.mul_f64(rand::random::<f64>() * 0.2);
            tokio::time::sleep(left + extra).await;
        }
    }

    /// 429 answers so far.
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }

    /// 503/504 answers so far.
    pub fn unavailable(&self) -> u64 {
        self.unavailable.load(Ordering::Relaxed)
    }

    /// The last Retry-After the server sent, seconds.
    pub fn last_retry_after(&self) -> u64 {
        self.last_retry_after.load(Ordering::Relaxed)
    }

    /// Whether any request was ever answered.
    pub fn reached(&self) -> bool {
        self.reached.load(Ordering::Acquire)
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// A caller retries a request the server refused with `code`.
    pub fn retried(&self, code: u16, verb: &str) {
        let host = self.host.lock().clone();
        self.metrics
            .retries
            .with_label_values(&[&code.to_string(), verb, &host])
            .inc();
    }

    fn answered(&self, code: u16, retry_after: Option<Duration>) {
        self.reached.store(true, Ordering::Release);
        match code {
            429 => {
                self.throttled.fetch_add(1, Ordering::Relaxed);
            }
            503 | 504 => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
            }
            _ => return,
        }
        if let Some(d) = retry_after {
            let d = d.min(MAX_RETRY_AFTER);
            self.last_retry_after.store(d.as_secs(), Ordering::Relaxed);
            let until = Instant::now() + d;
            let mut slot = self.retry_after_until.lock();
            if slot.is_none_or(|t| t < until) {
                *slot = Some(until);
            }
        }
    }

    fn failed(&self, error: String) {
        *self.last_error.lock() = Some(error);
    }
}

/// The layer every API client is built with.
#[derive(Clone)]
pub struct Observe {
    health: Arc<ApiHealth>,
}

impl Observe {
    pub fn new(health: &Arc<ApiHealth>) -> Self {
        Self {
            health: health.clone(),
        }
    }
}

impl<S> Layer<S> for Observe {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Observed {
            inner,
            health: self.health.clone(),
        }
    }
}

/// [`Observe`]'s service.
pub struct Observed<S> {
    inner: S,
    health: Arc<ApiHealth>,
}

/// A watch (`watch=true` or `watch=1` in the query) runs as long as the
/// server keeps it: it gets no timeout.
fn is_watch<B>(req: &Request<B>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

/// client-go's verb: the method, or WATCH / LIST for reads of a
/// collection.
fn verb<B>(req: &Request<B>, watch: bool) -> &'static str {
    match req.method().as_str() {
        "GET" if watch => "WATCH",
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        _ => "OTHER",
    }
}

fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

impl<S, B> Service<Request<kube::client::Body>> for Observed<S>
where
    S: Service<Request<kube::client::Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let watch = is_watch(&req);
        let verb = verb(&req, watch);
        let method = req.method().as_str().to_string();
        let host = req
            .uri()
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let health = self.health.clone();
        {
            let mut h = health.host.lock();
            if h.is_empty() {
                h.clone_from(&host);
            }
        }
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            // A request its caller gives up on (a timeout of its own) is
            // counted as failed, as client-go counts a cancelled context.
            let mut pending = Abandoned {
                health: Some(health.clone()),
                method: method.clone(),
                host: host.clone(),
            };
            let result = if watch {
                fut.await.map_err(Into::into)
            } else {
                match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
                    Ok(r) => r.map_err(Into::into),
                    Err(_) => Err(BoxError::from(format!(
                        "no answer within {}s",
                        REQUEST_TIMEOUT.as_secs()
                    ))),
                }
            };
            pending.health = None;
            let m = &health.metrics;
            m.duration
                .with_label_values(&[verb, &host])
                .observe(started.elapsed().as_secs_f64());
            match &result {
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    m.requests
                        .with_label_values(&[&code.to_string(), &method, &host])
                        .inc();
                    health.answered(code, retry_after(resp.headers()));
                }
                Err(e) => {
                    m.requests
                        .with_label_values(&["<error>", &method, &host])
                        .inc();
                    health.failed(e.to_string());
                }
            }
            result
        })
    }
}

/// Counts a request dropped before its answer (see [`Observed::call`]).
struct Abandoned {
    health: Option<Arc<ApiHealth>>,
    method: String,
    host: String,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(h) = self.health.take() {
            h.metrics
                .requests
                .with_label_values(&["<error>", &self.method, &self.host])
                .inc();
            h.failed("request abandoned before its answer".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_told_apart() {
        let r = |uri: &str| Request::get(uri).body(()).unwrap();
        assert!(is_watch(&r("/api/v1/pods?watch=true&resourceVersion=1")));
        assert!(is_watch(&r("/api/v1/nodes?resourceVersion=1&watch=1")));
        assert!(!is_watch(&r("/api/v1/pods?limit=500")));
        assert!(!is_watch(&r("/api/v1/namespaces/a/pods/watch-me")));
        assert_eq!(verb(&r("/api/v1/pods?watch=1"), true), "WATCH");
    }

    #[test]
    fn retry_after_is_kept_and_capped() {
        let h = ApiHealth::global();
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        h.answered(429, Some(Duration::from_secs(3600)));
        let left = h.retry_after_left();
        assert!(left <= MAX_RETRY_AFTER && left > Duration::from_secs(25));
        assert!(h.throttled() >= 1);
        *h.retry_after_until.lock() = None;
    }
}
