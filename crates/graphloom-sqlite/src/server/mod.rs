//! [`SqliteDb`]: the tables of graphloom's server (assistants, threads, the run queue,
//! stored run events) in a SQLite file, usually the checkpointer's; the server's storage
//! trait [`Db`] implemented on them (feature `server`).
//!
//! Writes go through the [`SqliteDatabase`] writer thread that the checkpointer and the store
//! of the same file use: every write is one operation in that thread's next transaction, so
//! a run's queue rows, checkpoints and store items queued together share one commit (one
//! fsync), and queue claims are serialised within the process and, through SQLite's write
//! lock, with other processes. Point reads by key run on the caller's thread on a read
//! connection; scans (searches, listings) on tokio's blocking pool. JSON is stored as TEXT;
//! metadata and values filters are evaluated in Rust with PostgreSQL's `@>` semantics.
//!
//! | file | calls |
//! |---|---|
//! | `assistants.rs` | assistants and their versions |
//! | `threads.rs` | threads, their outcomes and expiry |
//! | `runs.rs` | the run queue: create, claim, lease, finish, cancel |
//! | `events.rs` | stored events of resumable runs |
//! | `rows.rs` | the row types and typed columns |
//! | `crons.rs` | crons, and firing a tick with its run in one transaction |
//! | `webhooks.rs` | the webhook delivery queue |
//! | `retention.rs` | threads whose time to live has passed |

mod assistants;
mod crons;
mod events;
mod retention;
mod rows;
mod runs;
mod threads;
mod webhooks;

use crate::error::ServerResultExt;
use crate::{SqliteDatabase, SqliteOptions};
use async_trait::async_trait;
use graphloom_server_db::kit::page;
use graphloom_server_db::models::{
    Assistant, CancelAction, ClaimedRun, Run, RunStatus, Thread, ThreadStatus,
};
use graphloom_server_db::{
    AssistantPatch, AssistantQuery, Db, DbError, DbResult, Lease, NewRun, RunEventRecord, ThreadOutcome,
    ThreadQuery,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

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
        db.db().migrate(crate::migrate::SERVER_MIGRATIONS).await?;
        Ok(Self { db })
    }

    /// Expire the lease of every running run, so the workers claim them at once (each
    /// attempt counted) instead of waiting for the lease to run out; the number of runs.
    ///
    /// Only for a server that holds the file for itself (graphloom-server takes an
    /// advisory lock on it) before its workers start: no other process can then be
    /// executing those runs, they were left by one that died.
    ///
    /// # Errors
    /// When the update fails.
    pub async fn expire_leases(&self) -> DbResult<usize> {
        self.write(|c| {
            exec(
                c,
                "UPDATE server_runs SET lease_expires_at = 0 WHERE status = 'running'",
                [],
            )
        })
        .await
    }

    /// Run `op` in one read transaction on a read connection, on this thread: for the
    /// point reads by key of a request's path (a hand-off to another thread would cost
    /// more than the read).
    fn read<T>(&self, op: impl FnOnce(&Connection) -> DbResult<T>) -> DbResult<T> {
        self.db.read(op)
    }

    /// Run `op` in one read transaction on tokio's blocking pool: for scans (searches,
    /// listings) that must not hold a runtime thread.
    async fn scan<T, F>(&self, op: F) -> DbResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<T> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.read(op))
            .await
            .map_err(|e| DbError::Backend(format!("a read stopped: {e}")))?
    }

    /// Run `op` in the writer's next transaction; an error rolls back `op`'s changes. `op`
    /// is re-runnable, so its batch runs without savepoints unless an operation of it fails
    /// (the public [`SqliteDatabase::write`] takes a run-once operation, whose batch runs
    /// on savepoints from the start).
    async fn write<T, F>(&self, op: F) -> DbResult<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> DbResult<T> + Send + 'static,
    {
        self.db.db().write_as(op).await
    }
}

/// Run one statement with a cached prepared statement; the rows it changed.
fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> DbResult<usize> {
    c.prepare_cached(sql).db()?.execute(p).db()
}

/// One value of a query's first row (cached statement).
fn scalar<T: rusqlite::types::FromSql>(c: &Connection, sql: &str, p: impl rusqlite::Params) -> DbResult<T> {
    c.prepare_cached(sql).db()?.query_row(p, |r| r.get(0)).db()
}

/// A value as stored in a JSON (TEXT) column.
fn text<T: serde::Serialize + ?Sized>(v: &T) -> DbResult<String> {
    serde_json::to_string(v).map_err(|e| DbError::Backend(format!("cannot encode JSON: {e}")))
}

