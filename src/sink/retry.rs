//! When to try a batch again: exponential backoff with full jitter, and
//! `Retry-After` (seconds or an HTTP date) as upstream asks, within a cap.

use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};

use crate::config::defaults::{DEFAULT_RETRY_AFTER_MAX, DEFAULT_RETRY_MAX, DEFAULT_RETRY_MIN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryConfig {
    /// First backoff delay (before jitter).
    pub min: Duration,
    /// Longest backoff delay (before jitter).
    pub max: Duration,
    /// A `Retry-After` longer than this is cut to it.
    pub retry_after_max: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            min: DEFAULT_RETRY_MIN,
            max: DEFAULT_RETRY_MAX,
            retry_after_max: DEFAULT_RETRY_AFTER_MAX,
        }
    }
}

/// Delays for one batch's retries: the n-th is uniform in `[0, min·2ⁿ]`, with
/// `min·2ⁿ` capped at `max` ("full jitter": many agents that lost the same
/// upstream do not come back in step).
pub struct Backoff {
    config: RetryConfig,
    delays: backon::ExponentialBackoff,
}

impl Backoff {
    pub fn new(config: RetryConfig) -> Self {
        Self {
            config,
            delays: Self::delays(config),
        }
    }

    fn delays(config: RetryConfig) -> backon::ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(config.min)
            .with_max_delay(config.max)
            .without_max_times()
            .build()
    }

    /// The ceiling of the next delay, before jitter.
    pub fn next_ceiling(&mut self) -> Duration {
        self.delays.next().unwrap_or(self.config.max)
    }

    pub fn next_delay(&mut self) -> Duration {
        self.next_ceiling().mul_f64(fastrand::f64())
    }

    /// After a success: the next failure starts from `min` again.
    pub fn reset(&mut self) {
        self.delays = Self::delays(self.config);
    }

    /// `Retry-After` as asked, at most `retry_after_max`.
    pub fn honour(&self, asked: Duration) -> Duration {
        asked.min(self.config.retry_after_max)
    }
}

/// A `Retry-After` value: delta-seconds, or an HTTP date taken against `now`
/// (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, and the two obsolete forms
/// RFC 9110 §5.6.7 says a recipient must accept too). A date in the past is 0.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RetryConfig {
        RetryConfig {
            min: Duration::from_millis(100),
            max: Duration::from_secs(2),
            retry_after_max: Duration::from_secs(30),
        }
    }

    #[test]
    fn ceilings_double_to_the_cap_and_start_over_after_a_success() {
        let mut backoff = Backoff::new(config());
        let ceilings: Vec<u128> = (0..8).map(|_| backoff.next_ceiling().as_millis()).collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next_ceiling(), Duration::from_millis(100));
    }

    #[test]
    fn full_jitter_spreads_over_the_whole_range() {
        let mut backoff = Backoff::new(config());
        for _ in 0..5 {
            backoff.next_ceiling();
        }
        // The 6th and later ceilings are 2 s: delays land all over [0, 2 s].
        let delays: Vec<Duration> = (0..400).map(|_| backoff.next_delay()).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(2)));
        assert!(delays.iter().any(|d| *d < Duration::from_millis(200)));
        assert!(delays.iter().any(|d| *d > Duration::from_millis(1800)));
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date_within_the_cap() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example).
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        // RFC 850 and asctime, which RFC 9110 has recipients accept.
        for obsolete in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            assert_eq!(
                parse_retry_after(obsolete, now),
                Some(Duration::from_secs(7)),
                "{obsolete}"
            );
        }
        for bad in ["", "soon", "-1", "1.5", "Sun, 06 Nov 1994 08:49:37 CET"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
        let backoff = Backoff::new(config());
        assert_eq!(
            backoff.honour(Duration::from_secs(3600)),
            Duration::from_secs(30)
        );
    }
}
