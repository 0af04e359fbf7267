//! [`SqliteDb`]: the server's tables in a SQLite file (usually the checkpointer's file).
//!
//! Writes go through a pool of one connection, each in a short `BEGIN IMMEDIATE`
//! transaction (or as one autocommitted statement), so queue claims are serialised within the
//! process and, through SQLite's write lock, with every other connection to the file (the
//! checkpointer's, other processes'). Reads use a separate pool. JSON is stored as TEXT;
//! metadata and values filters are evaluated in Rust with PostgreSQL's `@>` semantics.

use super::kit::{
    after, as_object, assistant_sort_column, cancel_action, json_contains, map_contains, merge, now_micros,
    order_keyword, page, run_status, slice_page, strategy, thread_sort_column, thread_status, ttl_micros,
    ttl_value,
};
use super::{
    AssistantPatch, AssistantQuery, Db, DbError, DbResult, Lease, NewRun, ThreadOutcome, ThreadQuery,
};
use crate::models::{
    rfc3339_from_micros, Assistant, CancelAction, ClaimedRun, Run, RunStatus, Thread, ThreadStatus,
};
use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a statement waits for SQLite's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Read connections of [`SqliteDb::open`].
const READ_CONNECTIONS: u32 = 4;

/// One schema version: its statements, run in one transaction.
struct Migration {
    version: i64,
    statements: &'static [&'static str],
}

