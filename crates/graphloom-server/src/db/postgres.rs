//! [`PgDb`]: the server's tables in PostgreSQL (usually the checkpointer's database).
//!
//! Safe with several server processes on one database:
//! - migrations run in one transaction under `pg_advisory_xact_lock`, so replicas starting
//!   together on a fresh database all succeed;
//! - a claim picks a run with `FOR UPDATE SKIP LOCKED`, then locks its thread's row (also
//!   without waiting) and re-checks, with a fresh snapshot, that the thread has no other
//!   live running run and no older due pending one. Every claim and every `create_run` holds
//!   its thread's row lock until commit, so two replicas never run two runs of one thread.
//!   Claims never wait for a lock, so they cannot deadlock with anything.
//!
//! JSON columns are JSONB; metadata and values filters use `@>`.

use super::kit::{
    after, as_object, assistant_sort_column, cancel_action, event_record, merge, now_micros, order_keyword,
    page, patched, run_status, strategy, thread_sort_column, thread_status, ttl_micros, ttl_value,
};
use super::{
    AssistantPatch, AssistantQuery, Db, DbError, DbResult, Lease, NewRun, ThreadOutcome, ThreadQuery,
};
use crate::broker::RunEventRecord;
use crate::models::{
    rfc3339_from_micros, Assistant, CancelAction, ClaimedRun, Run, RunStatus, Thread, ThreadStatus,
};
use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};
use std::time::Duration;

/// Key of the advisory lock held while migrating (ASCII "glserver"; the checkpointer's
/// migrations use another key).
const MIGRATION_LOCK: i64 = 0x676c_7365_7276_6572;

/// Connections of [`PgDb::connect`].
const CONNECTIONS: u32 = 10;

/// How many candidates one `claim_run` tries before reporting an empty queue (a candidate
/// is passed over when another replica is claiming on its thread at the same moment).
const CLAIM_TRIES: usize = 8;

/// One schema version: its statements, run in one transaction.
struct Migration {
    version: i32,
    statements: &'static [&'static str],
}

