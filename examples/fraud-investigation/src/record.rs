//! The investigation record on PostgreSQL (TDD-002 §7.2 steps 5-6): one row per
//! investigation in `ops_agent_investigation_state`, with the whole state as JSONB, and its
//! tool executions in `ops_agent_tool_execution_log`, written **in the same transaction as
//! the checkpoint that ends the investigation**.
//!
//! [`RecordHook`] is a [`CheckpointHook`] of the PostgreSQL saver. It wants the root
//! graph's checkpoints whose `status` changes to `COMPLETED`, `FAILED` or `TIMED_OUT` (the
//! completion node's, and the service's write-back of a timeout or failure); for those it
//! reads the checkpoint's whole state inside the put's transaction and upserts the row and
//! the log, keyed by investigation id. So:
//!
//! - the row exists exactly when the final checkpoint does: if writing it fails (the table
//!   was dropped, say), the checkpoint is not saved either, the run fails with an error
//!   naming the hook and the table, and the investigation can be resumed once fixed;
//! - a resumed or retaken investigation updates its row (a `TIMED_OUT` row becomes
//!   `COMPLETED`) and its log (execution `seq` is the position in `tool_executions`),
//!   never adds a second one.
//!
//! The tables are this example's own migrations ([`MIGRATIONS`], component
//! `fraud_investigation`, on `graphloom_postgres::migrate::run`), applied when
//! [`open_database`](crate::open_database) opens PostgreSQL, or before the first record when
//! the graph is given a saver the example did not open (a server's).
//! [`build_investigation_graph`](crate::build_investigation_graph) adds the hook to any
//! PostgreSQL saver it is given ([`with_record_hook`]); other backends keep the state in
//! their checkpoints only.
//!
//! ```sql
//! SELECT investigation_id, state->>'severity', state->'reasoning'->>'fraud_probability'
//! FROM ops_agent_investigation_state WHERE status = 'COMPLETED' ORDER BY updated_at DESC;
//! SELECT tool_name, status, execution_time_ms FROM ops_agent_tool_execution_log
//! WHERE investigation_id = $1 ORDER BY seq;
//! ```

use crate::state::{InvestigationState, InvestigationStatus, ToolExecution};
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::State as _;
use graphloom_postgres::migrate::Migration;
use graphloom_postgres::{CheckpointHook, HookCheckpoint, HookError, HookFuture, PostgresSaver};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool};
use std::sync::Arc;

/// The table of investigation records.
pub const STATE_TABLE: &str = "ops_agent_investigation_state";
/// The table of tool executions.
pub const TOOL_LOG_TABLE: &str = "ops_agent_tool_execution_log";
/// The migration component of this example's tables.
pub const COMPONENT: &str = "fraud_investigation";
/// The hook's name on the saver.
pub const HOOK_NAME: &str = "fraud_investigation.record";

/// The tables of the record, oldest first. Versions are this example's own (from
/// 1 000 000 up, apart from graphloom's).
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1_000_001,
    component: COMPONENT,
    description: "investigation records and their tool execution log",
    statements: &[
        r#"CREATE TABLE ops_agent_investigation_state (
    investigation_id TEXT COLLATE "C" PRIMARY KEY,
    transaction_id   TEXT NOT NULL,
    status           TEXT NOT NULL,
    severity         TEXT NOT NULL,
    confidence_score DOUBLE PRECISION NOT NULL,
    step_count       INTEGER NOT NULL,
    started_at       TEXT NOT NULL,
    completed_at     TEXT,
    error            TEXT,
    state            JSONB NOT NULL,
    thread_id        TEXT NOT NULL,
    checkpoint_id    TEXT NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
)"#,
        "CREATE INDEX ops_agent_investigation_state_status_idx
    ON ops_agent_investigation_state (status, severity)",
        "CREATE INDEX ops_agent_investigation_state_transaction_idx
    ON ops_agent_investigation_state (transaction_id)",
        r#"CREATE TABLE ops_agent_tool_execution_log (
    investigation_id  TEXT COLLATE "C" NOT NULL
        REFERENCES ops_agent_investigation_state (investigation_id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    tool_name         TEXT NOT NULL,
    input_summary     JSONB NOT NULL,
    output_summary    JSONB NOT NULL,
    execution_time_ms BIGINT NOT NULL,
    status            TEXT NOT NULL,
    error_message     TEXT,
    executed_at       TEXT NOT NULL,
    PRIMARY KEY (investigation_id, seq)
)"#,
        "CREATE INDEX ops_agent_tool_execution_log_tool_idx
    ON ops_agent_tool_execution_log (tool_name, status)",
    ],
}];