/// Every schema version, oldest first. Applied versions are recorded in
/// `server_schema_version`.
const MIGRATIONS: &[Migration] = &[Migration {
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
}];

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
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteDb {
    /// Open (creating if needed) the database file, switch it to WAL, and migrate it.
    ///
    /// Uses its own connections: one for writes, a few for reads, each waiting up to
    /// 10 s for SQLite's write lock.
    ///
    /// # Errors
    /// When the file cannot be opened or migrated.
    pub async fn open(path: impl AsRef<Path>) -> DbResult<Self> {
        let base = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(false)
            .synchronous(SqliteSynchronous::Full);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(base.clone())
            .await?;
        enable_wal(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .min_connections(0)
            .connect_lazy_with(base.pragma("query_only", "ON"));
        let db = Self { writer, reader };
        db.migrate().await?;
        Ok(db)
    }

    /// Use an existing pool for reads and writes (writes take `BEGIN IMMEDIATE`
    /// transactions on it), migrating the database first. The pool's connections should
    /// have a busy timeout; the file should be in WAL mode.
    ///
    /// # Errors
    /// When the database cannot be migrated.
    pub async fn from_pool(pool: SqlitePool) -> DbResult<Self> {
        let db = Self {
            writer: pool.clone(),
            reader: pool,
        };
        db.migrate().await?;
        Ok(db)
    }

    async fn migrate(&self) -> DbResult<()> {
        let mut tx = self.write().await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS server_schema_version (
                version    INTEGER NOT NULL PRIMARY KEY,
                applied_at INTEGER NOT NULL
            )",
        )
        .execute(&mut *tx)
        .await?;
        let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM server_schema_version")
            .fetch_all(&mut *tx)
            .await?;
        for m in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
            tracing::info!(version = m.version, "migrating the server's SQLite tables");
            for statement in m.statements {
                sqlx::query(statement).execute(&mut *tx).await?;
            }
            sqlx::query("INSERT INTO server_schema_version (version, applied_at) VALUES (?, ?)")
                .bind(m.version)
                .bind(now_micros())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Delete a thread (of `owner`, or of anyone) and its runs.
    async fn delete_thread_of(&self, owner: Option<&str>, id: &str) -> DbResult<bool> {
        let mut tx = self.write().await?;
        let n = sqlx::query("DELETE FROM server_threads WHERE thread_id = ?1 AND (?2 IS NULL OR owner = ?2)")
            .bind(id)
            .bind(owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            sqlx::query("DELETE FROM server_runs WHERE thread_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    /// A write transaction holding SQLite's write lock from its start.
    async fn write(&self) -> DbResult<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }
}

/// Switch the file to WAL. Changing the journal mode takes a lock that the busy timeout
/// does not wait for, so retry while another connection holds it.
async fn enable_wal(pool: &SqlitePool) -> DbResult<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        let res: Result<String, sqlx::Error> = sqlx::query_scalar("PRAGMA journal_mode = WAL")
            .fetch_one(pool)
            .await;
        match res {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) if Instant::now() >= deadline => {
                return Err(DbError::Backend(format!(
                    "could not switch the database to WAL mode (journal mode is `{mode}`)"
                )))
            }
            Err(e) if Instant::now() >= deadline => return Err(e.into()),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn text<T: serde::Serialize + ?Sized>(v: &T) -> DbResult<String> {
    serde_json::to_string(v).map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))
}

fn json(row: &SqliteRow, col: &str) -> DbResult<Value> {
    let s: String = row.try_get(col)?;
    serde_json::from_str(&s).map_err(|e| DbError::Backend(format!("bad JSON in {col}: {e}")))
}

fn opt_json(row: &SqliteRow, col: &str) -> DbResult<Option<Value>> {
    let s: Option<String> = row.try_get(col)?;
    s.map(|s| serde_json::from_str(&s).map_err(|e| DbError::Backend(format!("bad JSON in {col}: {e}"))))
        .transpose()
}

fn assistant(row: &SqliteRow) -> DbResult<Assistant> {
    Ok(Assistant {
        assistant_id: row.try_get("assistant_id")?,
        graph_id: row.try_get("graph_id")?,
        config: json(row, "config")?,
        context: json(row, "context")?,
        created_at: rfc3339_from_micros(row.try_get("created_at")?),
        updated_at: rfc3339_from_micros(row.try_get("updated_at")?),
        metadata: as_object(json(row, "metadata")?, "metadata")?,
        version: row.try_get("version")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
    })
}

fn thread(row: &SqliteRow) -> DbResult<Thread> {
    let status: String = row.try_get("status")?;
    Ok(Thread {
        thread_id: row.try_get("thread_id")?,
        created_at: rfc3339_from_micros(row.try_get("created_at")?),
        updated_at: rfc3339_from_micros(row.try_get("updated_at")?),
        state_updated_at: rfc3339_from_micros(row.try_get("state_updated_at")?),
        metadata: as_object(json(row, "metadata")?, "metadata")?,
        config: json(row, "config")?,
        status: thread_status(&status)?,
        values: json(row, "state_values")?,
        interrupts: json(row, "interrupts")?,
        error: opt_json(row, "error")?,
        ttl: opt_json(row, "ttl")?,
    })
}

/// A run row with its attempt count and cancel request.
fn run(row: &SqliteRow) -> DbResult<(Run, i64, Option<CancelAction>)> {
    let status: String = row.try_get("status")?;
    let strat: String = row.try_get("multitask_strategy")?;
    let cancel: Option<String> = row.try_get("cancel_action")?;
    let r = Run {
        run_id: row.try_get("run_id")?,
        thread_id: row.try_get("thread_id")?,
        assistant_id: row.try_get("assistant_id")?,
        created_at: rfc3339_from_micros(row.try_get("created_at")?),
        updated_at: rfc3339_from_micros(row.try_get("updated_at")?),
        status: run_status(&status)?,
        metadata: as_object(json(row, "metadata")?, "metadata")?,
        kwargs: json(row, "kwargs")?,
        multitask_strategy: strategy(&strat)?,
    };
    Ok((r, row.try_get("attempt")?, cancel_action(cancel.as_deref())?))
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

type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

fn finish_query<'q>(run_id: &'q str, worker: &'q str, status: RunStatus, now: i64) -> SqliteQuery<'q> {
    sqlx::query(finish_sql(status))
        .bind(status.as_str())
        .bind(now)
        .bind(run_id)
        .bind(worker)
}

fn outcome_query<'q>(id: &'q str, outcome: &ThreadOutcome, now: i64) -> DbResult<SqliteQuery<'q>> {
    let error = outcome
        .error
        .as_ref()
        .filter(|e| !e.is_null())
        .map(text)
        .transpose()?;
    Ok(sqlx::query(OUTCOME_SQL)
        .bind(outcome.status.as_str())
        .bind(outcome.values.as_ref().map(text).transpose()?)
        .bind(text(&outcome.interrupts)?)
        .bind(error)
        .bind(now)
        .bind(id))
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
        let mut tx = self.write().await?;
        let inserted = sqlx::query(
            "INSERT INTO server_assistants (assistant_id, owner, graph_id, config, context, metadata, \
             version, name, description, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?) \
             ON CONFLICT (assistant_id) DO NOTHING",
        )
        .bind(&a.assistant_id)
        .bind(owner)
        .bind(&a.graph_id)
        .bind(text(&a.config)?)
        .bind(text(&a.context)?)
        .bind(text(&a.metadata)?)
        .bind(&a.name)
        .bind(&a.description)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            return Err(DbError::Conflict(format!("assistant {}", a.assistant_id)));
        }
        sqlx::query(
            "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
             context, metadata, name, description, created_at) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&a.assistant_id)
        .bind(owner)
        .bind(&a.graph_id)
        .bind(text(&a.config)?)
        .bind(text(&a.context)?)
        .bind(text(&a.metadata)?)
        .bind(&a.name)
        .bind(&a.description)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Assistant {
            version: 1,
            created_at: rfc3339_from_micros(now),
            updated_at: rfc3339_from_micros(now),
            ..a.clone()
        })
    }

    async fn get_assistant(&self, owner: &str, id: &str) -> DbResult<Option<Assistant>> {
        let row = sqlx::query(&format!(
            "SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = ? AND owner = ?"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(assistant).transpose()
    }

    async fn patch_assistant(
        &self,
        owner: &str,
        id: &str,
        patch: AssistantPatch,
    ) -> DbResult<Option<Assistant>> {
        let now = now_micros();
        let mut tx = self.write().await?;
        let row = sqlx::query(&format!(
            "SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = ? AND owner = ?"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut a = assistant(&row)?;
        let latest: Option<i64> =
            sqlx::query_scalar("SELECT MAX(version) FROM server_assistant_versions WHERE assistant_id = ?")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
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
        sqlx::query(
            "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
             context, metadata, name, description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(a.version)
        .bind(owner)
        .bind(&a.graph_id)
        .bind(text(&a.config)?)
        .bind(text(&a.context)?)
        .bind(text(&a.metadata)?)
        .bind(&a.name)
        .bind(&a.description)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE server_assistants SET graph_id = ?, config = ?, context = ?, metadata = ?, \
             version = ?, name = ?, description = ?, updated_at = ? WHERE assistant_id = ?",
        )
        .bind(&a.graph_id)
        .bind(text(&a.config)?)
        .bind(text(&a.context)?)
        .bind(text(&a.metadata)?)
        .bind(a.version)
        .bind(&a.name)
        .bind(&a.description)
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(a))
    }

    async fn delete_assistant(&self, owner: &str, id: &str) -> DbResult<bool> {
        let mut tx = self.write().await?;
        let n = sqlx::query("DELETE FROM server_assistants WHERE assistant_id = ? AND owner = ?")
            .bind(id)
            .bind(owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            sqlx::query("DELETE FROM server_assistant_versions WHERE assistant_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn search_assistants(&self, owner: &str, q: &AssistantQuery) -> DbResult<(Vec<Assistant>, i64)> {
        let col = assistant_sort_column(q.sort_by.as_deref());
        let ord = order_keyword(q.sort_order);
        let mut qb = QueryBuilder::new(format!("SELECT {ASSISTANT_COLS} FROM server_assistants"));
        push_assistant_filters(&mut qb, owner, q);
        qb.push(format!(" ORDER BY {col} {ord}, assistant_id {ord}"));
        if q.metadata.is_empty() {
            push_page(&mut qb, q.limit, q.offset);
            let rows = qb.build().fetch_all(&self.reader).await?;
            let page = rows.iter().map(assistant).collect::<DbResult<Vec<_>>>()?;
            let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_assistants");
            push_assistant_filters(&mut count, owner, q);
            let total: i64 = count.build_query_scalar().fetch_one(&self.reader).await?;
            return Ok((page, total));
        }
        let rows = qb.build().fetch_all(&self.reader).await?;
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
        .fetch_all(&self.reader)
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
        let mut tx = self.write().await?;
        let n = sqlx::query(
            "UPDATE server_assistants SET (graph_id, config, context, metadata, version, name, description) = \
             (SELECT graph_id, config, context, metadata, version, name, description \
              FROM server_assistant_versions v WHERE v.assistant_id = ?1 AND v.version = ?3), updated_at = ?4 \
             WHERE assistant_id = ?1 AND owner = ?2 AND EXISTS \
             (SELECT 1 FROM server_assistant_versions v WHERE v.assistant_id = ?1 AND v.version = ?3)",
        )
        .bind(id)
        .bind(owner)
        .bind(version)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n == 0 {
            return Ok(None);
        }
        let row = sqlx::query(&format!(
            "SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = ?"
        ))
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        let a = assistant(&row)?;
        tx.commit().await?;
        Ok(Some(a))
    }

    async fn create_thread(&self, owner: &str, t: &Thread) -> DbResult<Thread> {
        let now = now_micros();
        let ttl = ttl_value(t.ttl.as_ref());
        let ttl_us = ttl_micros(ttl);
        let inserted = sqlx::query(
            "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, \
             metadata, config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
             VALUES (?1, ?2, ?3, ?3, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT (thread_id) DO NOTHING",
        )
        .bind(&t.thread_id)
        .bind(owner)
        .bind(now)
        .bind(text(&t.metadata)?)
        .bind(text(&t.config)?)
        .bind(t.status.as_str())
        .bind(text(&t.values)?)
        .bind(text(&t.interrupts)?)
        .bind(t.error.as_ref().filter(|e| !e.is_null()).map(text).transpose()?)
        .bind(ttl.map(text).transpose()?)
        .bind(ttl_us)
        .bind(ttl_us.map(|us| now.saturating_add(us)))
        .execute(&self.writer)
        .await?
        .rows_affected();
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
        let row = sqlx::query(&format!(
            "SELECT {THREAD_COLS} FROM server_threads WHERE thread_id = ? AND owner = ?"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(thread).transpose()
    }

    async fn patch_thread(
        &self,
        owner: &str,
        id: &str,
        metadata: Option<&Map<String, Value>>,
        ttl: Option<Value>,
    ) -> DbResult<Option<Thread>> {
        let now = now_micros();
        let mut tx = self.write().await?;
        let row = sqlx::query(&format!(
            "SELECT {THREAD_COLS} FROM server_threads WHERE thread_id = ? AND owner = ?"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut t = thread(&row)?;
        if let Some(m) = metadata {
            merge(&mut t.metadata, m);
        }
        if let Some(ttl) = ttl {
            t.ttl = ttl_value(Some(&ttl)).cloned();
        }
        let ttl_us = ttl_micros(t.ttl.as_ref());
        sqlx::query(
            "UPDATE server_threads SET metadata = ?, ttl = ?, ttl_us = ?, expires_at = ?, updated_at = ? \
             WHERE thread_id = ?",
        )
        .bind(text(&t.metadata)?)
        .bind(t.ttl.as_ref().map(text).transpose()?)
        .bind(ttl_us)
        .bind(ttl_us.map(|us| now.saturating_add(us)))
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        t.updated_at = rfc3339_from_micros(now);
        Ok(Some(t))
    }

    async fn set_thread_outcome(&self, id: &str, outcome: &ThreadOutcome) -> DbResult<()> {
        outcome_query(id, outcome, now_micros())?
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn finish_run_with_outcome(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        thread_id: &str,
        outcome: &ThreadOutcome,
    ) -> DbResult<bool> {
        let now = now_micros();
        let mut tx = self.write().await?;
        let n = finish_query(run_id, worker, status, now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        outcome_query(thread_id, outcome, now)?.execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn set_thread_status(&self, id: &str, status: ThreadStatus) -> DbResult<()> {
        sqlx::query(
            "UPDATE server_threads SET status = ?1, updated_at = ?2, \
             expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?2 + ttl_us END WHERE thread_id = ?3",
        )
        .bind(status.as_str())
        .bind(now_micros())
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(())
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
            let rows = qb.build().fetch_all(&self.reader).await?;
            let page = rows.iter().map(thread).collect::<DbResult<Vec<_>>>()?;
            let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_threads");
            push_thread_filters(&mut count, owner, q);
            let total: i64 = count.build_query_scalar().fetch_one(&self.reader).await?;
            return Ok((page, total));
        }
        let rows = qb.build().fetch_all(&self.reader).await?;
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
        .fetch_all(&self.reader)
        .await?)
    }

    async fn create_run(&self, new: &NewRun) -> DbResult<Run> {
        let now = now_micros();
        let r = &new.run;
        let mut tx = self.write().await?;
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM server_threads WHERE thread_id = ?")
            .bind(&r.thread_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(DbError::Backend(format!("thread {} not found", r.thread_id)));
        }
        if new.reject_if_busy {
            let active: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM server_runs WHERE thread_id = ? AND status IN ('pending', 'running')",
            )
            .bind(&r.thread_id)
            .fetch_one(&mut *tx)
            .await?;
            if active > 0 {
                return Err(DbError::Busy(r.thread_id.clone()));
            }
        }
        if let Some(action) = new.cancel_active {
            let pending = match action {
                CancelAction::Interrupt => {
                    "UPDATE server_runs SET status = 'interrupted', updated_at = ?1 \
                     WHERE thread_id = ?2 AND status = 'pending'"
                }
                CancelAction::Rollback => {
                    "DELETE FROM server_runs WHERE thread_id = ?2 AND status = 'pending' AND ?1 IS NOT NULL"
                }
            };
            sqlx::query(pending)
                .bind(now)
                .bind(&r.thread_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "UPDATE server_runs SET cancel_action = ?, updated_at = ? WHERE thread_id = ? AND status = 'running'",
            )
            .bind(action.as_str())
            .bind(now)
            .bind(&r.thread_id)
            .execute(&mut *tx)
            .await?;
        }
        let due = new.delay.map_or(now, |d| after(now, d));
        let inserted = sqlx::query(
            "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
             metadata, kwargs, multitask_strategy, due_at, attempt) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, 'pending', ?6, ?7, ?8, ?9, 0) ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(&r.run_id)
        .bind(&r.thread_id)
        .bind(&new.owner)
        .bind(&r.assistant_id)
        .bind(now)
        .bind(text(&r.metadata)?)
        .bind(text(&r.kwargs)?)
        .bind(r.multitask_strategy.as_str())
        .bind(due)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            return Err(DbError::Conflict(format!("run {}", r.run_id)));
        }
        tx.commit().await?;
        let at = rfc3339_from_micros(now);
        Ok(Run {
            created_at: at.clone(),
            updated_at: at,
            status: RunStatus::Pending,
            ..r.clone()
        })
    }

    async fn get_run(&self, owner: &str, thread_id: Option<&str>, run_id: &str) -> DbResult<Option<Run>> {
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLS} FROM server_runs WHERE run_id = ?1 AND owner = ?2 \
             AND (?3 IS NULL OR thread_id = ?3)"
        ))
        .bind(run_id)
        .bind(owner)
        .bind(thread_id)
        .fetch_optional(&self.reader)
        .await?;
        Ok(row.as_ref().map(run).transpose()?.map(|(r, _, _)| r))
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
        let rows = qb.build().fetch_all(&self.reader).await?;
        rows.iter().map(|row| run(row).map(|(r, _, _)| r)).collect()
    }

    async fn delete_run(&self, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
        let n = sqlx::query("DELETE FROM server_runs WHERE run_id = ? AND thread_id = ? AND owner = ?")
            .bind(run_id)
            .bind(thread_id)
            .bind(owner)
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(n > 0)
    }

    async fn claim_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        // A look without the write lock first: idle workers polling an empty queue then
        // never take SQLite's write lock away from the checkpointer.
        let any: Option<(String, String)> = sqlx::query_as(CLAIMABLE)
            .bind(now_micros())
            .fetch_optional(&self.reader)
            .await?;
        if any.is_none() {
            return Ok(None);
        }
        let mut tx = self.write().await?;
        let now = now_micros();
        let picked: Option<(String, String)> = sqlx::query_as(CLAIMABLE)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((run_id, thread_id)) = picked else {
            tx.commit().await?;
            return Ok(None);
        };
        let row = sqlx::query(&format!(
            "UPDATE server_runs SET status = 'running', worker = ?1, lease_expires_at = ?2, \
             attempt = attempt + 1, updated_at = ?3 WHERE run_id = ?4 RETURNING {RUN_COLS}"
        ))
        .bind(worker)
        .bind(after(now, lease))
        .bind(now)
        .bind(&run_id)
        .fetch_one(&mut *tx)
        .await?;
        let (r, attempt, _) = run(&row)?;
        sqlx::query(
            "UPDATE server_threads SET status = 'busy', updated_at = ?1, \
             expires_at = CASE WHEN ttl_us IS NULL THEN NULL ELSE ?1 + ttl_us END WHERE thread_id = ?2",
        )
        .bind(now)
        .bind(&thread_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(ClaimedRun { run: r, attempt }))
    }

    async fn heartbeat(&self, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
        let now = now_micros();
        let held: Option<Option<String>> = sqlx::query_scalar(
            "UPDATE server_runs SET lease_expires_at = ? WHERE run_id = ? AND worker = ? \
             AND status = 'running' RETURNING cancel_action",
        )
        .bind(after(now, lease))
        .bind(run_id)
        .bind(worker)
        .fetch_optional(&self.writer)
        .await?;
        Ok(match held {
            None => Lease::Lost,
            Some(c) => cancel_action(c.as_deref())?.map_or(Lease::Held, Lease::Cancel),
        })
    }

    async fn finish_run(&self, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
        let n = finish_query(run_id, worker, status, now_micros())
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(n > 0)
    }

    async fn cancel_run(
        &self,
        owner: &str,
        thread_id: Option<&str>,
        run_id: &str,
        action: CancelAction,
    ) -> DbResult<Option<Run>> {
        let now = now_micros();
        let mut tx = self.write().await?;
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLS} FROM server_runs WHERE run_id = ?1 AND owner = ?2 \
             AND (?3 IS NULL OR thread_id = ?3)"
        ))
        .bind(run_id)
        .bind(owner)
        .bind(thread_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let (mut r, _, _) = run(&row)?;
        match (r.status, action) {
            (RunStatus::Pending, CancelAction::Interrupt) => {
                sqlx::query("UPDATE server_runs SET status = 'interrupted', updated_at = ? WHERE run_id = ?")
                    .bind(now)
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
                r.status = RunStatus::Interrupted;
                r.updated_at = rfc3339_from_micros(now);
            }
            (RunStatus::Pending, CancelAction::Rollback) => {
                sqlx::query("DELETE FROM server_runs WHERE run_id = ?")
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
                r.status = RunStatus::Interrupted;
                r.updated_at = rfc3339_from_micros(now);
            }
            (RunStatus::Running, _) => {
                sqlx::query("UPDATE server_runs SET cancel_action = ?, updated_at = ? WHERE run_id = ?")
                    .bind(action.as_str())
                    .bind(now)
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
                r.updated_at = rfc3339_from_micros(now);
            }
            _ => {}
        }
        tx.commit().await?;
        Ok(Some(r))
    }

    async fn queue_depth(&self) -> DbResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM server_runs WHERE status = 'pending'")
                .fetch_one(&self.reader)
                .await?,
        )
    }

    async fn runs_by_status(&self) -> DbResult<Vec<(RunStatus, i64)>> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, COUNT(*) FROM server_runs GROUP BY status ORDER BY status")
                .fetch_all(&self.reader)
                .await?;
        rows.into_iter().map(|(s, n)| Ok((run_status(&s)?, n))).collect()
    }
}
