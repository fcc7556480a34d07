//! `wasmsched run`'s node-metrics source: every `interval`, one instant
//! query per configured metric to Prometheus (the shared client of
//! [`crate::prometheus`], with its timeout, token and answer-size limit),
//! then the store's values, without the stale ones, handed to the
//! scheduler's cache. It runs on its own task: Prometheus down, slow or
//! answering garbage never delays a scheduling cycle; plugins then see
//! the last values until they are older than `staleAfter`, then none.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::config::NodeMetricsConfig;
use super::store::Store;
use super::telemetry::Telemetry;
use crate::prometheus::{Answer, Client, Endpoint, QueryError};

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

/// The poller's state between passes.
pub struct Source {
    cfg: NodeMetricsConfig,
    endpoint: Endpoint,
    client: Client,
    store: Store,
    /// The cause of the last failed pass (logged when it changes).
    failing: Option<String>,
}

impl Source {
    /// `None` when the configuration names no Prometheus.
    pub fn new(cfg: NodeMetricsConfig) -> Option<Self> {
        let endpoint = cfg.prometheus.clone()?;
        Some(Source {
            cfg,
            endpoint,
            client: Client::default(),
            store: Store::default(),
            failing: None,
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// One pass at `now` (seconds since the epoch): every query, then the
    /// stale values dropped. Returns the first failure, if any.
    pub async fn pass(&mut self, now: f64) -> Result<(), QueryError> {
        let t = Telemetry::global();
        let mut first_error = None;
        let mut series = 0;
        for (metric, query) in &self.cfg.naming.queries {
            let started = std::time::Instant::now();
            let answer = self.client.query(&self.endpoint, query).await;
            t.query_duration
                .with_label_values(&[metric])
                .observe(started.elapsed().as_secs_f64());
            let samples = match answer {
                Ok(Answer::Vector(v)) => v,
                Ok(Answer::Scalar(_)) => {
                    let e = QueryError::BadResponse(format!(
                        "query {query:?} (metric {metric}): a scalar, not series per node"
                    ));
                    t.errors
                        .with_label_values(&["prometheus-bad-response"])
                        .inc();
                    first_error.get_or_insert(e);
                    continue;
                }
                Err(e) => {
                    let unreachable = matches!(e, QueryError::Unreachable(_));
                    let cause = if unreachable {
                        "prometheus-unreachable"
                    } else {
                        "prometheus-bad-response"
                    };
                    t.errors.with_label_values(&[cause]).inc();
                    first_error.get_or_insert(e);
                    // The other queries would wait for the same timeout.
                    if unreachable {
                        break;
                    }
                    continue;
                }
            };
            let got = self.store.ingest(&self.cfg.naming, metric, &samples, now);
            series += got.series;
            t.errors
                .with_label_values(&["sample-unlabeled"])
                .inc_by(got.unlabeled as u64);
            t.errors
                .with_label_values(&["sample-invalid"])
                .inc_by(got.invalid as u64);
        }
        self.store.expire(self.cfg.naming.stale_after, now);
        t.up.set(i64::from(first_error.is_none()));
        t.series.set(series as i64);
        t.nodes.set(self.store.nodes() as i64);
        t.oldest_age.set(self.store.oldest_age(now));
        self.log(&first_error);
        match first_error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// One line when a pass fails for a new cause, one when it recovers.
    fn log(&mut self, error: &Option<QueryError>) {
        match (error, &self.failing) {
            (Some(e), last) if last.as_deref() != Some(e.to_string().as_str()) => {
                tracing::warn!(
                    error = %e,
                    stale_after = %humantime::format_duration(self.cfg.naming.stale_after),
                    "node metrics: query failed; nodes keep their last values until they are stale, then have none"
                );
                self.failing = Some(e.to_string());
            }
            (None, Some(_)) => {
                tracing::info!("node metrics: Prometheus answers again");
                self.failing = None;
            }
            _ => {}
        }
    }
}

/// Polls until the task is aborted, handing each pass's node metrics to
/// `apply` (which replaces the cache's).
pub async fn run<F>(cfg: NodeMetricsConfig, mut apply: F)
where
    F: FnMut(HashMap<String, Vec<(String, f64)>>) + Send,
{
    let interval = cfg.interval;
    let Some(mut source) = Source::new(cfg) else {
        return;
    };
    tracing::info!(
        url = %source.endpoint.url,
        interval = %humantime::format_duration(interval),
        metrics = ?source.cfg.naming.queries.keys().collect::<Vec<_>>(),
        "node metrics: polling Prometheus"
    );
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let _ = source.pass(unix_now()).await;
        apply(source.store().node_metrics());
    }
}
