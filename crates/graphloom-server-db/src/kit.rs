//! What the SQLite and PostgreSQL implementations of [`Db`](crate::Db) share: the clock,
//! ttl arithmetic, JSON containment (PostgreSQL's `@>` semantics, evaluated in Rust where
//! SQL cannot), sort columns, paging and the text forms of enums. Unit tests of these
//! pieces are at the end; the conformance suite that drives both backends through the
//! [`Db`](crate::Db) trait is graphloom-server's integration test `tests/it/db.rs`.

use crate::models::{
    rfc3339_from_micros, Assistant, CancelAction, MultitaskStrategy, Run, RunStatus, ThreadStatus,
};
use crate::{AssistantPatch, DbError, DbResult, RunEventRecord, SortOrder, TtlStrategy};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Microseconds since the Unix epoch, now.
pub fn now_micros() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// What creating a run gave it.
#[derive(Clone, Copy, Debug)]
pub struct Made {
    /// Claimed at once (inserted `running`).
    pub claimed: bool,
    /// Its [`ordinal`](Run::ordinal).
    pub ordinal: i64,
    /// Its creation time (microseconds): see [`creation_time`].
    pub created_at: i64,
}

/// The creation time of a thread's next run, given the time now and the newest creation
/// time among the thread's runs: after that one, whatever the clock says. A thread's runs
/// are listed and claimed in creation order, and their ordinals number their events (and
/// a reconnecting client's place in them): the two orders must agree, also when the run
/// before was made by a replica whose clock runs ahead, or in the same microsecond.
#[must_use]
pub fn creation_time(now: i64, newest: Option<i64>) -> i64 {
    newest.map_or(now, |n| now.max(n.saturating_add(1)))
}

/// Run `r` as [`Made`]: `running` when it was claimed at once.
#[must_use]
pub fn created(r: &Run, made: Made) -> Run {
    let at = rfc3339_from_micros(made.created_at);
    Run {
        created_at: at.clone(),
        updated_at: at,
        ordinal: made.ordinal,
        status: if made.claimed {
            RunStatus::Running
        } else {
            RunStatus::Pending
        },
        ..r.clone()
    }
}

/// `now` plus `d`, in microseconds, saturating.
pub fn after(now: i64, d: Duration) -> i64 {
    now.saturating_add(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The lifetime a thread ttl asks for, in microseconds: `{"strategy": "delete" |
/// "keep_latest", "ttl": minutes}` (strategy optional). None for no ttl, another strategy,
/// or a malformed value.
pub fn ttl_micros(ttl: Option<&Value>) -> Option<i64> {
    let obj = ttl?.as_object()?;
    ttl_strategy(ttl)?;
    let minutes = obj.get("ttl")?.as_f64()?;
    if !minutes.is_finite() || minutes < 0.0 {
        return None;
    }
    let us = minutes * 60.0 * 1_000_000.0;
    Some(if us >= i64::MAX as f64 {
        i64::MAX
    } else {
        us as i64
    })
}

/// The strategy of a thread ttl: `delete` when it names none; None for an unknown one.
pub fn ttl_strategy(ttl: Option<&Value>) -> Option<TtlStrategy> {
    match ttl?.as_object()?.get("strategy") {
        None | Some(Value::Null) => Some(TtlStrategy::Delete),
        Some(Value::String(s)) => TtlStrategy::parse(s),
        Some(_) => None,
    }
}

/// Sort column of a cron search (`created_at` unless another known one is named).
pub fn cron_sort_column(sort_by: Option<&str>) -> &'static str {
    match sort_by {
        Some("cron_id") => "cron_id",
        Some("assistant_id") => "assistant_id",
        Some("thread_id") => "thread_id",
        Some("updated_at") => "updated_at",
        Some("next_run_date") => "next_run_date",
        Some("end_time") => "end_time",
        _ => "created_at",
    }
}

/// A ttl value as stored: JSON `null` means none.
pub fn ttl_value(ttl: Option<&Value>) -> Option<&Value> {
    ttl.filter(|v| !v.is_null())
}

/// Whether `haystack` contains `needle` the way PostgreSQL's `jsonb @> jsonb` decides:
/// objects contain objects whose every key is contained, arrays contain arrays whose every
/// element is contained in some element, scalars equal (numbers by value). (PostgreSQL's
/// extra rule that a top-level array contains a bare scalar is not needed: filters are objects.)
pub fn json_contains(haystack: &Value, needle: &Value) -> bool {
    match (haystack, needle) {
        (Value::Object(h), Value::Object(n)) => map_contains(h, n),
        (Value::Array(h), Value::Array(n)) => n.iter().all(|x| h.iter().any(|y| json_contains(y, x))),
        (h, n) => json_equal_scalar(h, n),
    }
}

fn json_equal_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        _ => a == b,
    }
}

