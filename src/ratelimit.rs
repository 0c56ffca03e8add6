//! Rate-limited logging for bad input: the first occurrence of a reason is logged
//! at once, later ones at most once per interval with how many were suppressed.
//! Counting is the metrics' job; this only keeps logs readable under a flood.

use std::time::Duration;

use foldhash::{HashMap, HashMapExt};
use tokio::time::Instant;

#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    last: HashMap<&'static str, (Instant, u64)>,
}

impl LogLimiter {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: HashMap::new(),
        }
    }

    /// Whether to log this occurrence of `reason` now; when yes, returns how many
    /// occurrences were suppressed since the last one logged.
    pub fn admit(&mut self, reason: &'static str) -> Option<u64> {
        let now = Instant::now();
        match self.last.get_mut(reason) {
            Some((at, suppressed)) if now.duration_since(*at) < self.interval => {
                *suppressed += 1;
                None
            }
            Some((at, suppressed)) => {
                *at = now;
                Some(std::mem::take(suppressed))
            }
            None => {
                self.last.insert(reason, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn first_is_logged_then_one_per_interval_with_the_suppressed_count() {
        let mut limiter = LogLimiter::new(Duration::from_secs(10));
        assert_eq!(limiter.admit("a"), Some(0));
        assert_eq!(limiter.admit("a"), None);
        assert_eq!(limiter.admit("a"), None);
        assert_eq!(limiter.admit("b"), Some(0));
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(limiter.admit("a"), Some(2));
        assert_eq!(limiter.admit("a"), None);
    }
}