/// Create or upgrade the record's tables (under the migration lock; several processes may
/// call it at once).
///
/// # Errors
/// A typed backend error if the migration fails (nothing is applied then).
pub async fn migrate(pool: &PgPool) -> graphloom_core::Result<()> {
    graphloom_postgres::migrate::run(pool, MIGRATIONS).await
}

/// `checkpointer` with [`RecordHook`] when it is a PostgreSQL saver (a clone sharing its
/// pool; the saver itself is left as it is), else `checkpointer` unchanged.
#[must_use]
pub fn with_record_hook(checkpointer: Arc<dyn DynCheckpointer>) -> Arc<dyn DynCheckpointer> {
    match PostgresSaver::downcast(checkpointer.as_ref()) {
        Some(saver) if !saver.has_hook(HOOK_NAME) => Arc::new(saver.clone().with_hook(RecordHook)),
        _ => checkpointer,
    }
}

/// Writes the investigation record with the checkpoint that ends an investigation; see the
/// [module docs](self).
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordHook;

/// Whether `status` (a checkpoint's new `status` value) ends an investigation.
fn is_terminal(status: &Value) -> bool {
    [
        InvestigationStatus::Completed,
        InvestigationStatus::Failed,
        InvestigationStatus::TimedOut,
    ]
    .iter()
    .any(|s| status.as_str() == Some(s.as_str()))
}

impl CheckpointHook for RecordHook {
    fn name(&self) -> &str {
        HOOK_NAME
    }

    fn setup<'a>(&'a self, pool: &'a PgPool) -> HookFuture<'a, Result<(), HookError>> {
        Box::pin(async move { migrate(pool).await.map_err(HookError::from) })
    }

    fn wants(&self, checkpoint: &HookCheckpoint<'_>) -> bool {
        checkpoint.checkpoint_ns().is_empty() && checkpoint.new_json("status").is_some_and(is_terminal)
    }

    fn apply<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        checkpoint: &'a HookCheckpoint<'a>,
    ) -> HookFuture<'a, Result<(), HookError>> {
        Box::pin(async move {
            let values = checkpoint.values(&mut *conn).await?;
            let state = state_of(values)?;
            write_record(conn, checkpoint, &state).await
        })
    }
}

/// The investigation state from a checkpoint's channels (channels that are not fields of
/// the state are left out).
fn state_of(values: std::collections::BTreeMap<String, Value>) -> Result<InvestigationState, HookError> {
    let empty = InvestigationState::default();
    let fields: Map<String, Value> = values
        .into_iter()
        .filter(|(k, _)| empty.field_index(k).is_some())
        .collect();
    Ok(empty.state_from_json(Value::Object(fields))?)
}

/// PostgreSQL refuses `\u0000` in text and JSONB; a value from a client may hold one.
fn text(s: &str) -> String {
    s.replace('\0', "\u{FFFD}")
}

fn json(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(text(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(json).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (text(&k), json(v))).collect()),
        other => other,
    }
}

/// The log's columns, one array per column.
#[derive(Default)]
struct LogRows {
    seq: Vec<i32>,
    tool_name: Vec<String>,
    input_summary: Vec<Json<Value>>,
    output_summary: Vec<Json<Value>>,
    execution_time_ms: Vec<i64>,
    status: Vec<String>,
    error_message: Vec<Option<String>>,
    executed_at: Vec<String>,
}

impl LogRows {
    fn push(&mut self, seq: i32, e: &ToolExecution) {
        self.seq.push(seq);
        self.tool_name.push(text(&e.tool_name));
        self.input_summary
            .push(Json(json(Value::Object(e.input_summary.clone()))));
        self.output_summary
            .push(Json(json(Value::Object(e.output_summary.clone()))));
        self.execution_time_ms
            .push(i64::try_from(e.execution_time_ms).unwrap_or(i64::MAX));
        self.status.push(e.status.as_str().to_owned());
        self.error_message.push(e.error_message.as_deref().map(text));
        self.executed_at.push(text(&e.timestamp));
    }
}

