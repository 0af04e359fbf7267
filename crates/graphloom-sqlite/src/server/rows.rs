//! Rows of the server's tables as typed values: one [`FromRow`] per row type, reading
//! columns whose types decode straight into their Rust values ([`Time`], [`Text`],
//! [`Object`], JSON as `serde_json::Value`).

use crate::error::ServerResultExt;
use crate::row::FromRow;
use graphloom_server_db::kit::StoredText;
use graphloom_server_db::models::{rfc3339_from_micros, Assistant, Run, Thread};
use graphloom_server_db::{DbError, DbResult};
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use rusqlite::Row;
use serde_json::{Map, Value};

/// The assistants' columns of a version row (a version's `updated_at` is its creation).
pub(super) const VERSION_COLUMNS: &str = "assistant_id, graph_id, config, context, metadata, version, name, \
     description, created_at, created_at AS updated_at";

/// A column, decoded into its type.
fn col<T: FromSql>(row: &Row<'_>, name: &str) -> DbResult<T> {
    row.get(name).db()
}

/// A time column: microseconds since the Unix epoch (`INTEGER`), as RFC 3339 text.
pub(super) struct Time(pub(super) String);

impl FromSql for Time {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        i64::column_result(value).map(|us| Self(rfc3339_from_micros(us)))
    }
}

/// A column holding the text form of a status, strategy or cancel request.
pub(super) struct Text<T>(pub(super) T);

impl<T: StoredText> FromSql for Text<T> {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let s = value.as_str()?;
        T::from_stored(s)
            .map(Self)
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

/// A JSON column holding an object (`null` reads as an empty one).
pub(super) struct Object(pub(super) Map<String, Value>);

impl FromSql for Object {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match Value::column_result(value)? {
            Value::Object(m) => Ok(Self(m)),
            Value::Null => Ok(Self(Map::new())),
            other => Err(FromSqlError::Other(Box::new(DbError::Backend(format!(
                "not a JSON object: {other}"
            ))))),
        }
    }
}

impl FromRow for Assistant {
    const COLUMNS: &'static str =
        "assistant_id, graph_id, config, context, metadata, version, name, description, created_at, updated_at";
    type Error = DbError;

    fn from_row(row: &Row<'_>) -> DbResult<Self> {
        Ok(Assistant {
            assistant_id: col(row, "assistant_id")?,
            graph_id: col(row, "graph_id")?,
            config: col(row, "config")?,
            context: col(row, "context")?,
            created_at: col::<Time>(row, "created_at")?.0,
            updated_at: col::<Time>(row, "updated_at")?.0,
            metadata: col::<Object>(row, "metadata")?.0,
            version: col(row, "version")?,
            name: col(row, "name")?,
            description: col(row, "description")?,
        })
    }
}

impl FromRow for Thread {
    const COLUMNS: &'static str =
        "thread_id, created_at, updated_at, state_updated_at, metadata, config, status, \
         state_values, interrupts, error, ttl";
    type Error = DbError;

    fn from_row(row: &Row<'_>) -> DbResult<Self> {
        Ok(Thread {
            thread_id: col(row, "thread_id")?,
            created_at: col::<Time>(row, "created_at")?.0,
            updated_at: col::<Time>(row, "updated_at")?.0,
            state_updated_at: col::<Time>(row, "state_updated_at")?.0,
            metadata: col::<Object>(row, "metadata")?.0,
            config: col(row, "config")?,
            status: col::<Text<_>>(row, "status")?.0,
            values: col(row, "state_values")?,
            interrupts: col(row, "interrupts")?,
            error: col(row, "error")?,
            ttl: col(row, "ttl")?,
        })
    }
}

/// A run row as the queue sees it: the run and its attempt count.
pub(super) struct QueuedRun {
    pub(super) run: Run,
    pub(super) attempt: i64,
}

impl FromRow for QueuedRun {
    const COLUMNS: &'static str =
        "run_id, thread_id, assistant_id, created_at, updated_at, status, metadata, \
         kwargs, multitask_strategy, attempt, ordinal, cancel_reason";
    type Error = DbError;

    fn from_row(row: &Row<'_>) -> DbResult<Self> {
        Ok(QueuedRun {
            run: Run {
                run_id: col(row, "run_id")?,
                thread_id: col(row, "thread_id")?,
                assistant_id: col(row, "assistant_id")?,
                created_at: col::<Time>(row, "created_at")?.0,
                updated_at: col::<Time>(row, "updated_at")?.0,
                status: col::<Text<_>>(row, "status")?.0,
                metadata: col::<Object>(row, "metadata")?.0,
                kwargs: col(row, "kwargs")?,
                multitask_strategy: col::<Text<_>>(row, "multitask_strategy")?.0,
                cancel_reason: col(row, "cancel_reason")?,
                ordinal: col(row, "ordinal")?,
            },
            attempt: col(row, "attempt")?,
        })
    }
}
