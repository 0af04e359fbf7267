//! [`SqliteDb`]: the server's tables in a SQLite file (the checkpointer's file).
//!
//! Writes go through the [`SqliteDatabase`] writer thread that the checkpointer and the store
//! of the same file use: every write is one operation in that thread's next transaction, so
//! a run's queue rows, checkpoints and store items queued together share one commit (one
//! fsync), and queue claims are serialised within the process and, through SQLite's write
//! lock, with other processes. Reads use the database's read pool. JSON is stored as TEXT;
//! metadata and values filters are evaluated in Rust with PostgreSQL's `@>` semantics.

use super::kit::{
    after, as_object, assistant_sort_column, cancel_action, event_record, json_contains, map_contains, merge,
    now_micros, order_keyword, page, patched, run_status, slice_page, strategy, thread_sort_column,
    thread_status, ttl_micros, ttl_value,
};
use super::{
    AssistantPatch, AssistantQuery, Db, DbError, DbResult, Lease, NewRun, ThreadOutcome, ThreadQuery,
};
use crate::broker::RunEventRecord;
use crate::models::{
    rfc3339_from_micros, Assistant, CancelAction, ClaimedRun, Run, RunStatus, Thread, ThreadStatus,
};
use async_trait::async_trait;
use graphloom_sqlite::rusqlite::{self, params, Connection};
use graphloom_sqlite::{SqliteDatabase, SqliteOptions};
use serde_json::{Map, Value};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{QueryBuilder, Row, Sqlite};
use std::path::Path;
use std::time::Duration;

/// One schema version: its statements, run in one transaction.
struct Migration {
    version: i64,
    statements: &'static [&'static str],
}

/// Every schema version, oldest first. Applied versions are recorded in
/// `server_schema_version`.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        statements: &[
            "CREATE TABLE server_assistants (
            assistant_id TEXT NOT NULL PRIMARY KEY,
            owner        TEXT NOT NULL,
            graph_id     TEXT NOT NULL,
            config       TEXT NOT NULL,
            context      TEXT NOT NULL,
            metadata     TEXT NOT NULL,
            version      INTEGER NOT NULL,
            name         TEXT NOT NULL,
            description  TEXT,
            created_at   INTEGER NOT NULL,
            updated_at   INTEGER NOT NULL
        )",
            "CREATE INDEX server_assistants_owner_idx ON server_assistants (owner, created_at)",
            "CREATE TABLE server_assistant_versions (
            assistant_id TEXT NOT NULL,
            version      INTEGER NOT NULL,
            owner        TEXT NOT NULL,
            graph_id     TEXT NOT NULL,
            config       TEXT NOT NULL,
            context      TEXT NOT NULL,
            metadata     TEXT NOT NULL,
            name         TEXT NOT NULL,
            description  TEXT,
            created_at   INTEGER NOT NULL,
            PRIMARY KEY (assistant_id, version)
        )",
            "CREATE TABLE server_threads (
            thread_id        TEXT NOT NULL PRIMARY KEY,
            owner            TEXT NOT NULL,
            created_at       INTEGER NOT NULL,
            updated_at       INTEGER NOT NULL,
            state_updated_at INTEGER NOT NULL,
            metadata         TEXT NOT NULL,
            config           TEXT NOT NULL,
            status           TEXT NOT NULL,
            state_values     TEXT NOT NULL,
            interrupts       TEXT NOT NULL,
            error            TEXT,
            ttl              TEXT,
            ttl_us           INTEGER,
            expires_at       INTEGER
        )",
            "CREATE INDEX server_threads_owner_idx ON server_threads (owner, created_at)",
            "CREATE INDEX server_threads_expires_idx ON server_threads (expires_at)
            WHERE expires_at IS NOT NULL",
            "CREATE TABLE server_runs (
            run_id             TEXT NOT NULL PRIMARY KEY,
            thread_id          TEXT NOT NULL,
            owner              TEXT NOT NULL,
            assistant_id       TEXT NOT NULL,
            created_at         INTEGER NOT NULL,
            updated_at         INTEGER NOT NULL,
            status             TEXT NOT NULL,
            metadata           TEXT NOT NULL,
            kwargs             TEXT NOT NULL,
            multitask_strategy TEXT NOT NULL,
            due_at             INTEGER NOT NULL,
            worker             TEXT,
            lease_expires_at   INTEGER,
            attempt            INTEGER NOT NULL DEFAULT 0,
            cancel_action      TEXT
        )",
            "CREATE INDEX server_runs_queue_idx ON server_runs (status, created_at, run_id)",
            "CREATE INDEX server_runs_thread_idx ON server_runs (thread_id, status)",
        ],
    },
    Migration {
        version: 2,
        statements: &["CREATE TABLE server_run_events (
            run_id TEXT NOT NULL,
            seq    INTEGER NOT NULL,
            event  TEXT NOT NULL,
            data   TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        )"],
    },
];

const ASSISTANT_COLS: &str =
    "assistant_id, graph_id, config, context, metadata, version, name, description, created_at, updated_at";
const VERSION_COLS: &str = "assistant_id, graph_id, config, context, metadata, version, name, description, \
     created_at, created_at AS updated_at";
const THREAD_COLS: &str = "thread_id, created_at, updated_at, state_updated_at, metadata, config, status, \
     state_values, interrupts, error, ttl";
const RUN_COLS: &str = "run_id, thread_id, assistant_id, created_at, updated_at, status, metadata, kwargs, \
     multitask_strategy, attempt, cancel_action";

