//! Retry policy: jittered exponential backoff and the servers' own wait headers, as pure functions.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

/// When and how often a failed request is re-sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Re-sends after the first attempt (default 2).
    pub max_retries: u32,
    /// The first backoff before jitter (default 0.5 s); it doubles per retry.
    pub initial_backoff: Duration,
    /// The longest backoff (default 8 s).
    pub max_backoff: Duration,
    /// The longest server-requested wait honoured; a longer `retry-after` falls back to the
    /// computed backoff (default 60 s).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> RetryPolicy {
        RetryPolicy { max_retries: 0, ..RetryPolicy::default() }
    }

    /// The backoff before retry number `retry` (1-based), with `jitter` in `[0, 1)` choosing a
    /// point in the upper half: `base * (0.5 + jitter / 2)` where `base = min(cap, start * 2^(retry-1))`.
    pub fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let exponent = retry.saturating_sub(1).min(30);
        let base = self.initial_backoff.saturating_mul(1 << exponent).min(self.max_backoff);
        let jitter = if jitter.is_finite() { jitter.clamp(0.0, 1.0) } else { 0.0 };
        base.mul_f64(0.5 + jitter / 2.0)
    }

    /// The wait before retry number `retry`: the server's request when it gave one no longer
    /// than [`max_retry_after`](RetryPolicy::max_retry_after), the jittered backoff otherwise.
    pub fn delay(&self, retry: u32, server_asked: Option<Duration>, jitter: f64) -> Duration {
        match server_asked {
            Some(wait) if wait <= self.max_retry_after => wait,
            Some(_) | None => self.backoff(retry, jitter),
        }
    }
}

/// A random number in `[0, 1)` for jitter, from the standard library's per-process random keys.
pub fn random_jitter() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos()
            as u64,
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The server-requested wait from `retry-after-ms` (milliseconds, preferred) or `retry-after`
/// (delta-seconds or an HTTP date, taken relative to `now`). Unparsable or negative values are
/// ignored, and so are waits too long for a [`Duration`] (a server may send anything); a date in
/// the past means "now".
pub fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(wait) = retry_after_ms
        .and_then(|value| value.trim().parse::<f64>().ok())
        .and_then(|millis| Duration::try_from_secs_f64(millis / 1000.0).ok())
    {
        return Some(wait);
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The `x-should-retry` header: `true`/`false`, anything else ignored.
pub fn parse_should_retry(value: Option<&str>) -> Option<bool> {
    match value.map(str::trim) {
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) | None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn backoff_doubles_from_the_start_and_stops_at_the_cap() {
        let policy = RetryPolicy::default();
        let without_jitter: Vec<Duration> =
            (1..=6).map(|retry| policy.backoff(retry, 0.0)).collect();
        assert_eq!(
            without_jitter,
            [250, 500, 1000, 2000, 4000, 4000].map(Duration::from_millis).to_vec()
        );
        let full_jitter: Vec<Duration> =
            (1..=6).map(|retry| policy.backoff(retry, 0.999_999)).collect();
        for (retry, delay) in full_jitter.iter().enumerate() {
            assert!(*delay <= Duration::from_secs(8), "retry {retry}: {delay:?}");
        }
        assert_eq!(policy.backoff(1000, f64::NAN), Duration::from_secs(4));
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
        let cases: Vec<(Option<&str>, Option<&str>, Option<Duration>)> = vec![
            (Some("1500"), Some("9"), Some(Duration::from_millis(1500))),
            (None, Some("3"), Some(Duration::from_secs(3))),
            (None, Some("0.5"), Some(Duration::from_millis(500))),
            (None, Some(&later), Some(Duration::from_secs(7))),
            (None, Some(&earlier), Some(Duration::ZERO)),
            (Some("soon"), Some("2"), Some(Duration::from_secs(2))),
            (None, Some("-1"), None),
            (None, Some("1e300"), None),
            (None, Some("NaN"), None),
            (Some("1e300"), Some("4"), Some(Duration::from_secs(4))),
            (Some("-5"), None, None),
            (None, Some("tomorrow"), None),
            (None, None, None),
        ];
        for (millis, header, expected) in cases {
            assert_eq!(parse_retry_after(millis, header, now), expected, "{millis:?} {header:?}");
        }
    }

    #[test]
    fn server_wait_wins_unless_too_long() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(1, Some(Duration::from_secs(3)), 0.0), Duration::from_secs(3));
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(600)), 0.0),
            Duration::from_millis(250)
        );
        assert_eq!(parse_should_retry(Some("false")), Some(false));
        assert_eq!(parse_should_retry(Some("maybe")), None);
        let jitter = random_jitter();
        assert!((0.0..1.0).contains(&jitter));
    }
}
