//! Bounds on the numbers a request gives: durations and counts are checked at the edge,
//! before anything is written, and one out of range is a 422 naming the field and the
//! range. Nothing further in gets a number it could overflow on.
//!
//! | field | unit | allowed |
//! |---|---|---|
//! | run `after_seconds` | seconds | 0 to [`MAX_AFTER_SECONDS`] (one year) |
//! | store item `ttl` | minutes | more than 0, up to [`MAX_TTL_MINUTES`] (one year) |
//! | thread `ttl` | minutes | 0 to [`MAX_TTL_MINUTES`] |
//! | run `config.recursion_limit` | supersteps | 1 to [`MAX_RECURSION_LIMIT`] |

use crate::api::error::{ApiError, ApiResult};
use serde_json::Value;
use std::time::Duration;

/// Longest delay of a run (`after_seconds`): one year.
pub(crate) const MAX_AFTER_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// Longest time to live of a store item or a thread: one year, in minutes.
pub(crate) const MAX_TTL_MINUTES: f64 = 365.0 * 24.0 * 60.0;
/// Largest `recursion_limit` a run's config may ask for.
pub(crate) const MAX_RECURSION_LIMIT: u64 = 1_000_000;

/// The delay of a run from `after_seconds` (none for 0).
pub(crate) fn after_seconds(v: Option<f64>) -> ApiResult<Option<Duration>> {
    let Some(s) = v else { return Ok(None) };
    if !(0.0..=MAX_AFTER_SECONDS).contains(&s) {
        return Err(ApiError::invalid(format!(
            "after_seconds must be from 0 to {MAX_AFTER_SECONDS} seconds (one year), not {s}"
        )));
    }
    Ok((s > 0.0).then(|| Duration::from_secs_f64(s)))
}

/// The time to live of a store item from its `ttl` in minutes.
pub(crate) fn store_ttl(v: Option<f64>) -> ApiResult<Option<Duration>> {
    let Some(m) = v else { return Ok(None) };
    if !(m > 0.0 && m <= MAX_TTL_MINUTES) {
        return Err(ApiError::invalid(format!(
            "ttl must be more than 0 and at most {MAX_TTL_MINUTES} minutes (one year), not {m}; \
             leave it out for an item that does not expire"
        )));
    }
    Ok(Some(Duration::from_secs_f64(m * 60.0)))
}

/// Check a thread's `ttl` in minutes.
pub(crate) fn thread_ttl(minutes: &Value) -> ApiResult<()> {
    match minutes.as_f64() {
        Some(m) if (0.0..=MAX_TTL_MINUTES).contains(&m) => Ok(()),
        _ => Err(ApiError::invalid(format!(
            "ttl must be from 0 to {MAX_TTL_MINUTES} minutes (one year), not {minutes}"
        ))),
    }
}

/// Check the parts of a run config the server reads: it is an object (or null), and its
/// `recursion_limit`, when given, is a whole number from 1 to [`MAX_RECURSION_LIMIT`].
pub(crate) fn run_config(config: Option<&Value>) -> ApiResult<()> {
    let obj = match config {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(o)) => o,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "config must be an object, not {}",
                kind_of(other)
            )))
        }
    };
    match obj.get("recursion_limit") {
        None | Some(Value::Null) => Ok(()),
        Some(n) if n.as_u64().is_some_and(|n| (1..=MAX_RECURSION_LIMIT).contains(&n)) => Ok(()),
        Some(n) => Err(ApiError::invalid(format!(
            "config.recursion_limit must be a whole number from 1 to {MAX_RECURSION_LIMIT}, not {}",
            short(n)
        ))),
    }
}

/// The JSON type of `v`, for messages.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `v` for a message: numbers and booleans as they are, anything else by its type (a
/// value from a request may be huge).
fn short(v: &Value) -> String {
    match v {
        Value::Number(_) | Value::Bool(_) => v.to_string(),
        other => kind_of(other).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delays() {
        assert_eq!(after_seconds(None).unwrap(), None);
        assert_eq!(after_seconds(Some(0.0)).unwrap(), None);
        assert_eq!(after_seconds(Some(-0.0)).unwrap(), None);
        assert_eq!(
            after_seconds(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert!(after_seconds(Some(MAX_AFTER_SECONDS)).unwrap().is_some());
        for bad in [
            -1.0,
            1e15,
            1e20,
            1e300,
            18_446_744_073_709_551_616.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            let e = after_seconds(Some(bad)).unwrap_err();
            assert_eq!(e.status.as_u16(), 422);
            assert!(e.detail.contains("after_seconds"), "{}", e.detail);
        }
    }

    #[test]
    fn ttls() {
        assert_eq!(store_ttl(Some(2.0)).unwrap(), Some(Duration::from_secs(120)));
        assert!(store_ttl(Some(MAX_TTL_MINUTES)).unwrap().is_some());
        for bad in [0.0, -1.0, 1e300, 18_446_744_073_709_551_616.0, f64::NAN] {
            assert!(store_ttl(Some(bad)).unwrap_err().detail.starts_with("ttl"));
        }
        assert!(thread_ttl(&json!(0)).is_ok());
        assert!(thread_ttl(&json!(0.002)).is_ok());
        assert!(thread_ttl(&json!(1e300)).is_err());
        assert!(thread_ttl(&json!(-1)).is_err());
    }

    #[test]
    fn run_configs() {
        assert!(run_config(None).is_ok());
        assert!(run_config(Some(&json!({"recursion_limit": 25, "configurable": {}}))).is_ok());
        assert!(run_config(Some(&json!({"recursion_limit": null}))).is_ok());
        for bad in [
            json!("x"),
            json!({"recursion_limit": 0}),
            json!({"recursion_limit": -1}),
            json!({"recursion_limit": 2.5}),
            json!({"recursion_limit": "25"}),
            json!({"recursion_limit": u64::MAX}),
        ] {
            assert_eq!(run_config(Some(&bad)).unwrap_err().status.as_u16(), 422, "{bad}");
        }
    }
}

#[cfg(test)]
mod documented {
    /// The OpenAPI annotations on `RunBody::after_seconds` and `PutBody::ttl` state these
    /// limits as literals; keep them equal.
    #[test]
    fn the_documented_ranges_are_the_enforced_ones() {
        assert!((super::MAX_AFTER_SECONDS - 31_536_000.0).abs() < f64::EPSILON);
        assert!((super::MAX_TTL_MINUTES - 525_600.0).abs() < f64::EPSILON);
    }
}