/// The oldest claimable run (`?1` = now): pending and due, or running with an expired
/// lease. A pending run waits for every running run of its thread (a dead worker's expired
/// one is taken over first); an expired running run waits only for live ones.
const CLAIMABLE: &str = "SELECT r.run_id, r.thread_id FROM server_runs r \
     WHERE ((r.status = 'pending' AND r.due_at <= ?1) \
         OR (r.status = 'running' AND r.lease_expires_at < ?1)) \
       AND NOT EXISTS (SELECT 1 FROM server_runs o WHERE o.thread_id = r.thread_id \
         AND o.run_id <> r.run_id AND o.status = 'running' \
         AND (r.status = 'pending' OR o.lease_expires_at >= ?1)) \
     ORDER BY r.created_at, r.run_id LIMIT 1";

/// The server's storage in SQLite.
#[derive(Debug, Clone)]
pub struct SqliteDb {
    db: SqliteDatabase,
}

impl SqliteDb {
    /// Open (creating if needed) the database file with default settings (WAL,
    /// `synchronous=FULL`) and migrate it. A server that also keeps checkpoints or a store
    /// in the file should open one [`SqliteDatabase`] and use [`SqliteDb::new`].
    ///
    /// # Errors
    /// When the file cannot be opened or migrated.
    pub async fn open(path: impl AsRef<Path>) -> DbResult<Self> {
        Self::new(SqliteDatabase::open(SqliteOptions::new(path.as_ref())).await?).await
    }

    /// The server's tables in `db` (migrated first), written through its writer thread.
    ///
    /// # Errors
    /// When the tables cannot be migrated.
    pub async fn new(db: SqliteDatabase) -> DbResult<Self> {
        let db = Self { db };
        db.migrate().await?;
        Ok(db)
    }

    fn reader(&self) -> &SqlitePool {
        self.db.reader()
    }

    /// Run `op` in one read transaction on a read connection, on this thread: for the
    /// point reads by key of a request's path (a hand-off to another thread would cost
    /// more than the read).
    fn read<T>(&self, op: impl FnOnce(&Connection) -> DbResult<T>) -> DbResult<T> {
        self.db.read(op)
    }

    /// Run `op` in the writer's next transaction; an error rolls back `op`'s changes.
    async fn write<T, F>(&self, op: F) -> DbResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<T> + Send + 'static,
    {
        self.db.write(op).await
    }

    async fn migrate(&self) -> DbResult<()> {
        self.write(|c| {
            c.execute_batch(
                "CREATE TABLE IF NOT EXISTS server_schema_version (
                    version    INTEGER NOT NULL PRIMARY KEY,
                    applied_at INTEGER NOT NULL
                )",
            )?;
            let applied: Vec<i64> = c
                .prepare("SELECT version FROM server_schema_version")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for m in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
                tracing::info!(version = m.version, "migrating the server's SQLite tables");
                for statement in m.statements {
                    c.execute_batch(statement)?;
                }
                c.execute(
                    "INSERT INTO server_schema_version (version, applied_at) VALUES (?1, ?2)",
                    params![m.version, now_micros()],
                )?;
            }
            Ok(())
        })
        .await
    }

    /// Expire the lease of every running run, so the workers claim them at once (each
    /// attempt counted) instead of waiting for the lease to run out; the number of runs.
    ///
    /// Only for a server that holds the file's lock ([`super::file_lock`]) before its
    /// workers start: no other process can then be executing those runs, they were left
    /// by one that died.
    pub(crate) async fn expire_leases(&self) -> DbResult<usize> {
        self.write(|c| {
            exec(
                c,
                "UPDATE server_runs SET lease_expires_at = 0 WHERE status = 'running'",
                [],
            )
        })
        .await
    }

    /// Delete a thread (of `owner`, or of anyone) and its runs.
    async fn delete_thread_of(&self, owner: Option<&str>, id: &str) -> DbResult<bool> {
        let (owner, id) = (owner.map(str::to_owned), id.to_owned());
        self.write(move |c| {
            let n = exec(
                c,
                "DELETE FROM server_threads WHERE thread_id = ?1 AND (?2 IS NULL OR owner = ?2)",
                params![id, owner],
            )?;
            if n > 0 {
                exec(
                    c,
                    "DELETE FROM server_run_events WHERE run_id IN \
                     (SELECT run_id FROM server_runs WHERE thread_id = ?1)",
                    params![id],
                )?;
                exec(c, "DELETE FROM server_runs WHERE thread_id = ?1", params![id])?;
            }
            Ok(n > 0)
        })
        .await
    }
}

/// Run one statement with a cached prepared statement; the rows it changed.
fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> DbResult<usize> {
    Ok(c.prepare_cached(sql)?.execute(p)?)
}

/// The first row of a query, decoded by `f`.
fn query_one<T>(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> DbResult<T>,
) -> DbResult<Option<T>> {
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query(p)?;
    match rows.next()? {
        Some(r) => f(r).map(Some),
        None => Ok(None),
    }
}

fn text<T: serde::Serialize + ?Sized>(v: &T) -> DbResult<String> {
    serde_json::to_string(v).map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))
}

/// Column access shared by read rows (sqlx) and rows returned inside writes (rusqlite).
trait Cols {
    fn get_str(&self, col: &str) -> DbResult<String>;
    fn get_opt_str(&self, col: &str) -> DbResult<Option<String>>;
    fn get_int(&self, col: &str) -> DbResult<i64>;
}

impl Cols for SqliteRow {
    fn get_str(&self, col: &str) -> DbResult<String> {
        Ok(self.try_get(col)?)
    }
    fn get_opt_str(&self, col: &str) -> DbResult<Option<String>> {
        Ok(self.try_get(col)?)
    }
    fn get_int(&self, col: &str) -> DbResult<i64> {
        Ok(self.try_get(col)?)
    }
}

