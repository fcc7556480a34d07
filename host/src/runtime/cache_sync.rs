//! Whether the cache is current: one entry per watch, each current only
//! between the end of a complete list and the next time its watch is lost
//! (a relist after 410 Gone, a dropped connection, an error). Scheduling
//! and binding run only while every entry is current: a cache where the
//! Pod watch has relisted and the Node watch has not yet — pods deleted
//! while the watches were down gone from it, their deleted nodes still in
//! it, empty — is exactly where pods were once bound to deleted nodes
//! (issue 30).
//!
//! The whole cache going stale and current again is logged once each way
//! (not once per watch), counted in metrics, and a relist is reported as
//! an Event (`CacheStale`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::mpsc;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

use super::events::Report;

/// The watches' metrics.
#[derive(Clone)]
pub struct SyncMetrics {
    /// `wasmsched_cache_synced{resource}`: 1 while the watch is current.
    pub synced: IntGaugeVec,
    /// `wasmsched_watch_relists_total{resource}`: lists after the first.
    pub relists: IntCounterVec,
    /// `wasmsched_watch_errors_total{resource}`: watches or lists lost.
    pub errors: IntCounterVec,
}

impl SyncMetrics {
    pub fn new() -> Self {
        Self {
            synced: IntGaugeVec::new(
                Opts::new(
                    "wasmsched_cache_synced",
                    "1 while the resource's watch is listed and connected; scheduling and binding wait while any is 0.",
                ),
                &["resource"],
            )
            .expect("valid metric"),
            relists: IntCounterVec::new(
                Opts::new(
                    "wasmsched_watch_relists_total",
                    "Complete lists of a resource after its first (a watch expired with 410 Gone, or a list failed).",
                ),
                &["resource"],
            )
            .expect("valid metric"),
            errors: IntCounterVec::new(
                Opts::new(
                    "wasmsched_watch_errors_total",
                    "Watches and lists of a resource that failed (connection lost, timeout, error answer).",
                ),
                &["resource"],
            )
            .expect("valid metric"),
        }
    }

    /// Registers them (a second registration in one process keeps the
    /// first).
    pub fn register(self, registry: &Registry) -> Self {
        let _ = registry.register(Box::new(self.synced.clone()));
        let _ = registry.register(Box::new(self.relists.clone()));
        let _ = registry.register(Box::new(self.errors.clone()));
        self
    }
}

impl Default for SyncMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a watch is not current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// Listing for the first time.
    Listing,
    /// Listing again: its watch expired (410 Gone) or the list failed.
    Relisting(String),
    /// Its watch was lost; it reconnects from where it was.
    Disconnected(String),
}

struct Entry {
    resource: String,
    /// What to check when it fails (a CRD to install, ...).
    hint: &'static str,
    state: Option<Stale>,
    /// Listed completely at least once.
    listed: bool,
}

struct Inner {
    entries: Vec<Entry>,
    /// When the cache last went stale after having been current.
    stale_since: Option<Instant>,
    /// Current once: from then on, staleness is news.
    ever_current: bool,
}

/// The registry of watches ([`crate::runtime::Shared::cache_sync`]).
pub struct CacheSync {
    inner: Mutex<Inner>,
    /// Entries not current (read on every cycle and bind).
    stale: AtomicUsize,
    metrics: SyncMetrics,
    reports: Mutex<Option<mpsc::UnboundedSender<Report>>>,
    start: Instant,
}

/// One watch's handle on the registry.
#[derive(Clone)]
pub struct Watched {
    sync: Arc<CacheSync>,
    index: usize,
}

