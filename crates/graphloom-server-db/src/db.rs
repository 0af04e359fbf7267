//! The storage trait of the server, [`Db`], and the arguments and answers of its calls.
//!
//! Every row carries an `owner` (the authenticated principal; `""` with auth off). Every
//! read and write of a resource is scoped to one owner: another owner's row is "not found".

use crate::events::RunEventRecord;
use crate::models::{Assistant, CancelAction, ClaimedRun, Run, RunStatus, Thread, ThreadStatus};
use crate::DbError;
use crate::{CronDb, RetentionDb, WebhookDb};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::time::Duration;

/// Result of storage calls.
pub type DbResult<T> = Result<T, DbError>;

/// Sort order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortOrder {
    /// Ascending.
    Asc,
    /// Descending (the default).
    #[default]
    Desc,
}

/// Filters of an assistant search.
#[derive(Clone, Debug, Default)]
pub struct AssistantQuery {
    /// Metadata containment: every key must equal.
    pub metadata: Map<String, Value>,
    /// Only this graph.
    pub graph_id: Option<String>,
    /// Name contains (case-insensitive).
    pub name: Option<String>,
    /// Page size.
    pub limit: i64,
    /// Page start.
    pub offset: i64,
    /// One of `assistant_id`, `graph_id`, `name`, `created_at`, `updated_at` (default `created_at`).
    pub sort_by: Option<String>,
    /// Order.
    pub sort_order: SortOrder,
}

/// Fields a PATCH of an assistant may change; each change makes a new version.
#[derive(Clone, Debug, Default)]
pub struct AssistantPatch {
    /// New graph.
    pub graph_id: Option<String>,
    /// New config (replaces).
    pub config: Option<Value>,
    /// New context (replaces).
    pub context: Option<Value>,
    /// New metadata (merged into the old).
    pub metadata: Option<Map<String, Value>>,
    /// New name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
}

/// Filters of a thread search.
#[derive(Clone, Debug, Default)]
pub struct ThreadQuery {
    /// Only these ids.
    pub ids: Option<Vec<String>>,
    /// Metadata containment.
    pub metadata: Map<String, Value>,
    /// Values containment (top-level keys of the state must equal).
    pub values: Map<String, Value>,
    /// Status.
    pub status: Option<ThreadStatus>,
    /// Page size.
    pub limit: i64,
    /// Page start.
    pub offset: i64,
    /// One of `thread_id`, `status`, `created_at`, `updated_at` (default `created_at`).
    pub sort_by: Option<String>,
    /// Order.
    pub sort_order: SortOrder,
}

/// What a run's end writes to its thread.
#[derive(Clone, Debug)]
pub struct ThreadOutcome {
    /// New status.
    pub status: ThreadStatus,
    /// Latest values.
    pub values: Option<Value>,
    /// Pending interrupts by task id (`{}` when none).
    pub interrupts: Value,
    /// Error of the run, if it failed.
    pub error: Option<Value>,
}

/// How a new run enters the queue.
#[derive(Clone, Debug)]
pub struct NewRun {
    /// The run row (status `pending`).
    pub run: Run,
    /// Owner.
    pub owner: String,
    /// Not claimable before this many seconds from now (`after_seconds`).
    pub delay: Option<Duration>,
    /// Whether to refuse (Busy) when the thread has a pending or running run.
    pub reject_if_busy: bool,
    /// Whether to ask the thread's active runs to stop, with this action, before this run
    /// (strategies `interrupt` and `rollback`); pending runs of the thread are cancelled.
    /// Their `cancel_reason` names the strategy and this run
    /// ([`cancel_reason::multitask`](crate::models::cancel_reason::multitask)).
    pub cancel_active: Option<CancelAction>,
    /// Merged into the thread's metadata in the same transaction (the run's `graph_id`
    /// and `assistant_id`).
    pub thread_metadata: Option<Map<String, Value>>,
    /// Claim the run at once for this worker, with this lease, when nothing else is
    /// queued or running on its thread and it is due now: [`Db::create_run`] then returns
    /// it `running` (attempt 1) and the thread `busy`, and the caller executes it. Else it
    /// is queued as usual.
    pub claim: Option<(String, Duration)>,
    /// Create this thread (of [`owner`](Self::owner)) in the run's transaction when no
    /// thread has the run's thread id (`if_not_exists: "create"`, a stateless run's
    /// thread): one write instead of two. The thread of another owner is not taken: the
    /// creation then fails with [`DbError::Conflict`] and writes nothing.
    pub create_thread: Option<Thread>,
}