impl Cols for rusqlite::Row<'_> {
    fn get_str(&self, col: &str) -> DbResult<String> {
        Ok(self.get(col)?)
    }
    fn get_opt_str(&self, col: &str) -> DbResult<Option<String>> {
        Ok(self.get(col)?)
    }
    fn get_int(&self, col: &str) -> DbResult<i64> {
        Ok(self.get(col)?)
    }
}

fn json(row: &impl Cols, col: &str) -> DbResult<Value> {
    let s = row.get_str(col)?;
    serde_json::from_str(&s).map_err(|e| DbError::Backend(format!("bad JSON in {col}: {e}")))
}

fn opt_json(row: &impl Cols, col: &str) -> DbResult<Option<Value>> {
    row.get_opt_str(col)?
        .map(|s| serde_json::from_str(&s).map_err(|e| DbError::Backend(format!("bad JSON in {col}: {e}"))))
        .transpose()
}

fn assistant(row: &impl Cols) -> DbResult<Assistant> {
    Ok(Assistant {
        assistant_id: row.get_str("assistant_id")?,
        graph_id: row.get_str("graph_id")?,
        config: json(row, "config")?,
        context: json(row, "context")?,
        created_at: rfc3339_from_micros(row.get_int("created_at")?),
        updated_at: rfc3339_from_micros(row.get_int("updated_at")?),
        metadata: as_object(json(row, "metadata")?, "metadata")?,
        version: row.get_int("version")?,
        name: row.get_str("name")?,
        description: row.get_opt_str("description")?,
    })
}

fn thread(row: &impl Cols) -> DbResult<Thread> {
    Ok(Thread {
        thread_id: row.get_str("thread_id")?,
        created_at: rfc3339_from_micros(row.get_int("created_at")?),
        updated_at: rfc3339_from_micros(row.get_int("updated_at")?),
        state_updated_at: rfc3339_from_micros(row.get_int("state_updated_at")?),
        metadata: as_object(json(row, "metadata")?, "metadata")?,
        config: json(row, "config")?,
        status: thread_status(&row.get_str("status")?)?,
        values: json(row, "state_values")?,
        interrupts: json(row, "interrupts")?,
        error: opt_json(row, "error")?,
        ttl: opt_json(row, "ttl")?,
    })
}

/// A run row with its attempt count and cancel request.
fn run(row: &impl Cols) -> DbResult<(Run, i64, Option<CancelAction>)> {
    let r = Run {
        run_id: row.get_str("run_id")?,
        thread_id: row.get_str("thread_id")?,
        assistant_id: row.get_str("assistant_id")?,
        created_at: rfc3339_from_micros(row.get_int("created_at")?),
        updated_at: rfc3339_from_micros(row.get_int("updated_at")?),
        status: run_status(&row.get_str("status")?)?,
        metadata: as_object(json(row, "metadata")?, "metadata")?,
        kwargs: json(row, "kwargs")?,
        multitask_strategy: strategy(&row.get_str("multitask_strategy")?)?,
    };
    Ok((
        r,
        row.get_int("attempt")?,
        cancel_action(row.get_opt_str("cancel_action")?.as_deref())?,
    ))
}

fn push_assistant_filters(qb: &mut QueryBuilder<'_, Sqlite>, owner: &str, q: &AssistantQuery) {
    qb.push(" WHERE owner = ").push_bind(owner.to_owned());
    if let Some(g) = &q.graph_id {
        qb.push(" AND graph_id = ").push_bind(g.clone());
    }
    if let Some(n) = &q.name {
        qb.push(" AND instr(lower(name), lower(")
            .push_bind(n.clone())
            .push(")) > 0");
    }
}

fn push_thread_filters(qb: &mut QueryBuilder<'_, Sqlite>, owner: &str, q: &ThreadQuery) {
    qb.push(" WHERE owner = ").push_bind(owner.to_owned());
    if let Some(ids) = &q.ids {
        qb.push(" AND thread_id IN (");
        let mut list = qb.separated(", ");
        for id in ids {
            list.push_bind(id.clone());
        }
        list.push_unseparated(")");
    }
    if let Some(s) = q.status {
        qb.push(" AND status = ").push_bind(s.as_str());
    }
}

fn push_page(qb: &mut QueryBuilder<'_, Sqlite>, limit: i64, offset: i64) {
    let (limit, offset) = page(limit, offset);
    qb.push(" LIMIT ")
        .push_bind(limit.unwrap_or(-1))
        .push(" OFFSET ")
        .push_bind(offset);
}

/// The UPDATE that ends (or requeues) a run held by a worker.
fn finish_sql(status: RunStatus) -> &'static str {
    match status {
        // Back to the queue (e.g. a worker shutting down): claimable again at once.
        RunStatus::Pending => {
            "UPDATE server_runs SET status = ?1, worker = NULL, lease_expires_at = NULL, due_at = ?2, \
             updated_at = ?2 WHERE run_id = ?3 AND worker = ?4 AND status = 'running'"
        }
        RunStatus::Running => {
            "UPDATE server_runs SET status = ?1, updated_at = ?2 \
             WHERE run_id = ?3 AND worker = ?4 AND status = 'running'"
        }
        _ => {
            "UPDATE server_runs SET status = ?1, lease_expires_at = NULL, updated_at = ?2 \
             WHERE run_id = ?3 AND worker = ?4 AND status = 'running'"
        }
    }
}