async fn write_record(
    conn: &mut PgConnection,
    checkpoint: &HookCheckpoint<'_>,
    state: &InvestigationState,
) -> Result<(), HookError> {
    // A state decoded from a checkpoint always has an id once the planner ran; a run
    // written back before that is keyed by its thread.
    let id = if state.investigation_id.is_empty() {
        text(checkpoint.thread_id())
    } else {
        text(&state.investigation_id)
    };
    let doc = json(state.to_json()?);
    sqlx::query(
        "INSERT INTO ops_agent_investigation_state
             (investigation_id, transaction_id, status, severity, confidence_score, step_count,
              started_at, completed_at, error, state, thread_id, checkpoint_id, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now())
         ON CONFLICT (investigation_id) DO UPDATE SET
             transaction_id = EXCLUDED.transaction_id, status = EXCLUDED.status,
             severity = EXCLUDED.severity, confidence_score = EXCLUDED.confidence_score,
             step_count = EXCLUDED.step_count, started_at = EXCLUDED.started_at,
             completed_at = EXCLUDED.completed_at, error = EXCLUDED.error, state = EXCLUDED.state,
             thread_id = EXCLUDED.thread_id, checkpoint_id = EXCLUDED.checkpoint_id,
             updated_at = now()",
    )
    .bind(&id)
    .bind(text(&state.transaction_id))
    .bind(state.status.as_str())
    .bind(state.severity.as_str())
    .bind(state.confidence_score)
    .bind(i32::try_from(state.step_count).unwrap_or(i32::MAX))
    .bind(text(&state.started_at))
    .bind(state.completed_at.as_deref().map(text))
    .bind(state.error.as_deref().map(text))
    .bind(Json(doc))
    .bind(text(checkpoint.thread_id()))
    .bind(checkpoint.checkpoint_id())
    .execute(&mut *conn)
    .await?;

    let mut rows = LogRows::default();
    for (seq, e) in state.tool_executions.iter().enumerate() {
        rows.push(i32::try_from(seq).unwrap_or(i32::MAX), e);
    }
    let count = i32::try_from(rows.seq.len()).unwrap_or(i32::MAX);
    // The log mirrors `tool_executions`: entry `seq` is rewritten in place, entries past
    // the end (a record rewritten from an earlier checkpoint) go.
    sqlx::query(
        "INSERT INTO ops_agent_tool_execution_log
             (investigation_id, seq, tool_name, input_summary, output_summary, execution_time_ms,
              status, error_message, executed_at)
         SELECT $1, r.seq, r.tool_name, r.input_summary, r.output_summary, r.execution_time_ms,
                r.status, r.error_message, r.executed_at
         FROM unnest($2::int4[], $3::text[], $4::jsonb[], $5::jsonb[], $6::int8[], $7::text[],
                     $8::text[], $9::text[])
             AS r(seq, tool_name, input_summary, output_summary, execution_time_ms, status,
                  error_message, executed_at)
         ON CONFLICT (investigation_id, seq) DO UPDATE SET
             tool_name = EXCLUDED.tool_name, input_summary = EXCLUDED.input_summary,
             output_summary = EXCLUDED.output_summary,
             execution_time_ms = EXCLUDED.execution_time_ms, status = EXCLUDED.status,
             error_message = EXCLUDED.error_message, executed_at = EXCLUDED.executed_at",
    )
    .bind(&id)
    .bind(rows.seq)
    .bind(rows.tool_name)
    .bind(rows.input_summary)
    .bind(rows.output_summary)
    .bind(rows.execution_time_ms)
    .bind(rows.status)
    .bind(rows.error_message)
    .bind(rows.executed_at)
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM ops_agent_tool_execution_log WHERE investigation_id = $1 AND seq >= $2")
        .bind(&id)
        .bind(count)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terminal_statuses() {
        assert!(is_terminal(&json!("COMPLETED")));
        assert!(is_terminal(&json!("FAILED")));
        assert!(is_terminal(&json!("TIMED_OUT")));
        assert!(!is_terminal(&json!("IN_PROGRESS")));
        assert!(!is_terminal(&json!("PENDING")));
        assert!(!is_terminal(&json!(null)));
    }

    #[test]
    fn nul_characters_are_replaced_everywhere() {
        let v = json(json!({"a\u{0}": ["x\u{0}y", {"k": "\u{0}"}], "n": 1}));
        assert_eq!(v, json!({"a\u{FFFD}": ["x\u{FFFD}y", {"k": "\u{FFFD}"}], "n": 1}));
    }

    #[test]
    fn versions_are_apart_from_graphloom_s() {
        let ours: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert!(ours.iter().all(|v| *v >= 1_000_000));
        assert!(graphloom_postgres::migrate::MIGRATIONS
            .iter()
            .chain(graphloom_postgres::migrate::SERVER_MIGRATIONS)
            .all(|m| m.version < 1_000_000));
    }
}