/// `LIMIT` (none for 0 or less) and `OFFSET` of a page.
fn push_page(sql: &mut String, params: &mut Vec<SqlValue>, limit: i64, offset: i64) {
    let (limit, offset) = page(limit, offset);
    sql.push_str(" LIMIT ? OFFSET ?");
    params.push(SqlValue::Integer(limit.unwrap_or(-1)));
    params.push(SqlValue::Integer(offset));
}

#[async_trait]
impl Db for SqliteDb {
    async fn create_assistant(&self, owner: &str, a: &Assistant) -> DbResult<Assistant> {
        assistants::create(self, owner, a).await
    }

    async fn get_assistant(&self, owner: &str, id: &str) -> DbResult<Option<Assistant>> {
        assistants::get(self, owner, id)
    }

    async fn patch_assistant(
        &self,
        owner: &str,
        id: &str,
        patch: AssistantPatch,
    ) -> DbResult<Option<Assistant>> {
        assistants::patch(self, owner, id, patch).await
    }

    async fn delete_assistant(&self, owner: &str, id: &str) -> DbResult<bool> {
        assistants::delete(self, owner, id).await
    }

    async fn search_assistants(&self, owner: &str, q: &AssistantQuery) -> DbResult<(Vec<Assistant>, i64)> {
        assistants::search(self, owner, q).await
    }

    async fn assistant_versions(
        &self,
        owner: &str,
        id: &str,
        metadata: &Map<String, Value>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Assistant>> {
        assistants::versions(self, owner, id, metadata, limit, offset).await
    }

    async fn set_assistant_version(
        &self,
        owner: &str,
        id: &str,
        version: i64,
    ) -> DbResult<Option<Assistant>> {
        assistants::set_version(self, owner, id, version).await
    }

    async fn create_thread(&self, owner: &str, t: &Thread) -> DbResult<Thread> {
        threads::create(self, owner, t).await
    }

    async fn get_thread(&self, owner: &str, id: &str) -> DbResult<Option<Thread>> {
        threads::get(self, owner, id)
    }

    async fn get_thread_head(&self, owner: &str, id: &str) -> DbResult<Option<Thread>> {
        threads::head(self, owner, id)
    }

    async fn patch_thread(
        &self,
        owner: &str,
        id: &str,
        metadata: Option<&Map<String, Value>>,
        ttl: Option<Value>,
    ) -> DbResult<Option<Thread>> {
        threads::patch(self, owner, id, metadata, ttl).await
    }

    async fn set_thread_outcome(&self, id: &str, outcome: &ThreadOutcome) -> DbResult<()> {
        threads::set_outcome(self, id, outcome).await
    }

    async fn set_thread_status(&self, id: &str, status: ThreadStatus) -> DbResult<()> {
        threads::set_status(self, id, status).await
    }

    async fn delete_thread(&self, owner: &str, id: &str) -> DbResult<bool> {
        threads::delete(self, Some(owner), id).await
    }

    async fn search_threads(&self, owner: &str, q: &ThreadQuery) -> DbResult<(Vec<Thread>, i64)> {
        threads::search(self, owner, q).await
    }

    async fn expired_threads(&self, limit: i64) -> DbResult<Vec<String>> {
        threads::expired(self, limit).await
    }

    async fn delete_thread_any(&self, id: &str) -> DbResult<bool> {
        threads::delete(self, None, id).await
    }

    async fn create_run(&self, new: &NewRun) -> DbResult<Run> {
        runs::create(self, new).await
    }

    async fn get_run(&self, owner: &str, thread_id: Option<&str>, run_id: &str) -> DbResult<Option<Run>> {
        runs::get(self, owner, thread_id, run_id)
    }

    async fn list_runs(
        &self,
        owner: &str,
        thread_id: &str,
        status: Option<RunStatus>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Run>> {
        runs::list(self, owner, thread_id, status, limit, offset).await
    }

    async fn delete_run(&self, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
        runs::delete(self, owner, thread_id, run_id).await
    }

    async fn claim_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        runs::claim(self, worker, lease, true).await
    }

    async fn claim_expected_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        runs::claim(self, worker, lease, false).await
    }

    async fn heartbeat(&self, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
        runs::heartbeat(self, run_id, worker, lease).await
    }

    async fn finish_run(&self, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
        runs::finish(self, run_id, worker, status).await
    }

    async fn finish_run_with_outcome(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        thread_id: &str,
        outcome: &ThreadOutcome,
        events: Vec<RunEventRecord>,
    ) -> DbResult<bool> {
        runs::finish_with_outcome(self, run_id, worker, status, thread_id, outcome, events).await
    }