impl CacheSync {
    pub fn new(metrics: SyncMetrics) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                entries: Vec::new(),
                stale_since: None,
                ever_current: false,
            }),
            stale: AtomicUsize::new(0),
            metrics,
            reports: Mutex::new(None),
            start: Instant::now(),
        })
    }

    /// Where scheduler-level events go (set once the recorder runs).
    pub fn report_to(&self, reports: mpsc::UnboundedSender<Report>) {
        *self.reports.lock() = Some(reports);
    }

    /// No more events (the recorder is stopping).
    pub fn stop_reporting(&self) {
        self.reports.lock().take();
    }

    /// A watch of `resource` (plural, lower case: `nodes`, `pods`, ...),
    /// not listed yet. Every watch registers before scheduling can start.
    pub fn register(self: &Arc<Self>, resource: &str) -> Watched {
        self.register_with_hint(resource, "")
    }

    /// As [`Self::register`], with what to check when the watch fails.
    pub fn register_with_hint(self: &Arc<Self>, resource: &str, hint: &'static str) -> Watched {
        let mut inner = self.inner.lock();
        inner.entries.push(Entry {
            hint,
            resource: resource.to_string(),
            state: Some(Stale::Listing),
            listed: false,
        });
        self.stale.fetch_add(1, Ordering::AcqRel);
        self.metrics.synced.with_label_values(&[resource]).set(0);
        Watched {
            sync: self.clone(),
            index: inner.entries.len() - 1,
        }
    }

    /// Every watch current.
    pub fn current(&self) -> bool {
        self.stale.load(Ordering::Acquire) == 0
    }

    /// The watches not current, with why (for `/readyz` and logs).
    pub fn stale(&self) -> Vec<(String, Stale)> {
        self.inner
            .lock()
            .entries
            .iter()
            .filter_map(|e| e.state.clone().map(|s| (e.resource.clone(), s)))
            .collect()
    }

    /// One line: `nodes relisting (410 Gone), pods disconnected (...)`.
    pub fn describe(&self) -> String {
        describe(&self.stale())
    }

    fn set(&self, index: usize, state: Option<Stale>) {
        let mut inner = self.inner.lock();
        let Some(entry) = inner.entries.get_mut(index) else {
            return;
        };
        if entry.state == state {
            return;
        }
        let was_current = entry.state.is_none();
        let resource = entry.resource.clone();
        // A relist starts (a failed list retried is the same relist).
        let relisting = match &state {
            Some(Stale::Relisting(why))
                if entry.listed && !matches!(entry.state, Some(Stale::Relisting(_))) =>
            {
                self.metrics.relists.with_label_values(&[&resource]).inc();
                Some(why.clone())
            }
            _ => None,
        };
        if state.is_none() {
            entry.listed = true;
        }
        entry.state = state;
        let now_current = entry.state.is_none();
        self.metrics
            .synced
            .with_label_values(&[&resource])
            .set(i64::from(now_current));
        let before = self.stale.load(Ordering::Acquire);
        let after = match (was_current, now_current) {
            (true, false) => before + 1,
            (false, true) => before - 1,
            _ => before,
        };
        self.stale.store(after, Ordering::Release);
        self.log_transition(&mut inner, before, after);
        if let Some(why) = relisting {
            if let Some(r) = self.reports.lock().as_ref() {
                let _ = r.send(Report::Scheduler {
                    warning: true,
                    reason: "CacheStale",
                    message: format!(
                        "the {resource} watch relists ({why}): scheduling and binding wait until it has listed"
                    ),
                });
            }
        }
    }

    /// Logs the whole cache going stale, or current again.
    fn log_transition(&self, inner: &mut Inner, before: usize, after: usize) {
        let stale: Vec<(String, Stale)> = inner
            .entries
            .iter()
            .filter_map(|e| e.state.clone().map(|s| (e.resource.clone(), s)))
            .collect();
        if before == 0 && after > 0 && inner.ever_current {
            inner.stale_since = Some(Instant::now());
            tracing::warn!(
                stale = %describe(&stale),
                "cache stale: scheduling and binding wait until every watch is current"
            );
        } else if before > 0 && after == 0 {
            if inner.ever_current {
                let took = inner
                    .stale_since
                    .take()
                    .map(|t| t.elapsed())
                    .unwrap_or(Duration::ZERO);
                // A warning too: the end of the one above, for logs kept
                // at warn.
                tracing::warn!(
                    after_ms = took.as_millis() as u64,
                    "cache current again: scheduling resumes"
                );
            } else {
                tracing::info!(
                    after_ms = self.start.elapsed().as_millis() as u64,
                    "caches synced"
                );
            }
            inner.ever_current = true;
        }
    }
}

fn describe(stale: &[(String, Stale)]) -> String {
    stale
        .iter()
        .map(|(r, s)| match s {
            Stale::Listing => format!("{r} listing"),
            Stale::Relisting(why) => format!("{r} relisting ({why})"),
            Stale::Disconnected(why) => format!("{r} disconnected ({why})"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Watched {
    /// The watch lists (again).
    pub fn listing(&self, why: &str) {
        let listed = self
            .sync
            .inner
            .lock()
            .entries
            .get(self.index)
            .is_some_and(|e| e.listed);
        self.sync.set(
            self.index,
            Some(if listed {
                Stale::Relisting(why.to_string())
            } else {
                Stale::Listing
            }),
        );
    }

    /// The watch was lost (it keeps a relist's reason if it was relisting).
    pub fn disconnected(&self, why: &str) {
        let state = self
            .sync
            .inner
            .lock()
            .entries
            .get(self.index)
            .and_then(|e| e.state.clone());
        if matches!(state, Some(Stale::Listing | Stale::Relisting(_))) {
            return;
        }
        self.sync
            .set(self.index, Some(Stale::Disconnected(why.to_string())));
    }

    /// Listed, and watching from there.
    pub fn current(&self) {
        self.sync.set(self.index, None);
    }

    pub fn hint(&self) -> &'static str {
        self.sync
            .inner
            .lock()
            .entries
            .get(self.index)
            .map(|e| e.hint)
            .unwrap_or("")
    }

    pub fn resource(&self) -> String {
        self.sync
            .inner
            .lock()
            .entries
            .get(self.index)
            .map(|e| e.resource.clone())
            .unwrap_or_default()
    }

    /// Counts a failed watch or list.
    pub fn error(&self) {
        let resource = self.resource();
        self.sync
            .metrics
            .errors
            .with_label_values(&[&resource])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Arc<CacheSync> {
        CacheSync::new(SyncMetrics::new())
    }

    #[test]
    fn current_only_when_every_watch_is() {
        let s = registry();
        assert!(s.current(), "nothing registered");
        let nodes = s.register("nodes");
        let pods = s.register("pods");
        assert!(!s.current());
        nodes.current();
        assert!(!s.current(), "pods still listing");
        pods.current();
        assert!(s.current());
        // The Pod watch relists and finishes while the Node watch is
        // still away: not current until the Node watch is back.
        nodes.disconnected("connection reset");
        pods.listing("410 Gone");
        pods.current();
        assert!(!s.current());
        assert_eq!(s.describe(), "nodes disconnected (connection reset)");
        nodes.listing("410 Gone");
        nodes.disconnected("list failed");
        assert_eq!(
            s.describe(),
            "nodes relisting (410 Gone)",
            "a relist stays a relist until listed"
        );
        nodes.current();
        assert!(s.current());
        assert_eq!(s.metrics.relists.with_label_values(&["nodes"]).get(), 1);
    }
}
