//! [`Schedule`]: a cron expression (standard five fields, or `@hourly`-style nicknames) in
//! UTC or an IANA time zone, and the next time it fires.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// Why a schedule or a time zone does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The expression is not a standard cron expression, or never fires.
    #[error(
        "Invalid cron schedule: '{schedule}'. Reason: {reason}. Use the standard cron format \
         (minute hour day_of_month month day_of_week), e.g. '*/5 * * * *' for every 5 minutes"
    )]
    Schedule {
        /// The expression given.
        schedule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The time zone is not an IANA name.
    #[error("Invalid timezone: '{0}'. Use an IANA name such as 'America/New_York'")]
    Timezone(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: Option<Tz>,
}

impl Schedule {
    /// Parse `expr` (five fields: minute, hour, day of month, month, day of week; or a
    /// nickname such as `@daily`) in time zone `tz` (`None`: UTC). An expression that
    /// parses but never fires (`0 0 30 2 *`) is refused too.
    ///
    /// # Errors
    /// A [`ScheduleError`] naming what does not read.
    pub fn parse(expr: &str, tz: Option<&str>) -> Result<Self, ScheduleError> {
        let bad = |reason: String| ScheduleError::Schedule {
            schedule: expr.to_owned(),
            reason,
        };
        let tz = match tz.filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("utc")) {
            None => None,
            Some(name) => Some(
                name.parse::<Tz>()
                    .map_err(|_| ScheduleError::Timezone(name.to_owned()))?,
            ),
        };
        if expr.len() > 256 {
            return Err(bad("longer than 256 characters".into()));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| bad(e.to_string()))?;
        let s = Self { cron, tz };
        if s.next_after_micros(graphloom_server_db::kit::now_micros())
            .is_none()
        {
            return Err(bad("it never fires".into()));
        }
        Ok(s)
    }

    /// The first time the schedule fires strictly after `after` (microseconds since the
    /// Unix epoch), in microseconds; `None` when it never does.
    #[must_use]
    pub fn next_after_micros(&self, after: i64) -> Option<i64> {
        let at = Utc.timestamp_micros(after).single()?;
        let next: DateTime<Utc> = match self.tz {
            None => self.cron.find_next_occurrence(&at, false).ok()?,
            Some(tz) => self
                .cron
                .find_next_occurrence(&at.with_timezone(&tz), false)
                .ok()?
                .with_timezone(&Utc),
        };
        Some(next.timestamp_micros())
    }
}

/// An RFC 3339 time (`end_time`) in microseconds since the Unix epoch; one without an
/// offset (as Python's `isoformat()` writes a naive time) is taken as UTC.
///
/// # Errors
/// The text when it is not such a time.
pub fn parse_time_micros(text: &str) -> Result<i64, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_micros());
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .map(|t| t.and_utc().timestamp_micros())
        .map_err(|e| format!("end_time must be an RFC 3339 time, not {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        parse_time_micros(text).unwrap()
    }

    #[test]
    fn standard_expressions_fire_when_expected() {
        let s = Schedule::parse("*/5 * * * *", None).unwrap();
        assert_eq!(
            s.next_after_micros(at("2026-01-01T10:02:30Z")),
            Some(at("2026-01-01T10:05:00Z"))
        );
        // Strictly after: a time on the schedule moves to the next one.
        assert_eq!(
            s.next_after_micros(at("2026-01-01T10:05:00Z")),
            Some(at("2026-01-01T10:10:00Z"))
        );
        let daily = Schedule::parse("@daily", None).unwrap();
        assert_eq!(
            daily.next_after_micros(at("2026-01-01T10:00:00Z")),
            Some(at("2026-01-02T00:00:00Z"))
        );
        let ny = Schedule::parse("0 9 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            ny.next_after_micros(at("2026-01-01T00:00:00Z")),
            Some(at("2026-01-01T14:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_refused() {
        for bad in ["61 * * * *", "hello", "", "* * * *", "0 0 * * * *", "0 0 30 2 *"] {
            let e = Schedule::parse(bad, None).unwrap_err();
            assert!(e.to_string().starts_with("Invalid cron schedule"), "{bad}: {e}");
        }
        assert_eq!(
            Schedule::parse("* * * * *", Some("Mars/Olympus")).unwrap_err(),
            ScheduleError::Timezone("Mars/Olympus".into())
        );
        assert!(parse_time_micros("tomorrow").is_err());
        assert_eq!(
            parse_time_micros("2030-01-01T00:00:00"),
            parse_time_micros("2030-01-01T00:00:00+00:00")
        );
    }
}