/// Whether every key of `needle` is in `haystack` with a value containing the needle's.
pub fn map_contains(haystack: &Map<String, Value>, needle: &Map<String, Value>) -> bool {
    needle
        .iter()
        .all(|(k, v)| haystack.get(k).is_some_and(|h| json_contains(h, v)))
}

/// Shallow merge: keys of `from` overwrite those of `into`.
pub fn merge(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        into.insert(k.clone(), v.clone());
    }
}

/// `a` after `patch`, as its next version: one past the highest stored version (`latest`)
/// or its own, whichever is higher; metadata merged, other fields replaced.
pub fn patched(a: &mut Assistant, patch: AssistantPatch, latest: Option<i64>, now: i64) {
    a.version = latest.unwrap_or(a.version).max(a.version) + 1;
    if let Some(g) = patch.graph_id {
        a.graph_id = g;
    }
    if let Some(c) = patch.config {
        a.config = c;
    }
    if let Some(c) = patch.context {
        a.context = c;
    }
    if let Some(m) = &patch.metadata {
        merge(&mut a.metadata, m);
    }
    if let Some(n) = patch.name {
        a.name = n;
    }
    if let Some(d) = patch.description {
        a.description = Some(d);
    }
    a.updated_at = rfc3339_from_micros(now);
}

/// A stored run event.
pub fn event_record(seq: i64, event: String, data: &str) -> DbResult<RunEventRecord> {
    Ok(RunEventRecord {
        id: u64::try_from(seq).map_err(|_| DbError::Backend(format!("bad event sequence {seq}")))?,
        event,
        data: Arc::new(
            serde_json::from_str(data)
                .map_err(|e| DbError::Backend(format!("bad JSON in a run event: {e}")))?,
        ),
    })
}

/// Sort column of an assistant search (`created_at` unless another known one is named).
pub fn assistant_sort_column(sort_by: Option<&str>) -> &'static str {
    match sort_by {
        Some("assistant_id") => "assistant_id",
        Some("graph_id") => "graph_id",
        Some("name") => "name",
        Some("updated_at") => "updated_at",
        _ => "created_at",
    }
}

/// Sort column of a thread search (`created_at` unless another known one is named).
pub fn thread_sort_column(sort_by: Option<&str>) -> &'static str {
    match sort_by {
        Some("thread_id") => "thread_id",
        Some("status") => "status",
        Some("updated_at") => "updated_at",
        _ => "created_at",
    }
}

/// SQL keyword of an order.
pub fn order_keyword(order: SortOrder) -> &'static str {
    match order {
        SortOrder::Asc => "ASC",
        SortOrder::Desc => "DESC",
    }
}

/// Limit and offset of a page: a limit of 0 or less means "no limit"; offsets start at 0.
pub fn page(limit: i64, offset: i64) -> (Option<i64>, i64) {
    ((limit > 0).then_some(limit), offset.max(0))
}

/// Cut a page out of rows already filtered and sorted.
pub fn slice_page<T>(rows: Vec<T>, limit: i64, offset: i64) -> Vec<T> {
    let (limit, offset) = page(limit, offset);
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    rows.into_iter().skip(skip).take(take).collect()
}

/// A stored run status.
pub fn run_status(s: &str) -> DbResult<RunStatus> {
    RunStatus::parse(s).ok_or_else(|| DbError::Backend(format!("unknown run status `{s}` in the database")))
}

/// A stored thread status.
pub fn thread_status(s: &str) -> DbResult<ThreadStatus> {
    ThreadStatus::parse(s)
        .ok_or_else(|| DbError::Backend(format!("unknown thread status `{s}` in the database")))
}

/// A stored multitask strategy.
pub fn strategy(s: &str) -> DbResult<MultitaskStrategy> {
    Ok(match s {
        "reject" => MultitaskStrategy::Reject,
        "interrupt" => MultitaskStrategy::Interrupt,
        "rollback" => MultitaskStrategy::Rollback,
        "enqueue" => MultitaskStrategy::Enqueue,
        _ => {
            return Err(DbError::Backend(format!(
                "unknown multitask strategy `{s}` in the database"
            )))
        }
    })
}

/// A stored cancel request.
pub fn cancel_action(s: Option<&str>) -> DbResult<Option<CancelAction>> {
    match s {
        None => Ok(None),
        Some(s) => CancelAction::parse(s)
            .map(Some)
            .ok_or_else(|| DbError::Backend(format!("unknown cancel action `{s}` in the database"))),
    }
}