/// Every schema version, oldest first. Applied versions are recorded in
/// `server_schema_version`.
const MIGRATIONS: &[Migration] = &[
    Migration {
    version: 1,
    statements: &[
        r#"CREATE TABLE server_assistants (
            assistant_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            owner        TEXT COLLATE "C" NOT NULL,
            graph_id     TEXT COLLATE "C" NOT NULL,
            config       JSONB NOT NULL,
            context      JSONB NOT NULL,
            metadata     JSONB NOT NULL,
            version      BIGINT NOT NULL,
            name         TEXT COLLATE "C" NOT NULL,
            description  TEXT,
            created_at   BIGINT NOT NULL,
            updated_at   BIGINT NOT NULL
        )"#,
        "CREATE INDEX server_assistants_owner_idx ON server_assistants (owner, created_at)",
        "CREATE INDEX server_assistants_metadata_idx ON server_assistants USING GIN (metadata jsonb_path_ops)",
        r#"CREATE TABLE server_assistant_versions (
            assistant_id TEXT COLLATE "C" NOT NULL,
            version      BIGINT NOT NULL,
            owner        TEXT COLLATE "C" NOT NULL,
            graph_id     TEXT COLLATE "C" NOT NULL,
            config       JSONB NOT NULL,
            context      JSONB NOT NULL,
            metadata     JSONB NOT NULL,
            name         TEXT COLLATE "C" NOT NULL,
            description  TEXT,
            created_at   BIGINT NOT NULL,
            PRIMARY KEY (assistant_id, version)
        )"#,
        r#"CREATE TABLE server_threads (
            thread_id        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            owner            TEXT COLLATE "C" NOT NULL,
            created_at       BIGINT NOT NULL,
            updated_at       BIGINT NOT NULL,
            state_updated_at BIGINT NOT NULL,
            metadata         JSONB NOT NULL,
            config           JSONB NOT NULL,
            status           TEXT COLLATE "C" NOT NULL,
            state_values     JSONB NOT NULL,
            interrupts       JSONB NOT NULL,
            error            JSONB,
            ttl              JSONB,
            ttl_us           BIGINT,
            expires_at       BIGINT
        )"#,
        "CREATE INDEX server_threads_owner_idx ON server_threads (owner, created_at)",
        "CREATE INDEX server_threads_metadata_idx ON server_threads USING GIN (metadata jsonb_path_ops)",
        "CREATE INDEX server_threads_expires_idx ON server_threads (expires_at) WHERE expires_at IS NOT NULL",
        r#"CREATE TABLE server_runs (
            run_id             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            thread_id          TEXT COLLATE "C" NOT NULL,
            owner              TEXT COLLATE "C" NOT NULL,
            assistant_id       TEXT COLLATE "C" NOT NULL,
            created_at         BIGINT NOT NULL,
            updated_at         BIGINT NOT NULL,
            status             TEXT COLLATE "C" NOT NULL,
            metadata           JSONB NOT NULL,
            kwargs             JSONB NOT NULL,
            multitask_strategy TEXT NOT NULL,
            due_at             BIGINT NOT NULL,
            worker             TEXT COLLATE "C",
            lease_expires_at   BIGINT,
            attempt            BIGINT NOT NULL DEFAULT 0,
            cancel_action      TEXT
        )"#,
        "CREATE INDEX server_runs_queue_idx ON server_runs (status, created_at, run_id)",
        "CREATE INDEX server_runs_thread_idx ON server_runs (thread_id, status)",
    ],
},
    Migration {
        version: 2,
        statements: &["CREATE TABLE server_run_events (
            run_id TEXT NOT NULL,
            seq    BIGINT NOT NULL,
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

/// Claimable runs (`$1` = now): pending and due, or running with an expired lease; a
/// pending run waits for every running run of its thread (a dead worker's expired one is
/// taken over first), an expired running run only for live ones. Of a thread's due pending
/// runs only the oldest is claimable, so concurrent claimers spread over threads instead of
/// queueing up on the runs of one.
const CLAIMABLE: &str = "((r.status = 'pending' AND r.due_at <= $1) \
        OR (r.status = 'running' AND r.lease_expires_at < $1)) \
    AND NOT EXISTS (SELECT 1 FROM server_runs o WHERE o.thread_id = r.thread_id \
        AND o.run_id <> r.run_id AND o.status = 'running' \
        AND (r.status = 'pending' OR o.lease_expires_at >= $1)) \
    AND NOT (r.status = 'pending' AND EXISTS (SELECT 1 FROM server_runs p \
        WHERE p.thread_id = r.thread_id AND p.status = 'pending' AND p.due_at <= $1 \
        AND (p.created_at, p.run_id) < (r.created_at, r.run_id)))";

/// The server's storage in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgDb {
    pool: PgPool,
}

impl PgDb {
    /// Connect (a pool of 10 connections) and migrate.
    ///
    /// # Errors
    /// When the database cannot be reached or migrated.
    pub async fn connect(url: &str) -> DbResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(Duration::from_secs(30))
            .connect(url)
            .await?;
        Self::from_pool(pool).await
    }

    /// Use an existing pool, migrating the database first.
    ///
    /// # Errors
    /// When the database cannot be migrated.
    pub async fn from_pool(pool: PgPool) -> DbResult<Self> {
        migrate(&pool).await?;
        Ok(Self { pool })
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Delete a thread (of `owner`, or of anyone) and its runs.
    async fn delete_thread_of(&self, owner: Option<&str>, id: &str) -> DbResult<bool> {
        let mut tx = self.pool.begin().await?;
        // The thread's row lock first, as claims and `create_run` take it.
        let found: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM server_threads WHERE thread_id = $1 AND ($2::text IS NULL OR owner = $2) FOR UPDATE",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        if found.is_none() {
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM server_run_events WHERE run_id IN (SELECT run_id FROM server_runs WHERE thread_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM server_runs WHERE thread_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM server_threads WHERE thread_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Apply the pending migrations in one transaction under an advisory lock.
async fn migrate(pool: &PgPool) -> DbResult<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS server_schema_version (
            version    INTEGER PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .execute(&mut *tx)
    .await?;
    let applied: Vec<i32> = sqlx::query_scalar("SELECT version FROM server_schema_version")
        .fetch_all(&mut *tx)
        .await?;
    for m in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
        tracing::info!(version = m.version, "migrating the server's PostgreSQL tables");
        for statement in m.statements {
            sqlx::query(statement).execute(&mut *tx).await?;
        }
        sqlx::query("INSERT INTO server_schema_version (version) VALUES ($1)")
            .bind(m.version)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

fn json(row: &PgRow, col: &str) -> DbResult<Value> {
    Ok(row.try_get::<Json<Value>, _>(col)?.0)
}

fn opt_json(row: &PgRow, col: &str) -> DbResult<Option<Value>> {
    Ok(row.try_get::<Option<Json<Value>>, _>(col)?.map(|j| j.0))
}

/// An optional JSON value as bound: SQL NULL for None and for JSON `null`.
fn opt_bind(v: Option<&Value>) -> Option<Json<&Value>> {
    v.filter(|v| !v.is_null()).map(Json)
}

fn assistant(row: &PgRow) -> DbResult<Assistant> {
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

fn thread(row: &PgRow) -> DbResult<Thread> {
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

/// A run row with its attempt count.
fn run(row: &PgRow) -> DbResult<(Run, i64)> {
    let status: String = row.try_get("status")?;
    let strat: String = row.try_get("multitask_strategy")?;
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
    Ok((r, row.try_get("attempt")?))
}

fn push_assistant_filters(qb: &mut QueryBuilder<'_, Postgres>, owner: &str, q: &AssistantQuery) {
    qb.push(" WHERE owner = ").push_bind(owner.to_owned());
    if let Some(g) = &q.graph_id {
        qb.push(" AND graph_id = ").push_bind(g.clone());
    }
    if let Some(n) = &q.name {
        qb.push(" AND strpos(lower(name), lower(")
            .push_bind(n.clone())
            .push(")) > 0");
    }
    if !q.metadata.is_empty() {
        qb.push(" AND metadata @> ")
            .push_bind(Json(Value::Object(q.metadata.clone())));
    }
}

fn push_thread_filters(qb: &mut QueryBuilder<'_, Postgres>, owner: &str, q: &ThreadQuery) {
    qb.push(" WHERE owner = ").push_bind(owner.to_owned());
    if let Some(ids) = &q.ids {
        qb.push(" AND thread_id = ANY(").push_bind(ids.clone()).push(")");
    }
    if let Some(s) = q.status {
        qb.push(" AND status = ").push_bind(s.as_str());
    }
    if !q.metadata.is_empty() {
        qb.push(" AND metadata @> ")
            .push_bind(Json(Value::Object(q.metadata.clone())));
    }
    if !q.values.is_empty() {
        qb.push(" AND state_values @> ")
            .push_bind(Json(Value::Object(q.values.clone())));
    }
}

fn push_page(qb: &mut QueryBuilder<'_, Postgres>, limit: i64, offset: i64) {
    let (limit, offset) = page(limit, offset);
    if let Some(l) = limit {
        qb.push(" LIMIT ").push_bind(l);
    }
    qb.push(" OFFSET ").push_bind(offset);
}

/// The UPDATE that ends (or requeues) a run held by a worker.
fn finish_sql(status: RunStatus) -> &'static str {
    match status {
        // Back to the queue (e.g. a worker shutting down): claimable again at once.
        RunStatus::Pending => {
            "UPDATE server_runs SET status = $1, worker = NULL, lease_expires_at = NULL, due_at = $2, \
             updated_at = $2 WHERE run_id = $3 AND worker = $4 AND status = 'running'"
        }
        RunStatus::Running => {
            "UPDATE server_runs SET status = $1, updated_at = $2 \
             WHERE run_id = $3 AND worker = $4 AND status = 'running'"
        }
        _ => {
            "UPDATE server_runs SET status = $1, lease_expires_at = NULL, updated_at = $2 \
             WHERE run_id = $3 AND worker = $4 AND status = 'running'"
        }
    }
}

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

fn finish_query<'q>(run_id: &'q str, worker: &'q str, status: RunStatus, now: i64) -> PgQuery<'q> {
    sqlx::query(finish_sql(status))
        .bind(status.as_str())
        .bind(now)
        .bind(run_id)
        .bind(worker)
}

fn outcome_query<'q>(id: &'q str, outcome: &'q ThreadOutcome, now: i64) -> PgQuery<'q> {
    sqlx::query(OUTCOME_SQL)
        .bind(outcome.status.as_str())
        .bind(outcome.values.as_ref().map(Json))
        .bind(Json(&outcome.interrupts))
        .bind(opt_bind(outcome.error.as_ref()))
        .bind(now)
        .bind(id)
}

/// The UPDATE that records a run's outcome on its thread.
const OUTCOME_SQL: &str =
    "UPDATE server_threads SET status = $1, state_values = COALESCE($2, state_values), \
    interrupts = $3, error = $4, state_updated_at = $5, updated_at = $5, \
    expires_at = $5 + ttl_us WHERE thread_id = $6";

#[async_trait]
impl Db for PgDb {
    async fn create_assistant(&self, owner: &str, a: &Assistant) -> DbResult<Assistant> {
        let now = now_micros();
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO server_assistants (assistant_id, owner, graph_id, config, context, metadata, \
             version, name, description, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $9) ON CONFLICT (assistant_id) DO NOTHING",
        )
        .bind(&a.assistant_id)
        .bind(owner)
        .bind(&a.graph_id)
        .bind(Json(&a.config))
        .bind(Json(&a.context))
        .bind(Json(&a.metadata))
        .bind(&a.name)
        .bind(&a.description)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            return Err(DbError::Conflict(format!("assistant {}", a.assistant_id)));
        }
        sqlx::query(
            "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
             context, metadata, name, description, created_at) \
             SELECT assistant_id, version, owner, graph_id, config, context, metadata, name, description, \
             created_at FROM server_assistants WHERE assistant_id = $1",
        )
        .bind(&a.assistant_id)
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
            "SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = $1 AND owner = $2"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT {ASSISTANT_COLS} FROM server_assistants WHERE assistant_id = $1 AND owner = $2 FOR UPDATE"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut a = assistant(&row)?;
        let latest: Option<i64> =
            sqlx::query_scalar("SELECT MAX(version) FROM server_assistant_versions WHERE assistant_id = $1")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        patched(&mut a, patch, latest, now);
        sqlx::query(
            "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
             context, metadata, name, description, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(id)
        .bind(a.version)
        .bind(owner)
        .bind(&a.graph_id)
        .bind(Json(&a.config))
        .bind(Json(&a.context))
        .bind(Json(&a.metadata))
        .bind(&a.name)
        .bind(&a.description)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE server_assistants SET graph_id = $1, config = $2, context = $3, metadata = $4, \
             version = $5, name = $6, description = $7, updated_at = $8 WHERE assistant_id = $9",
        )
        .bind(&a.graph_id)
        .bind(Json(&a.config))
        .bind(Json(&a.context))
        .bind(Json(&a.metadata))
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
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("DELETE FROM server_assistants WHERE assistant_id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            sqlx::query("DELETE FROM server_assistant_versions WHERE assistant_id = $1")
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
        push_page(&mut qb, q.limit, q.offset);
        let rows = qb.build().fetch_all(&self.pool).await?;
        let found = rows.iter().map(assistant).collect::<DbResult<Vec<_>>>()?;
        let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_assistants");
        push_assistant_filters(&mut count, owner, q);
        let total: i64 = count.build_query_scalar().fetch_one(&self.pool).await?;
        Ok((found, total))
    }

    async fn assistant_versions(
        &self,
        owner: &str,
        id: &str,
        metadata: &Map<String, Value>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Assistant>> {
        let mut qb = QueryBuilder::new(format!(
            "SELECT {VERSION_COLS} FROM server_assistant_versions WHERE assistant_id = "
        ));
        qb.push_bind(id.to_owned())
            .push(" AND owner = ")
            .push_bind(owner.to_owned())
            .push(" AND metadata @> ")
            .push_bind(Json(Value::Object(metadata.clone())))
            .push(" ORDER BY version DESC");
        push_page(&mut qb, limit, offset);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(assistant).collect()
    }

    async fn set_assistant_version(
        &self,
        owner: &str,
        id: &str,
        version: i64,
    ) -> DbResult<Option<Assistant>> {
        let row = sqlx::query(&format!(
            "UPDATE server_assistants a SET graph_id = v.graph_id, config = v.config, context = v.context, \
             metadata = v.metadata, version = v.version, name = v.name, description = v.description, \
             updated_at = $4 FROM server_assistant_versions v \
             WHERE a.assistant_id = $1 AND a.owner = $2 AND v.assistant_id = a.assistant_id AND v.version = $3 \
             RETURNING {}",
            ASSISTANT_COLS
                .split(", ")
                .map(|c| format!("a.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(id)
        .bind(owner)
        .bind(version)
        .bind(now_micros())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(assistant).transpose()
    }

    async fn create_thread(&self, owner: &str, t: &Thread) -> DbResult<Thread> {
        let now = now_micros();
        let ttl = ttl_value(t.ttl.as_ref());
        let ttl_us = ttl_micros(ttl);
        let inserted = sqlx::query(
            "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, \
             metadata, config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
             VALUES ($1, $2, $3, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (thread_id) DO NOTHING",
        )
        .bind(&t.thread_id)
        .bind(owner)
        .bind(now)
        .bind(Json(&t.metadata))
        .bind(Json(&t.config))
        .bind(t.status.as_str())
        .bind(Json(&t.values))
        .bind(Json(&t.interrupts))
        .bind(opt_bind(t.error.as_ref()))
        .bind(ttl.map(Json))
        .bind(ttl_us)
        .bind(ttl_us.map(|us| now.saturating_add(us)))
        .execute(&self.pool)
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
            "SELECT {THREAD_COLS} FROM server_threads WHERE thread_id = $1 AND owner = $2"
        ))
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT {THREAD_COLS} FROM server_threads WHERE thread_id = $1 AND owner = $2 FOR UPDATE"
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
            "UPDATE server_threads SET metadata = $1, ttl = $2, ttl_us = $3, expires_at = $4, updated_at = $5 \
             WHERE thread_id = $6",
        )
        .bind(Json(&t.metadata))
        .bind(t.ttl.as_ref().map(Json))
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
        outcome_query(id, outcome, now_micros())
            .execute(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let n = finish_query(run_id, worker, status, now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        outcome_query(thread_id, outcome, now).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn set_thread_status(&self, id: &str, status: ThreadStatus) -> DbResult<()> {
        sqlx::query(
            "UPDATE server_threads SET status = $1, updated_at = $2, expires_at = $2 + ttl_us WHERE thread_id = $3",
        )
        .bind(status.as_str())
        .bind(now_micros())
        .bind(id)
        .execute(&self.pool)
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
        let col = thread_sort_column(q.sort_by.as_deref());
        let ord = order_keyword(q.sort_order);
        let mut qb = QueryBuilder::new(format!("SELECT {THREAD_COLS} FROM server_threads"));
        push_thread_filters(&mut qb, owner, q);
        qb.push(format!(" ORDER BY {col} {ord}, thread_id {ord}"));
        push_page(&mut qb, q.limit, q.offset);
        let rows = qb.build().fetch_all(&self.pool).await?;
        let found = rows.iter().map(thread).collect::<DbResult<Vec<_>>>()?;
        let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_threads");
        push_thread_filters(&mut count, owner, q);
        let total: i64 = count.build_query_scalar().fetch_one(&self.pool).await?;
        Ok((found, total))
    }

    async fn expired_threads(&self, limit: i64) -> DbResult<Vec<String>> {
        let (limit, _) = page(limit, 0);
        Ok(sqlx::query_scalar(
            "SELECT thread_id FROM server_threads WHERE expires_at IS NOT NULL AND expires_at <= $1 \
             AND status <> 'busy' ORDER BY expires_at, thread_id LIMIT $2",
        )
        .bind(now_micros())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn create_run(&self, new: &NewRun) -> DbResult<Run> {
        let r = &new.run;
        let mut tx = self.pool.begin().await?;
        // Serialise with claims and other creations on this thread.
        let stored: Option<Json<Value>> =
            sqlx::query_scalar("SELECT metadata FROM server_threads WHERE thread_id = $1 FOR UPDATE")
                .bind(&r.thread_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(Json(stored)) = stored else {
            return Err(DbError::Backend(format!("thread {} not found", r.thread_id)));
        };
        let now = now_micros();
        if let Some(m) = &new.thread_metadata {
            let mut merged = match stored {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            merge(&mut merged, m);
            sqlx::query("UPDATE server_threads SET metadata = $1, updated_at = $2 WHERE thread_id = $3")
                .bind(Json(&merged))
                .bind(now)
                .bind(&r.thread_id)
                .execute(&mut *tx)
                .await?;
        }
        if new.reject_if_busy && thread_active(&mut tx, &r.thread_id).await? {
            return Err(DbError::Busy(r.thread_id.clone()));
        }
        if let Some(action) = new.cancel_active {
            match action {
                CancelAction::Interrupt => {
                    sqlx::query(
                        "UPDATE server_runs SET status = 'interrupted', updated_at = $1 \
                         WHERE thread_id = $2 AND status = 'pending'",
                    )
                    .bind(now)
                    .bind(&r.thread_id)
                    .execute(&mut *tx)
                    .await?;
                }
                CancelAction::Rollback => {
                    sqlx::query("DELETE FROM server_runs WHERE thread_id = $1 AND status = 'pending'")
                        .bind(&r.thread_id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            sqlx::query(
                "UPDATE server_runs SET cancel_action = $1, updated_at = $2 WHERE thread_id = $3 AND status = 'running'",
            )
            .bind(action.as_str())
            .bind(now)
            .bind(&r.thread_id)
            .execute(&mut *tx)
            .await?;
        }
        let due = new.delay.map_or(now, |d| after(now, d));
        // Claimed at once when due and nothing else is queued or running on the thread
        // (whose row is locked: no claim or creation on it runs meanwhile): inserted
        // running, so no pending row is updated and no index entry written twice.
        let mut claim = None;
        if let Some((worker, lease)) = new.claim.as_ref().filter(|_| due <= now) {
            if !thread_active(&mut tx, &r.thread_id).await? {
                claim = Some((worker.as_str(), after(now, *lease)));
            }
        }
        let inserted = sqlx::query(
            "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
             metadata, kwargs, multitask_strategy, due_at, worker, lease_expires_at, attempt) \
             VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(&r.run_id)
        .bind(&r.thread_id)
        .bind(&new.owner)
        .bind(&r.assistant_id)
        .bind(now)
        .bind(if claim.is_some() { "running" } else { "pending" })
        .bind(Json(&r.metadata))
        .bind(Json(&r.kwargs))
        .bind(r.multitask_strategy.as_str())
        .bind(due)
        .bind(claim.map(|(w, _)| w))
        .bind(claim.map(|(_, until)| until))
        .bind(i64::from(claim.is_some()))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            return Err(DbError::Conflict(format!("run {}", r.run_id)));
        }
        let claimed = claim.is_some();
        if claimed {
            sqlx::query(
                "UPDATE server_threads SET status = 'busy', updated_at = $1, expires_at = $1 + ttl_us \
                 WHERE thread_id = $2",
            )
            .bind(now)
            .bind(&r.thread_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
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
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLS} FROM server_runs WHERE run_id = $1 AND owner = $2 \
             AND ($3::text IS NULL OR thread_id = $3)"
        ))
        .bind(run_id)
        .bind(owner)
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(run).transpose()?.map(|(r, _)| r))
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
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(|row| run(row).map(|(r, _)| r)).collect()
    }

    async fn delete_run(&self, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
        let n = sqlx::query(
            "WITH gone AS (DELETE FROM server_runs WHERE run_id = $1 AND thread_id = $2 AND owner = $3 \
             RETURNING run_id), ev AS (DELETE FROM server_run_events WHERE run_id IN (SELECT run_id FROM gone)) \
             SELECT COUNT(*) FROM gone",
        )
        .bind(run_id)
        .bind(thread_id)
        .bind(owner)
        .fetch_one(&self.pool)
        .await
        .and_then(|row: PgRow| row.try_get::<i64, _>(0))?;
        Ok(n > 0)
    }

    async fn claim_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        // Threads passed over in this call (another claimer holds them).
        let mut passed: Vec<String> = Vec::new();
        for _ in 0..CLAIM_TRIES {
            let mut tx = self.pool.begin().await?;
            let now = now_micros();
            let picked: Option<(String, String)> = sqlx::query_as(&format!(
                "SELECT r.run_id, r.thread_id FROM server_runs r WHERE {CLAIMABLE} \
                 AND r.thread_id <> ALL($2::text[]) \
                 ORDER BY r.created_at, r.run_id LIMIT 1 FOR UPDATE OF r SKIP LOCKED"
            ))
            .bind(now)
            .bind(&passed)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((run_id, thread_id)) = picked else {
                tx.commit().await?;
                return Ok(None);
            };
            // Another replica claiming on this thread, or a run being created on it: pass.
            let locked: Option<i32> = sqlx::query_scalar(
                "SELECT 1 FROM server_threads WHERE thread_id = $1 FOR UPDATE SKIP LOCKED",
            )
            .bind(&thread_id)
            .fetch_optional(&mut *tx)
            .await?;
            if locked.is_none() {
                let exists: bool =
                    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM server_threads WHERE thread_id = $1)")
                        .bind(&thread_id)
                        .fetch_one(&mut *tx)
                        .await?;
                // A run whose thread is gone has nothing to serialise with (as on SQLite).
                if exists {
                    tx.rollback().await?;
                    passed.push(thread_id);
                    continue;
                }
            }
            // With the thread locked, a fresh snapshot sees every committed claim on it.
            let still: bool = sqlx::query_scalar(&format!(
                "SELECT EXISTS (SELECT 1 FROM server_runs r WHERE r.run_id = $2 AND {CLAIMABLE})"
            ))
            .bind(now)
            .bind(&run_id)
            .fetch_one(&mut *tx)
            .await?;
            if !still {
                tx.rollback().await?;
                passed.push(thread_id);
                continue;
            }
            let row = sqlx::query(&format!(
                "UPDATE server_runs SET status = 'running', worker = $1, lease_expires_at = $2, \
                 attempt = attempt + 1, updated_at = $3 WHERE run_id = $4 RETURNING {RUN_COLS}"
            ))
            .bind(worker)
            .bind(after(now, lease))
            .bind(now)
            .bind(&run_id)
            .fetch_one(&mut *tx)
            .await?;
            let (r, attempt) = run(&row)?;
            sqlx::query(
                "UPDATE server_threads SET status = 'busy', updated_at = $1, expires_at = $1 + ttl_us \
                 WHERE thread_id = $2",
            )
            .bind(now)
            .bind(&thread_id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(Some(ClaimedRun { run: r, attempt }));
        }
        Ok(None)
    }

    async fn heartbeat(&self, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
        let held: Option<Option<String>> = sqlx::query_scalar(
            "UPDATE server_runs SET lease_expires_at = $1 WHERE run_id = $2 AND worker = $3 \
             AND status = 'running' RETURNING cancel_action",
        )
        .bind(after(now_micros(), lease))
        .bind(run_id)
        .bind(worker)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match held {
            None => Lease::Lost,
            Some(c) => cancel_action(c.as_deref())?.map_or(Lease::Held, Lease::Cancel),
        })
    }

    async fn finish_run(&self, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
        let n = finish_query(run_id, worker, status, now_micros())
            .execute(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLS} FROM server_runs WHERE run_id = $1 AND owner = $2 \
             AND ($3::text IS NULL OR thread_id = $3) FOR UPDATE"
        ))
        .bind(run_id)
        .bind(owner)
        .bind(thread_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let (mut r, _) = run(&row)?;
        match (r.status, action) {
            (RunStatus::Pending, CancelAction::Interrupt) => {
                sqlx::query(
                    "UPDATE server_runs SET status = 'interrupted', updated_at = $1 WHERE run_id = $2",
                )
                .bind(now)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                r.status = RunStatus::Interrupted;
                r.updated_at = rfc3339_from_micros(now);
            }
            (RunStatus::Pending, CancelAction::Rollback) => {
                sqlx::query("DELETE FROM server_runs WHERE run_id = $1")
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
                r.status = RunStatus::Interrupted;
                r.updated_at = rfc3339_from_micros(now);
            }
            (RunStatus::Running, _) => {
                sqlx::query("UPDATE server_runs SET cancel_action = $1, updated_at = $2 WHERE run_id = $3")
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
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn runs_by_status(&self) -> DbResult<Vec<(RunStatus, i64)>> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, COUNT(*) FROM server_runs GROUP BY status ORDER BY status")
                .fetch_all(&self.pool)
                .await?;
        rows.into_iter().map(|(s, n)| Ok((run_status(&s)?, n))).collect()
    }

    async fn append_run_events(&self, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
        let mut seqs = Vec::with_capacity(events.len());
        let mut names = Vec::with_capacity(events.len());
        let mut datas = Vec::with_capacity(events.len());
        for e in events {
            seqs.push(i64::try_from(e.id).unwrap_or(i64::MAX));
            names.push(e.event);
            datas.push(
                serde_json::to_string(&e.data)
                    .map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))?,
            );
        }
        sqlx::query(
            "INSERT INTO server_run_events (run_id, seq, event, data) \
             SELECT $1, s, e, d FROM unnest($2::bigint[], $3::text[], $4::text[]) AS t(s, e, d) \
             ON CONFLICT (run_id, seq) DO NOTHING",
        )
        .bind(run_id)
        .bind(seqs)
        .bind(names)
        .bind(datas)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn run_events(&self, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, event, data FROM server_run_events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
        )
        .bind(run_id)
        .bind(i64::try_from(from).unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(seq, event, data)| event_record(seq, event, &data))
            .collect()
    }

    async fn delete_run_events(&self, run_id: &str) -> DbResult<()> {
        sqlx::query("DELETE FROM server_run_events WHERE run_id = $1")
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Whether the thread has a run queued or running (inside the caller's transaction).
async fn thread_active(tx: &mut sqlx::Transaction<'_, Postgres>, thread_id: &str) -> DbResult<bool> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM server_runs WHERE thread_id = $1 \
         AND status IN ('pending', 'running'))",
    )
    .bind(thread_id)
    .fetch_one(&mut **tx)
    .await?)
}
