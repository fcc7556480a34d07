//! client-go's API client metrics for the scheduler's client, under
//! client-go's names, labels and buckets (the Kubernetes mixin's
//! dashboards and alerts read them):
//!
//! - `rest_client_requests_total{code,host,method}`: requests by HTTP
//!   status (`<error>` when no response came);
//! - `rest_client_request_duration_seconds{verb,host}`: time until the
//!   response's headers (a watch: until it is established).
//!
//! A tower layer on the kube client's stack, registered in the process
//! registry `/metrics` serves.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// client-go's buckets of `rest_client_request_duration_seconds`.
pub const DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// The two families, registered once in the process registry.
pub struct RestMetrics {
    pub requests: IntCounterVec,
    pub duration: HistogramVec,
}

impl RestMetrics {
    /// The process's (registered in [`crate::metrics::Metrics::global`]).
    pub fn global() -> &'static RestMetrics {
        static M: OnceLock<RestMetrics> = OnceLock::new();
        M.get_or_init(|| {
            let m = RestMetrics {
                requests: IntCounterVec::new(
                    Opts::new(
                        "rest_client_requests_total",
                        "Number of HTTP requests, partitioned by status code, method, and host.",
                    ),
                    &["code", "host", "method"],
                )
                .expect("valid metric"),
                duration: HistogramVec::new(
                    HistogramOpts::new(
                        "rest_client_request_duration_seconds",
                        "Request latency in seconds. Broken down by verb, and host.",
                    )
                    .buckets(DURATION_BUCKETS.to_vec()),
                    &["verb", "host"],
                )
                .expect("valid metric"),
            };
            let registry = crate::metrics::Metrics::global().registry();
            let _ = registry.register(Box::new(m.requests.clone()));
            let _ = registry.register(Box::new(m.duration.clone()));
            m
        })
    }
}

/// The layer: counts and times every request of the client it wraps;
/// `host` is the API server's `host:port` (the stack's requests carry
/// only a path here).
#[derive(Clone)]
pub struct RestMetricsLayer {
    host: Arc<str>,
}

impl RestMetricsLayer {
    pub fn new(host: &str) -> Self {
        Self { host: host.into() }
    }
}

impl<S> tower::Layer<S> for RestMetricsLayer {
    type Service = RestMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestMetricsService {
            inner,
            host: self.host.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RestMetricsService<S> {
    inner: S,
    host: Arc<str>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB> tower::Service<Request<B>> for RestMetricsService<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let host = self.host.clone();
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let out = fut.await;
            let m = RestMetrics::global();
            let code = match &out {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            m.requests
                .with_label_values(&[code.as_str(), &host, &method])
                .inc();
            m.duration
                .with_label_values(&[method.as_str(), &host])
                .observe(started.elapsed().as_secs_f64());
            out
        })
    }
}

/// A client from `config` whose requests are counted and timed.
pub fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let host = config
        .cluster_url
        .authority()
        .map_or_else(String::new, |a| a.to_string());
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&RestMetricsLayer::new(&host))
        .build())
}