/// End (or requeue) a run held by `worker`; the rows changed (0: not held any more).
fn finish(c: &Connection, run_id: &str, worker: &str, status: RunStatus, now: i64) -> DbResult<usize> {
    exec(
        c,
        finish_sql(status),
        params![status.as_str(), now, run_id, worker],
    )
}

/// A thread outcome encoded for [`OUTCOME_SQL`].
struct OutcomeRow {
    status: &'static str,
    values: Option<String>,
    interrupts: String,
    error: Option<String>,
}

impl OutcomeRow {
    fn new(outcome: &ThreadOutcome) -> DbResult<Self> {
        Ok(Self {
            status: outcome.status.as_str(),
            values: outcome.values.as_ref().map(text).transpose()?,
            interrupts: text(&outcome.interrupts)?,
            error: outcome
                .error
                .as_ref()
                .filter(|e| !e.is_null())
                .map(text)
                .transpose()?,
        })
    }

    fn write(&self, c: &Connection, thread_id: &str, now: i64) -> DbResult<()> {
        exec(
            c,
            OUTCOME_SQL,
            params![
                self.status,
                self.values,
                self.interrupts,
                self.error,
                now,
                thread_id
            ],
        )?;
        Ok(())
    }
}

/// The UPDATE that records a run's outcome on its thread.
const OUTCOME_SQL: &str =
    "UPDATE server_threads SET status = ?1, state_values = COALESCE(?2, state_values), \
    interrupts = ?3, error = ?4, state_updated_at = ?5, updated_at = ?5, \
    expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?5 + ttl_us END WHERE thread_id = ?6";

