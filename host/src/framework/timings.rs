//! Time spent per plugin and extension point, summed over worker threads
//! (so it is CPU time, comparable across plugins). Recorded once per plugin
//! per chunk of nodes, not per node, to stay off the hot path.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

/// Calls and total time of one plugin at one extension point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    pub calls: u64,
    pub total: Duration,
}

/// Per (plugin, extension point) timings of a framework.
#[derive(Debug, Default)]
pub struct Timings {
    inner: Mutex<BTreeMap<(String, &'static str), Timing>>,
}

impl Timings {
    pub fn record(&self, plugin: &str, point: &'static str, elapsed: Duration) {
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
