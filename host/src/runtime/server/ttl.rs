//! A small map whose entries expire: the review caches of [`super::auth`]
//! (kube-scheduler keeps TokenReview and SubjectAccessReview answers for
//! 10 s). Bounded: when full, expired entries are dropped, and if none
//! were, the new entry is not kept (a flood of distinct tokens costs
//! reviews, never memory).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    ttl: Duration,
    capacity: usize,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
            capacity,
        }
    }

    /// The value, unless absent or expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock();
        let (v, expires) = entries.get(key)?;
        (Instant::now() < *expires).then(|| v.clone())
    }

    pub fn put(&self, key: K, value: V) {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| *expires > now);
            if entries.len() >= self.capacity {
                return;
            }
        }
        entries.insert(key, (value, now + self.ttl));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_size_is_bounded() {
        let c = TtlCache::new(Duration::from_secs(3600), 2);
        c.put("a", 1);
        c.put("b", 2);
        c.put("c", 3);
        assert_eq!(
            (c.get(&"a"), c.get(&"b"), c.get(&"c")),
            (Some(1), Some(2), None)
        );
        c.put("a", 10);
        assert_eq!(c.get(&"a"), Some(10));
        assert_eq!(c.len(), 2);

        let c = TtlCache::new(Duration::ZERO, 2);
        c.put("a", 1);
        assert_eq!(c.get(&"a"), None, "expired at once");
        c.put("b", 2);
        // Full of expired entries: they make room.
        c.put("c", 3);
        assert_eq!(c.len(), 1);
    }
}