#[async_trait]
impl Db for SqliteDb {
    async fn create_assistant(&self, owner: &str, a: &Assistant) -> DbResult<Assistant> {
        let now = now_micros();
        let (config, context, metadata) = (text(&a.config)?, text(&a.context)?, text(&a.metadata)?);
        let (owner, new) = (owner.to_owned(), a.clone());
        self.write(move |c| {
            let inserted = exec(
                c,
                "INSERT INTO server_assistants (assistant_id, owner, graph_id, config, context, metadata, \
                 version, name, description, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, ?9, ?9) ON CONFLICT (assistant_id) DO NOTHING",
                params![new.assistant_id, owner, new.graph_id, config, context, metadata, new.name, new.description, now],
            )?;
            if inserted == 0 {
                return Err(DbError::Conflict(format!("assistant {}", new.assistant_id)));
            }
            exec(
                c,
                "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
                 context, metadata, name, description, created_at) VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![new.assistant_id, owner, new.graph_id, config, context, metadata, new.name, new.description, now],
            )?;
            Ok(())
        })
        .await?;
        Ok(Assistant {
            version: 1,
            created_at: rfc3339_from_micros(now),
            updated_at: rfc3339_from_micros(now),
            ..a.clone()
        })
    }

    async fn get_assistant(&self, owner: &str, id: &str) -> DbResult<Option<Assistant>> {
        self.read(|c| {
            query_one(
                c,
                &format!(
                    "SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = ?1 AND owner = ?2"
                ),
                params![id, owner],
                |r| assistant(r),
            )
        })
    }

    async fn patch_assistant(
        &self,
        owner: &str,
        id: &str,
        patch: AssistantPatch,
    ) -> DbResult<Option<Assistant>> {
        let now = now_micros();
        let (owner, id) = (owner.to_owned(), id.to_owned());
        self.write(move |c| {
            let found = query_one(
                c,
                &format!("SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = ?1 AND owner = ?2"),
                params![id, owner],
                |r| assistant(r),
            )?;
            let Some(mut a) = found else { return Ok(None) };
            let latest: Option<i64> = c
                .prepare_cached("SELECT MAX(version) FROM server_assistant_versions WHERE assistant_id = ?1")?
                .query_row(params![id], |r| r.get(0))?;
            patched(&mut a, patch, latest, now);
            let (config, context, metadata) = (text(&a.config)?, text(&a.context)?, text(&a.metadata)?);
            exec(
                c,
                "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
                 context, metadata, name, description, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![id, a.version, owner, a.graph_id, config, context, metadata, a.name, a.description, now],
            )?;
            exec(
                c,
                "UPDATE server_assistants SET graph_id = ?1, config = ?2, context = ?3, metadata = ?4, \
                 version = ?5, name = ?6, description = ?7, updated_at = ?8 WHERE assistant_id = ?9",
                params![a.graph_id, config, context, metadata, a.version, a.name, a.description, now, id],
            )?;
            Ok(Some(a))
        })
        .await
    }

    async fn delete_assistant(&self, owner: &str, id: &str) -> DbResult<bool> {
        let (owner, id) = (owner.to_owned(), id.to_owned());
        self.write(move |c| {
            let n = exec(
                c,
                "DELETE FROM server_assistants WHERE assistant_id = ?1 AND owner = ?2",
                params![id, owner],
            )?;
            if n > 0 {
                exec(
                    c,
                    "DELETE FROM server_assistant_versions WHERE assistant_id = ?1",
                    params![id],
                )?;
            }
            Ok(n > 0)
        })
        .await
    }

    async fn search_assistants(&self, owner: &str, q: &AssistantQuery) -> DbResult<(Vec<Assistant>, i64)> {
        let col = assistant_sort_column(q.sort_by.as_deref());
        let ord = order_keyword(q.sort_order);
        let mut qb = QueryBuilder::new(format!("SELECT {ASSISTANT_COLS} FROM server_assistants"));
        push_assistant_filters(&mut qb, owner, q);
        qb.push(format!(" ORDER BY {col} {ord}, assistant_id {ord}"));
        if q.metadata.is_empty() {
            push_page(&mut qb, q.limit, q.offset);
            let rows = qb.build().fetch_all(self.reader()).await?;
            let page = rows.iter().map(assistant).collect::<DbResult<Vec<_>>>()?;
            let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_assistants");
            push_assistant_filters(&mut count, owner, q);
            let total: i64 = count.build_query_scalar().fetch_one(self.reader()).await?;
            return Ok((page, total));
        }
        let rows = qb.build().fetch_all(self.reader()).await?;
        let mut all = Vec::new();
        for row in &rows {
            let a = assistant(row)?;
            if map_contains(&a.metadata, &q.metadata) {
                all.push(a);
            }
        }
        let total = all.len() as i64;
        Ok((slice_page(all, q.limit, q.offset), total))
    }

    async fn assistant_versions(
        &self,
        owner: &str,
        id: &str,
        metadata: &Map<String, Value>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Assistant>> {
        let rows = sqlx::query(&format!(
            "SELECT {VERSION_COLS} FROM server_assistant_versions WHERE assistant_id = ? AND owner = ? \
             ORDER BY version DESC"
        ))
        .bind(id)
        .bind(owner)
        .fetch_all(self.reader())
        .await?;
        let mut all = Vec::new();
        for row in &rows {
            let a = assistant(row)?;
            if map_contains(&a.metadata, metadata) {
                all.push(a);
            }
        }
        Ok(slice_page(all, limit, offset))
    }

    async fn set_assistant_version(
        &self,
        owner: &str,
        id: &str,
        version: i64,
    ) -> DbResult<Option<Assistant>> {
        let now = now_micros();
        let (owner, id) = (owner.to_owned(), id.to_owned());
        self.write(move |c| {
            let n = exec(
                c,
                "UPDATE server_assistants SET (graph_id, config, context, metadata, version, name, description) = \
                 (SELECT graph_id, config, context, metadata, version, name, description \
                  FROM server_assistant_versions v WHERE v.assistant_id = ?1 AND v.version = ?3), updated_at = ?4 \
                 WHERE assistant_id = ?1 AND owner = ?2 AND EXISTS \
                 (SELECT 1 FROM server_assistant_versions v WHERE v.assistant_id = ?1 AND v.version = ?3)",
                params![id, owner, version, now],
            )?;
            if n == 0 {
                return Ok(None);
            }
            query_one(
                c,
                &format!("SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = ?1"),
                params![id],
                |r| assistant(r),
            )
        })
        .await
    }

    async fn create_thread(&self, owner: &str, t: &Thread) -> DbResult<Thread> {
        let now = now_micros();
        let ttl = ttl_value(t.ttl.as_ref());
        let ttl_us = ttl_micros(ttl);
        let row = (
            t.thread_id.clone(),
            owner.to_owned(),
            text(&t.metadata)?,
            text(&t.config)?,
            t.status.as_str(),
            text(&t.values)?,
            text(&t.interrupts)?,
            t.error.as_ref().filter(|e| !e.is_null()).map(text).transpose()?,
            ttl.map(text).transpose()?,
        );
        let inserted = self
            .write(move |c| {
                let (id, owner, metadata, config, status, values, interrupts, error, ttl) = row;
                exec(
                    c,
                    "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, \
                     metadata, config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
                     VALUES (?1, ?2, ?3, ?3, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
                     ON CONFLICT (thread_id) DO NOTHING",
                    params![
                        id,
                        owner,
                        now,
                        metadata,
                        config,
                        status,
                        values,
                        interrupts,
                        error,
                        ttl,
                        ttl_us,
                        ttl_us.map(|us| now.saturating_add(us))
                    ],
                )
            })
            .await?;
        if inserted == 0 {
            return Err(DbError::Conflict(format!("thread {}", t.thread_id)));
        }
        let at = rfc3339_from_micros(now);
        Ok(Thread {
            created_at: at.clone(),
            updated_at: at.clone(),
            state_updated_at: at,
            error: t.error.clone().filter(|e| !e.is_null()),
            ttl: ttl.cloned(),
            ..t.clone()
        })
    }

    async fn get_thread(&self, owner: &str, id: &str) -> DbResult<Option<Thread>> {
        self.read(|c| {
            query_one(
                c,
                &format!("SELECT {THREAD_COLS} FROM server_threads WHERE thread_id = ?1 AND owner = ?2"),
                params![id, owner],
                |r| thread(r),
            )
        })
    }

    async fn patch_thread(
        &self,
        owner: &str,
        id: &str,
        metadata: Option<&Map<String, Value>>,
        ttl: Option<Value>,
    ) -> DbResult<Option<Thread>> {
        let now = now_micros();
        let (owner, id, metadata) = (owner.to_owned(), id.to_owned(), metadata.cloned());
        self.write(move |c| {
            let found = query_one(
                c,
                &format!("SELECT {THREAD_COLS} FROM server_threads WHERE thread_id = ?1 AND owner = ?2"),
                params![id, owner],
                |r| thread(r),
            )?;
            let Some(mut t) = found else { return Ok(None) };
            if let Some(m) = &metadata {
                merge(&mut t.metadata, m);
            }
            if let Some(ttl) = ttl {
                t.ttl = ttl_value(Some(&ttl)).cloned();
            }
            let ttl_us = ttl_micros(t.ttl.as_ref());
            exec(
                c,
                "UPDATE server_threads SET metadata = ?1, ttl = ?2, ttl_us = ?3, expires_at = ?4, updated_at = ?5 \
                 WHERE thread_id = ?6",
                params![
                    text(&t.metadata)?,
                    t.ttl.as_ref().map(text).transpose()?,
                    ttl_us,
                    ttl_us.map(|us| now.saturating_add(us)),
                    now,
                    id
                ],
            )?;
            t.updated_at = rfc3339_from_micros(now);
            Ok(Some(t))
        })
        .await
    }

    async fn set_thread_outcome(&self, id: &str, outcome: &ThreadOutcome) -> DbResult<()> {
        let (row, id) = (OutcomeRow::new(outcome)?, id.to_owned());
        self.write(move |c| row.write(c, &id, now_micros())).await
    }

    async fn finish_run_with_outcome(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        thread_id: &str,
        outcome: &ThreadOutcome,
    ) -> DbResult<bool> {
        let row = OutcomeRow::new(outcome)?;
        let (run_id, worker, thread_id) = (run_id.to_owned(), worker.to_owned(), thread_id.to_owned());
        self.write(move |c| {
            let now = now_micros();
            if finish(c, &run_id, &worker, status, now)? == 0 {
                return Ok(false);
            }
            row.write(c, &thread_id, now)?;
            Ok(true)
        })
        .await
    }

    async fn finish_run_at_checkpoint(
        &self,
        run_id: &str,
        worker: &str,
        thread_id: &str,
        outcome: &ThreadOutcome,
        checkpoint_id: &str,
    ) -> DbResult<bool> {
        let row = OutcomeRow::new(outcome)?;
        let (run_id, worker, thread_id, checkpoint_id) = (
            run_id.to_owned(),
            worker.to_owned(),
            thread_id.to_owned(),
            checkpoint_id.to_owned(),
        );
        self.write(move |c| {
            if !SqliteDatabase::checkpoint_saved(c, &thread_id, "", &checkpoint_id)? {
                return Ok(false);
            }
            let now = now_micros();
            if finish(c, &run_id, &worker, RunStatus::Success, now)? == 0 {
                return Ok(false);
            }
            row.write(c, &thread_id, now)?;
            Ok(true)
        })
        .await
    }

    async fn set_thread_status(&self, id: &str, status: ThreadStatus) -> DbResult<()> {
        let id = id.to_owned();
        self.write(move |c| {
            exec(
                c,
                "UPDATE server_threads SET status = ?1, updated_at = ?2, \
                 expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?2 + ttl_us END WHERE thread_id = ?3",
                params![status.as_str(), now_micros(), id],
            )?;
            Ok(())
        })
        .await
    }

    async fn delete_thread(&self, owner: &str, id: &str) -> DbResult<bool> {
        self.delete_thread_of(Some(owner), id).await
    }

    async fn delete_thread_any(&self, id: &str) -> DbResult<bool> {
        self.delete_thread_of(None, id).await
    }

    async fn search_threads(&self, owner: &str, q: &ThreadQuery) -> DbResult<(Vec<Thread>, i64)> {
        if q.ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok((Vec::new(), 0));
        }
        let col = thread_sort_column(q.sort_by.as_deref());
        let ord = order_keyword(q.sort_order);
        let mut qb = QueryBuilder::new(format!("SELECT {THREAD_COLS} FROM server_threads"));
        push_thread_filters(&mut qb, owner, q);
        qb.push(format!(" ORDER BY {col} {ord}, thread_id {ord}"));
        if q.metadata.is_empty() && q.values.is_empty() {
            push_page(&mut qb, q.limit, q.offset);
            let rows = qb.build().fetch_all(self.reader()).await?;
            let page = rows.iter().map(thread).collect::<DbResult<Vec<_>>>()?;
            let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_threads");
            push_thread_filters(&mut count, owner, q);
            let total: i64 = count.build_query_scalar().fetch_one(self.reader()).await?;
            return Ok((page, total));
        }
        let rows = qb.build().fetch_all(self.reader()).await?;
        let values = Value::Object(q.values.clone());
        let mut all = Vec::new();
        for row in &rows {
            let t = thread(row)?;
            if map_contains(&t.metadata, &q.metadata)
                && (q.values.is_empty() || json_contains(&t.values, &values))
            {
                all.push(t);
            }
        }
        let total = all.len() as i64;
        Ok((slice_page(all, q.limit, q.offset), total))
    }

    async fn expired_threads(&self, limit: i64) -> DbResult<Vec<String>> {
        let (limit, _) = page(limit, 0);
        Ok(sqlx::query_scalar(
            "SELECT thread_id FROM server_threads WHERE expires_at IS NOT NULL AND expires_at <= ? \
             AND status <> 'busy' ORDER BY expires_at, thread_id LIMIT ?",
        )
        .bind(now_micros())
        .bind(limit.unwrap_or(-1))
        .fetch_all(self.reader())
        .await?)
    }

    async fn create_run(&self, new: &NewRun) -> DbResult<Run> {
        let now = now_micros();
        let r = &new.run;
        let (metadata, kwargs) = (text(&r.metadata)?, text(&r.kwargs)?);
        let due = new.delay.map_or(now, |d| after(now, d));
        let row = (
            r.run_id.clone(),
            r.thread_id.clone(),
            new.owner.clone(),
            r.assistant_id.clone(),
            r.multitask_strategy.as_str(),
        );
        let (reject_if_busy, cancel_active) = (new.reject_if_busy, new.cancel_active);
        let (thread_metadata, claim) = (new.thread_metadata.clone(), new.claim.clone());
        let claimed = self.write(move |c| {
            let (run_id, thread_id, owner, assistant_id, strategy) = row;
            let Some(stored_metadata) = query_one(
                c,
                "SELECT metadata FROM server_threads WHERE thread_id = ?1",
                params![thread_id],
                |r| json(r, "metadata"),
            )?
            else {
                return Err(DbError::Backend(format!("thread {thread_id} not found")));
            };
            let active = |c: &Connection| -> DbResult<bool> {
                let n: i64 = c
                    .prepare_cached(
                        "SELECT COUNT(*) FROM server_runs WHERE thread_id = ?1 AND status IN ('pending', 'running')",
                    )?
                    .query_row(params![thread_id], |r| r.get(0))?;
                Ok(n > 0)
            };
            if reject_if_busy && active(c)? {
                return Err(DbError::Busy(thread_id));
            }
            if let Some(action) = cancel_active {
                let pending = match action {
                    CancelAction::Interrupt => {
                        "UPDATE server_runs SET status = 'interrupted', updated_at = ?1 \
                         WHERE thread_id = ?2 AND status = 'pending'"
                    }
                    CancelAction::Rollback => {
                        "DELETE FROM server_runs WHERE thread_id = ?2 AND status = 'pending' AND ?1 IS NOT NULL"
                    }
                };
                exec(c, pending, params![now, thread_id])?;
                exec(
                    c,
                    "UPDATE server_runs SET cancel_action = ?1, updated_at = ?2 \
                     WHERE thread_id = ?3 AND status = 'running'",
                    params![action.as_str(), now, thread_id],
                )?;
            }
            // Claimed at once: inserted running (no pending row to update, no index
            // entries written twice).
            let claim = match claim {
                Some(held) if due <= now && !active(c)? => Some(held),
                _ => None,
            };
            let (status, worker, lease_expires_at, attempt) = match &claim {
                Some((worker, lease)) => ("running", Some(worker.as_str()), Some(after(now, *lease)), 1),
                None => ("pending", None, None, 0),
            };
            let inserted = exec(
                c,
                "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
                 metadata, kwargs, multitask_strategy, due_at, worker, lease_expires_at, attempt) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (run_id) DO NOTHING",
                params![
                    run_id,
                    thread_id,
                    owner,
                    assistant_id,
                    now,
                    status,
                    metadata,
                    kwargs,
                    strategy,
                    due,
                    worker,
                    lease_expires_at,
                    attempt
                ],
            )?;
            if inserted == 0 {
                return Err(DbError::Conflict(format!("run {run_id}")));
            }
            // The thread: the run's graph in its metadata, busy if claimed; one update.
            let merged = match &thread_metadata {
                Some(m) => {
                    let mut merged = match stored_metadata {
                        Value::Object(o) => o,
                        _ => Map::new(),
                    };
                    merge(&mut merged, m);
                    Some(text(&merged)?)
                }
                None => None,
            };
            let claimed = claim.is_some();
            if merged.is_some() || claimed {
                exec(
                    c,
                    "UPDATE server_threads SET metadata = COALESCE(?1, metadata), updated_at = ?2, \
                     status = CASE WHEN ?3 THEN 'busy' ELSE status END, \
                     expires_at = CASE WHEN NOT ?3 THEN expires_at WHEN ttl_us IS NULL THEN NULL ELSE ?2 + ttl_us END \
                     WHERE thread_id = ?4",
                    params![merged, now, claimed, thread_id],
                )?;
            }
            Ok(claimed)
        })
        .await?;
        let at = rfc3339_from_micros(now);
        Ok(Run {
            created_at: at.clone(),
            updated_at: at,
            status: if claimed {
                RunStatus::Running
            } else {
                RunStatus::Pending
            },
            ..r.clone()
        })
    }

    async fn get_run(&self, owner: &str, thread_id: Option<&str>, run_id: &str) -> DbResult<Option<Run>> {
        let found = self.read(|c| {
            query_one(
                c,
                &format!(
                    "SELECT {RUN_COLS} FROM server_runs WHERE run_id = ?1 AND owner = ?2 \
                     AND (?3 IS NULL OR thread_id = ?3)"
                ),
                params![run_id, owner, thread_id],
                |r| run(r),
            )
        })?;
        Ok(found.map(|(r, _, _)| r))
    }

    async fn list_runs(
        &self,
        owner: &str,
        thread_id: &str,
        status: Option<RunStatus>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Run>> {
        let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM server_runs WHERE thread_id = "));
        qb.push_bind(thread_id.to_owned())
            .push(" AND owner = ")
            .push_bind(owner.to_owned());
        if let Some(s) = status {
            qb.push(" AND status = ").push_bind(s.as_str());
        }
        qb.push(" ORDER BY created_at DESC, run_id DESC");
        push_page(&mut qb, limit, offset);
        let rows = qb.build().fetch_all(self.reader()).await?;
        rows.iter().map(|row| run(row).map(|(r, _, _)| r)).collect()
    }

    async fn delete_run(&self, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
        let (owner, thread_id, run_id) = (owner.to_owned(), thread_id.to_owned(), run_id.to_owned());
        self.write(move |c| {
            let n = exec(
                c,
                "DELETE FROM server_runs WHERE run_id = ?1 AND thread_id = ?2 AND owner = ?3",
                params![run_id, thread_id, owner],
            )?;
            if n > 0 {
                exec(
                    c,
                    "DELETE FROM server_run_events WHERE run_id = ?1",
                    params![run_id],
                )?;
            }
            Ok(n > 0)
        })
        .await
    }

    async fn claim_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        // A look on a read connection first: idle workers polling an empty queue then never
        // queue behind the writer.
        let any = self.read(|c| query_one(c, CLAIMABLE, params![now_micros()], |_| Ok(())))?;
        if any.is_none() {
            return Ok(None);
        }
        let worker = worker.to_owned();
        self.write(move |c| {
            let now = now_micros();
            let picked = query_one(c, CLAIMABLE, params![now], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?;
            let Some((run_id, thread_id)) = picked else {
                return Ok(None);
            };
            let claimed = query_one(
                c,
                &format!(
                    "UPDATE server_runs SET status = 'running', worker = ?1, lease_expires_at = ?2, \
                     attempt = attempt + 1, updated_at = ?3 WHERE run_id = ?4 RETURNING {RUN_COLS}"
                ),
                params![worker, after(now, lease), now, run_id],
                |r| run(r),
            )?;
            let Some((r, attempt, _)) = claimed else {
                return Ok(None);
            };
            exec(
                c,
                "UPDATE server_threads SET status = 'busy', updated_at = ?1, \
                 expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?1 + ttl_us END WHERE thread_id = ?2",
                params![now, thread_id],
            )?;
            Ok(Some(ClaimedRun { run: r, attempt }))
        })
        .await
    }

    async fn heartbeat(&self, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
        let (run_id, worker) = (run_id.to_owned(), worker.to_owned());
        let held = self
            .write(move |c| {
                query_one(
                    c,
                    "UPDATE server_runs SET lease_expires_at = ?1 WHERE run_id = ?2 AND worker = ?3 \
                     AND status = 'running' RETURNING cancel_action",
                    params![after(now_micros(), lease), run_id, worker],
                    |r| Ok(r.get::<_, Option<String>>(0)?),
                )
            })
            .await?;
        Ok(match held {
            None => Lease::Lost,
            Some(c) => cancel_action(c.as_deref())?.map_or(Lease::Held, Lease::Cancel),
        })
    }

    async fn finish_run(&self, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
        let (run_id, worker) = (run_id.to_owned(), worker.to_owned());
        self.write(move |c| Ok(finish(c, &run_id, &worker, status, now_micros())? > 0))
            .await
    }

    async fn cancel_run(
        &self,
        owner: &str,
        thread_id: Option<&str>,
        run_id: &str,
        action: CancelAction,
    ) -> DbResult<Option<Run>> {
        let now = now_micros();
        let (owner, thread_id, run_id) = (owner.to_owned(), thread_id.map(str::to_owned), run_id.to_owned());
        self.write(move |c| {
            let found = query_one(
                c,
                &format!(
                    "SELECT {RUN_COLS} FROM server_runs WHERE run_id = ?1 AND owner = ?2 \
                     AND (?3 IS NULL OR thread_id = ?3)"
                ),
                params![run_id, owner, thread_id],
                |r| run(r),
            )?;
            let Some((mut r, _, _)) = found else {
                return Ok(None);
            };
            match (r.status, action) {
                (RunStatus::Pending, CancelAction::Interrupt) => {
                    exec(
                        c,
                        "UPDATE server_runs SET status = 'interrupted', updated_at = ?1 WHERE run_id = ?2",
                        params![now, run_id],
                    )?;
                    r.status = RunStatus::Interrupted;
                    r.updated_at = rfc3339_from_micros(now);
                }
                (RunStatus::Pending, CancelAction::Rollback) => {
                    exec(c, "DELETE FROM server_runs WHERE run_id = ?1", params![run_id])?;
                    r.status = RunStatus::Interrupted;
                    r.updated_at = rfc3339_from_micros(now);
                }
                (RunStatus::Running, _) => {
                    exec(
                        c,
                        "UPDATE server_runs SET cancel_action = ?1, updated_at = ?2 WHERE run_id = ?3",
                        params![action.as_str(), now, run_id],
                    )?;
                    r.updated_at = rfc3339_from_micros(now);
                }
                _ => {}
            }
            Ok(Some(r))
        })
        .await
    }

    async fn queue_depth(&self) -> DbResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM server_runs WHERE status = 'pending'")
                .fetch_one(self.reader())
                .await?,
        )
    }

    async fn runs_by_status(&self) -> DbResult<Vec<(RunStatus, i64)>> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, COUNT(*) FROM server_runs GROUP BY status ORDER BY status")
                .fetch_all(self.reader())
                .await?;
        rows.into_iter().map(|(s, n)| Ok((run_status(&s)?, n))).collect()
    }

    async fn append_run_events(&self, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
        let rows = events
            .into_iter()
            .map(|e| Ok((i64::try_from(e.id).unwrap_or(i64::MAX), e.event, text(&e.data)?)))
            .collect::<DbResult<Vec<_>>>()?;
        let run_id = run_id.to_owned();
        self.write(move |c| {
            let mut st = c.prepare_cached(
                "INSERT INTO server_run_events (run_id, seq, event, data) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (run_id, seq) DO NOTHING",
            )?;
            for (seq, event, data) in rows {
                st.execute(params![run_id, seq, event, data])?;
            }
            Ok(())
        })
        .await
    }

    async fn run_events(&self, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, event, data FROM server_run_events WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
        )
        .bind(run_id)
        .bind(i64::try_from(from).unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter()
            .map(|(seq, event, data)| event_record(seq, event, &data))
            .collect()
    }

    async fn delete_run_events(&self, run_id: &str) -> DbResult<()> {
        let run_id = run_id.to_owned();
        self.write(move |c| {
            exec(
                c,
                "DELETE FROM server_run_events WHERE run_id = ?1",
                params![run_id],
            )?;
            Ok(())
        })
        .await
    }
}