/// What a worker learns from a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// Still ours; go on.
    Held,
    /// Still ours, but a cancel was requested.
    Cancel(CancelAction),
    /// Lost (expired and taken over, or the run was deleted): stop without writing.
    Lost,
}

/// The server's storage. Implemented for SQLite (`graphloom_sqlite::server::SqliteDb`) and
/// PostgreSQL (`graphloom_postgres::server::PgDb`), each behind its crate's `server` feature.
#[async_trait]
pub trait Db: CronDb + WebhookDb + RetentionDb + Send + Sync + 'static {
    // ---- assistants ----
    /// Insert an assistant (version 1). `Conflict` when the id exists (for this or any owner).
    async fn create_assistant(&self, owner: &str, a: &Assistant) -> DbResult<Assistant>;
    /// An assistant of this owner.
    async fn get_assistant(&self, owner: &str, id: &str) -> DbResult<Option<Assistant>>;
    /// Apply a patch: a new version that becomes the current one.
    async fn patch_assistant(
        &self,
        owner: &str,
        id: &str,
        patch: AssistantPatch,
    ) -> DbResult<Option<Assistant>>;
    /// Delete an assistant and its versions; false when not found.
    async fn delete_assistant(&self, owner: &str, id: &str) -> DbResult<bool>;
    /// Search; returns the page and the total count of matches.
    async fn search_assistants(&self, owner: &str, q: &AssistantQuery) -> DbResult<(Vec<Assistant>, i64)>;
    /// All versions, newest first.
    async fn assistant_versions(
        &self,
        owner: &str,
        id: &str,
        metadata: &Map<String, Value>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Assistant>>;
    /// Make an older version the current one.
    async fn set_assistant_version(&self, owner: &str, id: &str, version: i64)
        -> DbResult<Option<Assistant>>;

    // ---- threads ----
    /// Insert a thread. `Conflict` when the id exists.
    async fn create_thread(&self, owner: &str, t: &Thread) -> DbResult<Thread>;
    /// A thread of this owner.
    async fn get_thread(&self, owner: &str, id: &str) -> DbResult<Option<Thread>>;
    /// A thread of this owner without its values (`Null`): its status, interrupts and
    /// metadata, what a command on the thread looks at, without decoding (or, where the
    /// storage keeps it apart, reading) its state, which grows with a conversation.
    async fn get_thread_head(&self, owner: &str, id: &str) -> DbResult<Option<Thread>> {
        let mut t = self.get_thread(owner, id).await?;
        if let Some(t) = &mut t {
            t.values = Value::Null;
        }
        Ok(t)
    }
    /// Merge metadata into a thread and/or set its ttl.
    async fn patch_thread(
        &self,
        owner: &str,
        id: &str,
        metadata: Option<&Map<String, Value>>,
        ttl: Option<Value>,
    ) -> DbResult<Option<Thread>>;
    /// Record the outcome of a run (or a state update) on a thread.
    async fn set_thread_outcome(&self, id: &str, outcome: &ThreadOutcome) -> DbResult<()>;
    /// Set a thread's status only.
    async fn set_thread_status(&self, id: &str, status: ThreadStatus) -> DbResult<()>;
    /// Delete a thread and its runs; false when not found.
    async fn delete_thread(&self, owner: &str, id: &str) -> DbResult<bool>;
    /// Search; returns the page and the total count.
    async fn search_threads(&self, owner: &str, q: &ThreadQuery) -> DbResult<(Vec<Thread>, i64)>;
    /// Ids of threads whose ttl has passed (for the sweeper).
    async fn expired_threads(&self, limit: i64) -> DbResult<Vec<String>>;
    /// Delete a thread and its runs whatever its owner (the TTL sweeper and temporary
    /// threads of stateless runs); false when not found.
    async fn delete_thread_any(&self, id: &str) -> DbResult<bool>;

    // ---- runs (the queue) ----
    /// Enqueue a run, applying the multitask strategy atomically. The thread must exist.
    async fn create_run(&self, new: &NewRun) -> DbResult<Run>;
    /// A run of this owner (`thread_id` None: any thread).
    async fn get_run(&self, owner: &str, thread_id: Option<&str>, run_id: &str) -> DbResult<Option<Run>>;
    /// Runs of a thread, newest first.
    async fn list_runs(
        &self,
        owner: &str,
        thread_id: &str,
        status: Option<RunStatus>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Vec<Run>>;
    /// Delete a run; false when not found.
    async fn delete_run(&self, owner: &str, thread_id: &str, run_id: &str) -> DbResult<bool>;
    /// Claim the oldest claimable run for `worker`: pending and due, or running with an
    /// expired lease (a dead worker's; its attempt goes up). Never a run whose thread has
    /// another running run with a live lease. The claim holds a lease of `lease` length.
    async fn claim_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>>;
    /// [`claim_run`](Self::claim_run) for a worker that expects a run to be queued (it has
    /// just claimed one: under load the queue has more). A backend that first looks at its
    /// queue outside its writer, so idle workers polling an empty queue never wait for it,
    /// skips that look here.
    async fn claim_expected_run(&self, worker: &str, lease: Duration) -> DbResult<Option<ClaimedRun>> {
        self.claim_run(worker, lease).await
    }
    /// Extend the lease; tells whether it is still held and whether a cancel was asked for.
    async fn heartbeat(&self, run_id: &str, worker: &str, lease: Duration) -> DbResult<Lease>;
    /// End a run held by `worker` with a final status. False when the lease was lost
    /// (another worker owns it now): nothing is written.
    async fn finish_run(&self, run_id: &str, worker: &str, status: RunStatus) -> DbResult<bool>;
    /// [`finish_run`](Db::finish_run), [`set_thread_outcome`](Db::set_thread_outcome) and
    /// [`append_run_events`](Db::append_run_events) of the run's last `events` (a resumable
    /// run's not stored yet) in one transaction: nothing is written when the lease was lost,
    /// and a run is never seen ended before all its events are stored.
    async fn finish_run_with_outcome(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        thread_id: &str,
        outcome: &ThreadOutcome,
        events: Vec<RunEventRecord>,
    ) -> DbResult<bool>;
    /// [`finish_run_with_outcome`](Db::finish_run_with_outcome) for a run that completed,
    /// written only if checkpoint `checkpoint_id` of the thread's root namespace is saved,
    /// checked in the same transaction. Called while that checkpoint's put may still be in
    /// flight, its write queued first: where the database shares one writer with the
    /// checkpointer (SQLite), both land in one commit and the run's end costs no commit of
    /// its own. `events` (a resumable run's not stored yet) go in the same transaction.
    /// False when nothing was written, `events` included (the checkpoint is not saved, the
    /// lease was lost, or the database cannot tell, as by default): the caller then stores
    /// them and records the outcome as usual.
    async fn finish_run_at_checkpoint(
        &self,
        _run_id: &str,
        _worker: &str,
        _thread_id: &str,
        _outcome: &ThreadOutcome,
        _checkpoint_id: &str,
        _events: &[RunEventRecord],
    ) -> DbResult<bool> {
        Ok(false)
    }
    /// Ask a run to stop. A pending run ends `interrupted` at once (or is deleted for
    /// rollback); a running one gets the request, which its worker sees on its next heartbeat.
    /// `reason` is recorded as the run's `cancel_reason` (a run already cancelled keeps its
    /// first). Returns the run as it is after the request; None when not found.
    async fn cancel_run(
        &self,
        owner: &str,
        thread_id: Option<&str>,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> DbResult<Option<Run>>;
    /// Number of pending runs (for `/metrics`).
    async fn queue_depth(&self) -> DbResult<i64>;
    /// Count of runs by status (for `/metrics`).
    async fn runs_by_status(&self) -> DbResult<Vec<(RunStatus, i64)>>;

    /// Keep events of a resumable run, so a client of another process (a replica, or this
    /// server after a restart) can replay them; an event already stored is kept.
    async fn append_run_events(&self, run_id: &str, events: Vec<RunEventRecord>) -> DbResult<()>;
    /// A run's stored events from position `from` on, at most `limit`, in order.
    async fn run_events(&self, run_id: &str, from: u64, limit: i64) -> DbResult<Vec<RunEventRecord>>;
    /// Forget a run's stored events (a new attempt of the run starts its log again).
    async fn delete_run_events(&self, run_id: &str) -> DbResult<()>;
}