    async fn finish_run_at_checkpoint(
        &self,
        run_id: &str,
        worker: &str,
        thread_id: &str,
        outcome: &ThreadOutcome,
        checkpoint_id: &str,
        events: &[RunEventRecord],
    ) -> DbResult<bool> {
        runs::finish_at_checkpoint(self, run_id, worker, thread_id, outcome, checkpoint_id, events).await
    }

    async fn cancel_run(
        &self,
        owner: &str,
        thread_id: Option<&str>,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> DbResult<Option<Run>> {
        runs::cancel(self, owner, thread_id, run_id, action, reason).await
    }

    async fn queue_depth(&self) -> DbResult<i64> {
        runs::queue_depth(self).await
    }

    async fn runs_by_status(&self) -> DbResult<Vec<(RunStatus, i64)>> {
        runs::by_status(self).await
    }

    async fn append_run_events(&self, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
        events::append(self, run_id, events).await
    }

    async fn run_events(&self, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>> {
        events::read(self, run_id, from, limit)
    }

    async fn delete_run_events(&self, run_id: &str) -> DbResult<()> {
        events::delete(self, run_id).await
    }
}

#[async_trait]
impl graphloom_server_db::CronDb for SqliteDb {
    async fn create_cron(
        &self,
        new: &graphloom_server_db::NewCron,
    ) -> DbResult<graphloom_server_db::models::Cron> {
        crons::create(self, new).await
    }

    async fn get_cron(
        &self,
        owner: &str,
        cron_id: &str,
    ) -> DbResult<Option<graphloom_server_db::models::Cron>> {
        crons::get(self, owner, cron_id)
    }

    async fn patch_cron(
        &self,
        owner: &str,
        cron_id: &str,
        patch: &graphloom_server_db::CronPatch,
    ) -> DbResult<Option<graphloom_server_db::models::Cron>> {
        crons::patch(self, owner, cron_id, patch).await
    }

    async fn delete_cron(&self, owner: &str, cron_id: &str) -> DbResult<bool> {
        crons::delete(self, owner, cron_id).await
    }

    async fn search_crons(
        &self,
        owner: &str,
        q: &graphloom_server_db::CronQuery,
    ) -> DbResult<(Vec<graphloom_server_db::models::Cron>, i64)> {
        crons::search(self, owner, q).await
    }

    async fn due_crons(&self, now_us: i64, limit: i64) -> DbResult<Vec<graphloom_server_db::DueCron>> {
        crons::due(self, now_us, limit).await
    }

    async fn fire_cron(
        &self,
        tick: &graphloom_server_db::CronTick,
        run: Option<&NewRun>,
    ) -> DbResult<graphloom_server_db::Fired> {
        crons::fire(self, tick, run).await
    }
}

#[async_trait]
impl graphloom_server_db::WebhookDb for SqliteDb {
    async fn enqueue_webhook(&self, new: &graphloom_server_db::NewWebhook) -> DbResult<bool> {
        webhooks::enqueue(self, new).await
    }

    async fn claim_webhook(
        &self,
        worker: &str,
        lease: Duration,
    ) -> DbResult<Option<graphloom_server_db::WebhookDelivery>> {
        webhooks::claim(self, worker, lease).await
    }

    async fn webhook_delivered(&self, run_id: &str, worker: &str) -> DbResult<bool> {
        webhooks::delivered(self, run_id, worker).await
    }

    async fn webhook_failed(
        &self,
        run_id: &str,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> DbResult<bool> {
        webhooks::failed(self, run_id, worker, error, retry_in).await
    }

    async fn webhook_status(&self, run_id: &str) -> DbResult<Option<graphloom_server_db::WebhookStatus>> {
        webhooks::status(self, run_id)
    }

    async fn prune_webhooks(&self, before_us: i64, limit: i64) -> DbResult<usize> {
        webhooks::prune(self, before_us, limit).await
    }
}

#[async_trait]
impl graphloom_server_db::RetentionDb for SqliteDb {
    async fn expired_threads_for(
        &self,
        now_us: i64,
        default: Option<graphloom_server_db::DefaultTtl>,
        limit: i64,
    ) -> DbResult<Vec<graphloom_server_db::ExpiredThread>> {
        retention::expired(self, now_us, default, limit).await
    }

    async fn mark_retained(&self, thread_id: &str, now_us: i64) -> DbResult<()> {
        retention::mark_retained(self, thread_id, now_us).await
    }

    async fn thread_exists(&self, thread_id: &str) -> DbResult<bool> {
        retention::exists(self, thread_id)
    }
}
