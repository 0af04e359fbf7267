//! [`PgDb`]: the tables of graphloom's server (assistants, threads, the run queue, stored
//! run events) in PostgreSQL, usually the checkpointer's database; the server's storage
//! trait [`Db`] implemented on them (feature `server`).
//!
//! Safe with several server processes on one database:
//! - migrations run in one transaction under the advisory lock of every migration of the
//!   database ([`crate::migrate`](mod@crate::migrate)), so replicas starting together on a
//!   fresh database all succeed;
//! - a claim picks a run with `FOR UPDATE SKIP LOCKED`, then locks its thread's row (also
//!   without waiting) and re-checks, with a fresh snapshot, that the thread has no other
//!   live running run and no older due pending one. Every claim and every `create_run` holds
//!   its thread's row lock until commit, so two replicas never run two runs of one thread.
//!   Claims never wait for a lock, so they cannot deadlock with anything.
//!
//! JSON columns are JSONB; metadata and values filters use `@>`.
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
use async_trait::async_trait;
use graphloom_server_db::kit::page;
use graphloom_server_db::models::{
    Assistant, CancelAction, ClaimedRun, Run, RunStatus, Thread, ThreadStatus,
};
use graphloom_server_db::{
    AssistantPatch, AssistantQuery, Db, DbResult, Lease, NewRun, RunEventRecord, ThreadOutcome, ThreadQuery,
};
use serde_json::{Map, Value};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, QueryBuilder};
use std::time::Duration;

/// Connections of [`PgDb::connect`].
const CONNECTIONS: u32 = 10;

/// The server's storage in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgDb {
    pool: PgPool,
}

