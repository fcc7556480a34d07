//! Time spent per plugin and extension point, summed over worker threads
//! (so it is CPU time, comparable across plugins). Recorded once per plugin
//! per chunk of nodes, not per node, to stay off the hot path.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

/// Calls and total time of one plugin at one extension point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    pub calls: u64,
    pub total: Duration,
}

/// Where a running scheduler sends timings as they happen (its
/// Prometheus histograms); `simulate` and `bench` have none.
pub trait TimingSink: Send + Sync {
    /// One plugin at one extension point (per chunk of nodes for Filter).
    fn plugin(&self, profile: &str, plugin: &str, point: &'static str, elapsed: Duration);
    /// One extension point of one cycle, all plugins together.
    fn extension_point(
        &self,
        profile: &str,
        point: &'static str,
        status: &'static str,
        elapsed: Duration,
    );
}

/// Per (plugin, extension point) timings of a framework.
#[derive(Default)]
pub struct Timings {
    inner: Mutex<BTreeMap<(String, &'static str), Timing>>,
    sink: OnceLock<(String, Arc<dyn TimingSink>)>,
}

impl std::fmt::Debug for Timings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timings")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Timings {
    /// Also sends every timing to `sink`, labelled with `profile` (set once).
    pub fn set_sink(&self, profile: &str, sink: Arc<dyn TimingSink>) {
        let _ = self.sink.set((profile.to_string(), sink));
    }

    /// Records the duration of a whole extension point in one cycle.
    pub fn extension_point(&self, point: &'static str, status: &'static str, elapsed: Duration) {
        if let Some((profile, sink)) = self.sink.get() {
            sink.extension_point(profile, point, status, elapsed);
        }
    }

    pub fn record(&self, plugin: &str, point: &'static str, elapsed: Duration) {
        if let Some((profile, sink)) = self.sink.get() {
            sink.plugin(profile, plugin, point, elapsed);
        }
        let mut m = self.inner.lock();
        let t = match m.get_mut(&(plugin.to_string(), point)) {
            Some(t) => t,
            None => m.entry((plugin.to_string(), point)).or_default(),
        };
        t.calls += 1;
        t.total += elapsed;
    }

    /// ((plugin, extension point), timing), sorted by plugin then point.
    pub fn snapshot(&self) -> Vec<((String, &'static str), Timing)> {
        self.inner
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}
