//! Retries with exponential backoff and jitter, honouring `Retry-After`.

use reqwest::header::HeaderMap;
use std::time::{Duration, SystemTime};

/// How HTTP providers retry rate limits (429), server errors (5xx, 408), timeouts and
/// connection failures. Other 4xx answers are never retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Attempts in all, the first included (1 = no retries).
    pub max_attempts: u32,
    /// Wait before the first retry.
    pub initial_backoff: Duration,
    /// Longest computed wait.
    pub max_backoff: Duration,
    /// Factor between consecutive waits.
    pub multiplier: f64,
    /// Randomise each wait between half and all of it ("equal jitter"), so that many
    /// clients rate-limited together do not retry together.
    pub jitter: bool,
    /// Longest `Retry-After` honoured: a server asking for a longer wait fails the call at
    /// once instead of holding it.
    pub max_retry_after: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            multiplier: 2.0,
            jitter: true,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryConfig {
    /// No retries.
    #[must_use]
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }
    /// Set the attempts in all.
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }
    /// Set the first wait.
    #[must_use]
    pub fn initial_backoff(mut self, d: Duration) -> Self {
        self.initial_backoff = d;
        self
    }
    /// Set the longest computed wait.
    #[must_use]
    pub fn max_backoff(mut self, d: Duration) -> Self {
        self.max_backoff = d;
        self
    }
    /// Turn jitter on or off.
    #[must_use]
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }
    /// Set the longest `Retry-After` honoured.
    #[must_use]
    pub fn max_retry_after(mut self, d: Duration) -> Self {
        self.max_retry_after = d;
        self
    }

    /// The computed wait after failed attempt `attempt` (1-based).
    #[must_use]
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial_backoff.as_secs_f64() * self.multiplier.max(1.0).powi(exp);
        let capped = base.min(self.max_backoff.as_secs_f64()).max(0.0);
        let secs = if self.jitter {
            capped * (0.5 + rand::random::<f64>() * 0.5)
        } else {
            capped
        };
        Duration::try_from_secs_f64(secs).unwrap_or(self.max_backoff)
    }
}

/// The wait a response asks for: `retry-after-ms` (OpenAI), else `Retry-After` as seconds
/// (integer or decimal) or as an HTTP date.
#[must_use]
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    // A value that is not a duration (negative, NaN, too large to represent) is ignored.
    if let Some(wait) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
    {
        return Some(wait);
    }
    let raw = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(raw, SystemTime::now())
}

/// Parse a `Retry-After` value relative to `now`.
#[must_use]
pub fn parse_retry_after(raw: &str, now: SystemTime) -> Option<Duration> {
    let raw = raw.trim();
    if let Ok(secs) = raw.parse::<f64>() {
        // Not a duration (negative, NaN, or too large to represent): ignored.
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(raw).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_values_too_large_to_wait_are_ignored() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("1e300", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", "1e300".parse().unwrap());
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0.5 ", now), Some(Duration::from_millis(500)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn header_precedence() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", reqwest::header::HeaderValue::from_static("9"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(9)));
        h.insert("retry-after-ms", reqwest::header::HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn backoff_grows_caps_and_jitters_within_bounds() {
        let r = RetryConfig::default()
            .initial_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_millis(350))
            .jitter(false);
        assert_eq!(r.backoff(1), Duration::from_millis(100));
        assert_eq!(r.backoff(2), Duration::from_millis(200));
        assert_eq!(r.backoff(3), Duration::from_millis(350));
        let j = r.jitter(true);
        for _ in 0..100 {
            let d = j.backoff(2);
            assert!(
                d >= Duration::from_millis(100) && d <= Duration::from_millis(200),
                "{d:?}"
            );
        }
    }
}