impl PgDb {
    /// Connect (a pool of 10 connections) and migrate the server's tables.
    ///
    /// # Errors
    /// When the database cannot be reached or migrated.
    pub async fn connect(url: &str) -> DbResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(Duration::from_secs(30))
            .connect(url)
            .await
            .db()?;
        Self::from_pool(pool).await
    }

    /// Use an existing pool, migrating the server's tables first.
    ///
    /// # Errors
    /// When the database cannot be migrated.
    pub async fn from_pool(pool: PgPool) -> DbResult<Self> {
        crate::migrate::run(&pool, crate::migrate::SERVER_MIGRATIONS).await?;
        Ok(Self { pool })
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Db for PgDb {
    async fn create_assistant(&self, owner: &str, a: &Assistant) -> DbResult<Assistant> {
        assistants::create(&self.pool, owner, a).await
    }

    async fn get_assistant(&self, owner: &str, id: &str) -> DbResult<Option<Assistant>> {
        assistants::get(&self.pool, owner, id).await
    }

    async fn patch_assistant(
        &self,
        owner: &str,
        id: &str,
        patch: AssistantPatch,
    ) -> DbResult<Option<Assistant>> {
        assistants::patch(&self.pool, owner, id, patch).await
    }

    async fn delete_assistant(&self, owner: &str, id: &str) -> DbResult<bool> {
        assistants::delete(&self.pool, owner, id).await
    }

    async fn search_assistants(&self, owner: &str, q: &AssistantQuery) -> DbResult<(Vec<Assistant>, i64)> {
        assistants::search(&self.pool, owner, q).await
    }

    async fn assistant_versions(
        &self,
        owner: &str,
        id: &str,
        metadata: &Map<String, Value>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Assistant>> {
        assistants::versions(&self.pool, owner, id, metadata, limit, offset).await
    }

    async fn set_assistant_version(
        &self,
        owner: &str,
        id: &str,
        version: i64,
    ) -> DbResult<Option<Assistant>> {
        assistants::set_version(&self.pool, owner, id, version).await
    }

    async fn create_thread(&self, owner: &str, t: &Thread) -> DbResult<Thread> {
        threads::create(&self.pool, owner, t).await
    }

    async fn get_thread(&self, owner: &str, id: &str) -> DbResult<Option<Thread>> {
        threads::get(&self.pool, owner, id).await
    }

    async fn get_thread_head(&self, owner: &str, id: &str) -> DbResult<Option<Thread>> {
        threads::head(&self.pool, owner, id).await
    }

    async fn patch_thread(
        &self,
        owner: &str,
        id: &str,
        metadata: Option<&Map<String, Value>>,
        ttl: Option<Value>,
    ) -> DbResult<Option<Thread>> {
        threads::patch(&self.pool, owner, id, metadata, ttl).await
    }

    async fn set_thread_outcome(&self, id: &str, outcome: &ThreadOutcome) -> DbResult<()> {
        threads::set_outcome(&self.pool, id, outcome).await
    }

    async fn set_thread_status(&self, id: &str, status: ThreadStatus) -> DbResult<()> {
        threads::set_status(&self.pool, id, status).await
    }

    async fn delete_thread(&self, owner: &str, id: &str) -> DbResult<bool> {
        threads::delete(&self.pool, Some(owner), id).await
    }

    async fn search_threads(&self, owner: &str, q: &ThreadQuery) -> DbResult<(Vec<Thread>, i64)> {
        threads::search(&self.pool, owner, q).await
    }

    async fn expired_threads(&self, limit: i64) -> DbResult<Vec<String>> {
        threads::expired(&self.pool, limit).await
    }

    async fn delete_thread_any(&self, id: &str) -> DbResult<bool> {
        threads::delete(&self.pool, None, id).await
    }

    async fn create_run(&self, new: &NewRun) -> DbResult<Run> {
        runs::create(&self.pool, new).await
    }

    async fn get_run(&self, owner: &str, thread_id: Option<&str>, run_id: &str) -> DbResult<Option<Run>> {
        runs::get(&self.pool, owner, thread_id, run_id).await
    }

    async fn list_runs(
        &self,
        owner: &str,
        thread_id: &str,
        status: Option<RunStatus>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Run>> {
        runs::list(&self.pool, owner, thread_id, status, limit, offset).await
    }

    async fn delete_run(&self, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool> {
        runs::delete(&self.pool, owner, thread_id, run_id).await
    }

    async fn claim_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        runs::claim(&self.pool, worker, lease).await
    }

    async fn heartbeat(&self, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease> {
        runs::heartbeat(&self.pool, run_id, worker, lease).await
    }

    async fn finish_run(&self, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool> {
        runs::finish(&self.pool, run_id, worker, status).await
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
        runs::finish_with_outcome(&self.pool, run_id, worker, status, thread_id, outcome, events).await
    }

    async fn cancel_run(
        &self,
        owner: &str,
        thread_id: Option<&str>,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> DbResult<Option<Run>> {
        runs::cancel(&self.pool, owner, thread_id, run_id, action, reason).await
    }

    async fn queue_depth(&self) -> DbResult<i64> {
        runs::queue_depth(&self.pool).await
    }

    async fn runs_by_status(&self) -> DbResult<Vec<(RunStatus, i64)>> {
        runs::by_status(&self.pool).await
    }

    async fn append_run_events(&self, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()> {
        events::append(&self.pool, run_id, events).await
    }

    async fn run_events(&self, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>> {
        events::read(&self.pool, run_id, from, limit).await
    }

    async fn delete_run_events(&self, run_id: &str) -> DbResult<()> {
        events::delete(&self.pool, run_id).await
    }
}

/// `LIMIT` (none for 0 or less) and `OFFSET` of a page.
fn push_page(qb: &mut QueryBuilder<'_, Postgres>, limit: i64, offset: i64) {
    let (limit, offset) = page(limit, offset);
    if let Some(l) = limit {
        qb.push(" LIMIT ").push_bind(l);
    }
    qb.push(" OFFSET ").push_bind(offset);
}

#[async_trait]
impl graphloom_server_db::CronDb for PgDb {
    async fn create_cron(
        &self,
        new: &graphloom_server_db::NewCron,
    ) -> DbResult<graphloom_server_db::models::Cron> {
        crons::create(&self.pool, new).await
    }

    async fn get_cron(
        &self,
        owner: &str,
        cron_id: &str,
    ) -> DbResult<Option<graphloom_server_db::models::Cron>> {
        crons::get(&self.pool, owner, cron_id).await
    }

    async fn patch_cron(
        &self,
        owner: &str,
        cron_id: &str,
        patch: &graphloom_server_db::CronPatch,
    ) -> DbResult<Option<graphloom_server_db::models::Cron>> {
        crons::patch(&self.pool, owner, cron_id, patch).await
    }

    async fn delete_cron(&self, owner: &str, cron_id: &str) -> DbResult<bool> {
        crons::delete(&self.pool, owner, cron_id).await
    }

    async fn search_crons(
        &self,
        owner: &str,
        q: &graphloom_server_db::CronQuery,
    ) -> DbResult<(Vec<graphloom_server_db::models::Cron>, i64)> {
        crons::search(&self.pool, owner, q).await
    }

    async fn due_crons(&self, now_us: i64, limit: i64) -> DbResult<Vec<graphloom_server_db::DueCron>> {
        crons::due(&self.pool, now_us, limit).await
    }

    async fn fire_cron(
        &self,
        tick: &graphloom_server_db::CronTick,
        run: Option<&NewRun>,
    ) -> DbResult<graphloom_server_db::Fired> {
        crons::fire(&self.pool, tick, run).await
    }
}

#[async_trait]
impl graphloom_server_db::WebhookDb for PgDb {
    async fn enqueue_webhook(&self, new: &graphloom_server_db::NewWebhook) -> DbResult<bool> {
        webhooks::enqueue(&self.pool, new).await
    }

    async fn claim_webhook(
        &self,
        worker: &str,
        lease: Duration,
    ) -> DbResult<Option<graphloom_server_db::WebhookDelivery>> {
        webhooks::claim(&self.pool, worker, lease).await
    }

    async fn webhook_delivered(&self, run_id: &str, worker: &str) -> DbResult<bool> {
        webhooks::delivered(&self.pool, run_id, worker).await
    }

    async fn webhook_failed(
        &self,
        run_id: &str,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> DbResult<bool> {
        webhooks::failed(&self.pool, run_id, worker, error, retry_in).await
    }

    async fn webhook_status(&self, run_id: &str) -> DbResult<Option<graphloom_server_db::WebhookStatus>> {
        webhooks::status(&self.pool, run_id).await
    }

    async fn prune_webhooks(&self, before_us: i64, limit: i64) -> DbResult<usize> {
        webhooks::prune(&self.pool, before_us, limit).await
    }
}

#[async_trait]
impl graphloom_server_db::RetentionDb for PgDb {
    async fn expired_threads_for(
        &self,
        now_us: i64,
        default: Option<graphloom_server_db::DefaultTtl>,
        limit: i64,
    ) -> DbResult<Vec<graphloom_server_db::ExpiredThread>> {
        retention::expired(&self.pool, now_us, default, limit).await
    }

    async fn mark_retained(&self, thread_id: &str, now_us: i64) -> DbResult<()> {
        retention::mark_retained(&self.pool, thread_id, now_us).await
    }

    async fn thread_exists(&self, thread_id: &str) -> DbResult<bool> {
        retention::exists(&self.pool, thread_id).await
    }
}
