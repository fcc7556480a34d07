//! The framework's clock, for plugins that keep time (a pod group's
//! backoff): the driver's time in milliseconds (virtual in `simulate`,
//! since start in `run`), as the framework last saw it. It only moves
//! forward; the framework advances it at every scheduling attempt and
//! whenever it undoes a reservation.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Clock {
    now_ms: AtomicU64,
}

impl Clock {
    /// Moves the clock to `now_ms` unless it is already past it.
    pub fn advance(&self, now_ms: u64) {
        self.now_ms.fetch_max(now_ms, Ordering::AcqRel);
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn only_moves_forward() {
        let c = Clock::default();
        c.advance(10);
        c.advance(5);
        assert_eq!(c.now_ms(), 10);
        c.advance(12);
        assert_eq!(c.now_ms(), 12);
    }
}