/// A value stored as its text form in the server's tables (statuses, strategies, cancel
/// requests), so that a backend can decode such a column into its type in one place.
pub trait StoredText: Sized {
    /// The value of a stored text; an error naming what was found when it is none.
    ///
    /// # Errors
    /// `DbError::Backend` for a text that names no value.
    fn from_stored(s: &str) -> DbResult<Self>;
}

impl StoredText for RunStatus {
    fn from_stored(s: &str) -> DbResult<Self> {
        run_status(s)
    }
}

impl StoredText for ThreadStatus {
    fn from_stored(s: &str) -> DbResult<Self> {
        thread_status(s)
    }
}

impl StoredText for MultitaskStrategy {
    fn from_stored(s: &str) -> DbResult<Self> {
        strategy(s)
    }
}

impl StoredText for CancelAction {
    fn from_stored(s: &str) -> DbResult<Self> {
        CancelAction::parse(s)
            .ok_or_else(|| DbError::Backend(format!("unknown cancel action `{s}` in the database")))
    }
}

/// A JSON object, or an error naming the column.
pub fn as_object(v: Value, column: &str) -> DbResult<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(DbError::Backend(format!(
            "{column} is not a JSON object: {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containment_follows_jsonb() {
        let doc = json!({"a": 1, "b": {"c": [1, 2, {"d": true}], "e": "x"}, "n": null});
        assert!(json_contains(&doc, &json!({})));
        assert!(json_contains(&doc, &json!({"a": 1})));
        assert!(json_contains(&doc, &json!({"a": 1.0})));
        assert!(!json_contains(&doc, &json!({"a": 2})));
        assert!(!json_contains(&doc, &json!({"a": true})));
        assert!(json_contains(&doc, &json!({"b": {"e": "x"}})));
        assert!(json_contains(&doc, &json!({"b": {"c": [2]}})));
        assert!(json_contains(&doc, &json!({"b": {"c": [{"d": true}, 1]}})));
        assert!(!json_contains(&doc, &json!({"b": {"c": [3]}})));
        assert!(json_contains(&doc, &json!({"n": null})));
        assert!(!json_contains(&doc, &json!({"missing": null})));
        assert!(!json_contains(&json!(null), &json!({"a": 1})));
        assert!(!json_contains(&json!({"a": [1]}), &json!({"a": 1})));
        assert!(!json_contains(&json!({"a": 1}), &json!({"a": [1]})));
    }

    #[test]
    fn ttl_in_minutes() {
        assert_eq!(
            ttl_micros(Some(&json!({"strategy": "delete", "ttl": 2}))),
            Some(120_000_000)
        );
        assert_eq!(ttl_micros(Some(&json!({"ttl": 0.5}))), Some(30_000_000));
        assert_eq!(ttl_micros(Some(&json!({"strategy": "keep", "ttl": 2}))), None);
        assert_eq!(
            ttl_micros(Some(&json!({"strategy": "keep_latest", "ttl": 1}))),
            Some(60_000_000)
        );
        assert_eq!(
            ttl_strategy(Some(&json!({"strategy": "keep_latest", "ttl": 1}))),
            Some(TtlStrategy::KeepLatest)
        );
        assert_eq!(ttl_strategy(Some(&json!({"ttl": 1}))), Some(TtlStrategy::Delete));
        assert_eq!(ttl_micros(Some(&json!({"strategy": "delete"}))), None);
        assert_eq!(ttl_micros(Some(&json!({"ttl": -1}))), None);
        assert_eq!(ttl_micros(None), None);
    }

    #[test]
    fn pages() {
        assert_eq!(slice_page((0..10).collect(), 3, 2), vec![2, 3, 4]);
        assert_eq!(slice_page((0..10).collect(), 0, 8), vec![8, 9]);
        assert_eq!(slice_page((0..10).collect(), 5, -3), vec![0, 1, 2, 3, 4]);
        assert_eq!(page(0, 0), (None, 0));
    }

    #[test]
    fn enums_round_trip() {
        for s in [
            MultitaskStrategy::Reject,
            MultitaskStrategy::Interrupt,
            MultitaskStrategy::Rollback,
            MultitaskStrategy::Enqueue,
        ] {
            assert_eq!(strategy(s.as_str()).unwrap(), s);
        }
        assert!(strategy("nope").is_err());
        assert_eq!(
            cancel_action(Some("rollback")).unwrap(),
            Some(CancelAction::Rollback)
        );
        assert_eq!(cancel_action(None).unwrap(), None);
        assert!(run_status("done").is_err());
    }
}
