//! The last good value of each pod's metrics. A series that disappears
//! after a pod had it is a fault (the exporter or Prometheus lost it) for
//! `staleAfter`, which holds the pod's cost; after that the metric counts
//! as absent, so a pod that stopped exposing a metric is not held forever.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::metrics_source::{Fault, Reading};

/// A pod's metrics for this pass: the values the policy gets, and the
/// faults that hold its cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    pub metrics: Vec<(String, f64)>,
    pub faults: Vec<(String, Fault)>,
}

#[derive(Debug, Default)]
pub struct LastValues {
    by_pod: HashMap<String, BTreeMap<String, (f64, Timestamp)>>,
}

impl LastValues {
    /// Folds one pass's readings of pod `uid` into the history.
    pub fn resolve(
        &mut self,
        uid: &str,
        readings: &BTreeMap<String, Reading>,
        now: Timestamp,
        stale_after: Duration,
    ) -> Resolved {
        let last = self.by_pod.entry(uid.to_string()).or_default();
        let mut out = Resolved::default();
        for (name, reading) in readings {
            match reading {
                Ok(Some(v)) => {
                    last.insert(name.clone(), (*v, now));
                    out.metrics.push((name.clone(), *v));
                }
                Ok(None) => match last.get(name) {
                    Some(&(v, at))
                        if now.as_millisecond() - at.as_millisecond()
                            < stale_after.as_millis() as i64 =>
                    {
                        out.faults
                            .push((name.clone(), Fault::Missing { last: v, at }));
                    }
                    _ => {
                        last.remove(name);
                    }
                },
                Err(f) => out.faults.push((name.clone(), f.clone())),
            }
        }
        out
    }

    /// The last good values of a pod.
    pub fn last(&self, uid: &str) -> Option<&BTreeMap<String, (f64, Timestamp)>> {
        self.by_pod.get(uid)
    }

    /// Forgets pods that are gone.
    pub fn retain(&mut self, live: &HashSet<&str>) {
        self.by_pod.retain(|uid, _| live.contains(uid.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn r(pairs: &[(&str, Reading)]) -> BTreeMap<String, Reading> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn a_series_that_disappears_holds_until_stale() {
        let mut h = LastValues::default();
        let stale = Duration::from_secs(60);
        let got = h.resolve("u", &r(&[("a", Ok(Some(3.0)))]), t(0), stale);
        assert_eq!(got.metrics, vec![("a".to_string(), 3.0)]);
        let held = h.resolve("u", &r(&[("a", Ok(None))]), t(30), stale);
        assert_eq!(
            held.faults,
            vec![(
                "a".to_string(),
                Fault::Missing {
                    last: 3.0,
                    at: t(0)
                }
            )]
        );
        let gone = h.resolve("u", &r(&[("a", Ok(None))]), t(61), stale);
        assert_eq!(gone, Resolved::default());
        // Never seen: simply absent.
        let never = h.resolve("v", &r(&[("a", Ok(None))]), t(0), stale);
        assert_eq!(never, Resolved::default());
    }

    #[test]
    fn faults_keep_the_last_value() {
        let mut h = LastValues::default();
        let stale = Duration::from_secs(60);
        h.resolve("u", &r(&[("a", Ok(Some(3.0)))]), t(0), stale);
        let got = h.resolve("u", &r(&[("a", Err(Fault::NaN))]), t(10), stale);
        assert_eq!(got.faults, vec![("a".to_string(), Fault::NaN)]);
        assert_eq!(h.last("u").unwrap()["a"], (3.0, t(0)));
        h.retain(&HashSet::new());
        assert!(h.last("u").is_none());
    }
}
