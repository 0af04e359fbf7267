//! Rows of the server's tables as typed values: one [`FromRow`] per row type, reading
//! columns whose types decode straight into their Rust values ([`Time`], [`Text`],
//! [`Object`], `Json`).

use crate::error::ServerResultExt;
use graphloom_server_db::kit::StoredText;
use graphloom_server_db::models::{rfc3339_from_micros, Assistant, Run, Thread};
use graphloom_server_db::{DbError, DbResult};
use serde_json::{Map, Value};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgRow, PgTypeInfo, PgValueRef};
use sqlx::types::Json;
use sqlx::{Decode, Postgres, Row, Type};

/// A row type of the server's tables: the columns it is read from and how.
pub(super) trait FromRow: Sized {
    /// The columns [`from_row`](Self::from_row) reads, as a `SELECT` list.
    const COLUMNS: &'static str;
    /// The value of a row holding [`COLUMNS`](Self::COLUMNS).
    fn from_row(row: &PgRow) -> DbResult<Self>;
}

/// The assistants' columns of a version row (a version's `updated_at` is its creation).
pub(super) const VERSION_COLUMNS: &str = "assistant_id, graph_id, config, context, metadata, version, name, \
     description, created_at, created_at AS updated_at";

/// A column, decoded into its type.
fn col<'r, T: Decode<'r, Postgres> + Type<Postgres>>(row: &'r PgRow, name: &str) -> DbResult<T> {
    row.try_get(name).db()
}

/// A time column: microseconds since the Unix epoch (`BIGINT`), as RFC 3339 text.
pub(super) struct Time(pub(super) String);

impl Type<Postgres> for Time {
    fn type_info() -> PgTypeInfo {
        <i64 as Type<Postgres>>::type_info()
    }
}

impl<'r> Decode<'r, Postgres> for Time {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Self(rfc3339_from_micros(<i64 as Decode<Postgres>>::decode(
            value,
        )?)))
    }
}

/// A column holding the text form of a status, strategy or cancel request.
pub(super) struct Text<T>(pub(super) T);

impl<T> Type<Postgres> for Text<T> {
    fn type_info() -> PgTypeInfo {
        <String as Type<Postgres>>::type_info()
    }
    fn compatible(ty: &PgTypeInfo) -> bool {
        <String as Type<Postgres>>::compatible(ty)
    }
}

impl<'r, T: StoredText> Decode<'r, Postgres> for Text<T> {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let s = <&str as Decode<Postgres>>::decode(value)?;
        Ok(Self(T::from_stored(s)?))
    }
}

/// A JSONB column holding an object (`null` reads as an empty one).
pub(super) struct Object(pub(super) Map<String, Value>);

impl Type<Postgres> for Object {
    fn type_info() -> PgTypeInfo {
        <Json<Value> as Type<Postgres>>::type_info()
    }
    fn compatible(ty: &PgTypeInfo) -> bool {
        <Json<Value> as Type<Postgres>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Postgres> for Object {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        match <Json<Value> as Decode<Postgres>>::decode(value)?.0 {
            Value::Object(m) => Ok(Self(m)),
            Value::Null => Ok(Self(Map::new())),
            other => Err(Box::new(DbError::Backend(format!("not a JSON object: {other}")))),
        }
    }
}

impl FromRow for Assistant {
    const COLUMNS: &'static str =
        "assistant_id, graph_id, config, context, metadata, version, name, description, created_at, updated_at";

    fn from_row(row: &PgRow) -> DbResult<Self> {
        Ok(Assistant {
            assistant_id: col(row, "assistant_id")?,
            graph_id: col(row, "graph_id")?,
            config: col::<Json<Value>>(row, "config")?.0,
            context: col::<Json<Value>>(row, "context")?.0,
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

    fn from_row(row: &PgRow) -> DbResult<Self> {
        Ok(Thread {
            thread_id: col(row, "thread_id")?,
            created_at: col::<Time>(row, "created_at")?.0,
            updated_at: col::<Time>(row, "updated_at")?.0,
            state_updated_at: col::<Time>(row, "state_updated_at")?.0,
            metadata: col::<Object>(row, "metadata")?.0,
            config: col::<Json<Value>>(row, "config")?.0,
            status: col::<Text<_>>(row, "status")?.0,
            values: col::<Json<Value>>(row, "state_values")?.0,
            interrupts: col::<Json<Value>>(row, "interrupts")?.0,
            error: col::<Option<Json<Value>>>(row, "error")?.map(|j| j.0),
            ttl: col::<Option<Json<Value>>>(row, "ttl")?.map(|j| j.0),
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

    fn from_row(row: &PgRow) -> DbResult<Self> {
        Ok(QueuedRun {
            run: Run {
                run_id: col(row, "run_id")?,
                thread_id: col(row, "thread_id")?,
                assistant_id: col(row, "assistant_id")?,
                created_at: col::<Time>(row, "created_at")?.0,
                updated_at: col::<Time>(row, "updated_at")?.0,
                status: col::<Text<_>>(row, "status")?.0,
                metadata: col::<Object>(row, "metadata")?.0,
                kwargs: col::<Json<Value>>(row, "kwargs")?.0,
                multitask_strategy: col::<Text<_>>(row, "multitask_strategy")?.0,
                cancel_reason: col(row, "cancel_reason")?,
                ordinal: col(row, "ordinal")?,
            },
            attempt: col(row, "attempt")?,
        })
    }
}

/// The value of the row, if any.
pub(super) fn one<T: FromRow>(row: Option<PgRow>) -> DbResult<Option<T>> {
    row.as_ref().map(T::from_row).transpose()
}

/// The values of the rows.
pub(super) fn all<T: FromRow>(rows: &[PgRow]) -> DbResult<Vec<T>> {
    rows.iter().map(T::from_row).collect()
}
