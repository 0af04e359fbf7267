//! Crons: stored schedules that create runs, and the storage calls that keep and fire them
//! ([`CronDb`], a part of [`Db`](crate::Db)).
//!
//! The server parses schedules and computes each next time; the database keeps the cron
//! rows and fires a tick atomically: the tick's run is created in the same transaction
//! that moves `next_run_date` on, and only if `next_run_date` is still the tick being
//! fired. Two replicas reading the same due cron therefore create one run between them,
//! and a crash leaves either both (the run and the new date) or neither.

use crate::db::{DbResult, NewRun, SortOrder};
use crate::models::{Cron, Run};
use async_trait::async_trait;
use serde_json::{Map, Value};

/// A cron to store: the row as clients see it (its `created_at`, `updated_at` and
/// `next_run_date` are set by the database from the times given here), and its owner.
#[derive(Clone, Debug)]
pub struct NewCron {
    /// The cron (id, assistant, thread, schedule, payload, metadata, ...).
    pub cron: Cron,
    /// The principal it acts for.
    pub owner: String,
    /// Its first tick, in microseconds since the Unix epoch (`None`: never, as when its
    /// `end_time` is already past).
    pub next_run_us: Option<i64>,
    /// `end_time` in microseconds (`None`: runs for ever).
    pub end_time_us: Option<i64>,
}

/// A change of a cron; `None` fields are kept. The server computes the new payload and
/// next tick from the stored cron and the request.
#[derive(Clone, Debug, Default)]
pub struct CronPatch {
    /// New schedule.
    pub schedule: Option<String>,
    /// New time zone (`Some(None)`: UTC).
    pub timezone: Option<Option<String>>,
    /// New end (`Some(None)`: none), in microseconds.
    pub end_time_us: Option<Option<i64>>,
    /// New run payload (replaces the stored one).
    pub payload: Option<Value>,
    /// Metadata merged into the stored metadata.
    pub metadata: Option<Map<String, Value>>,
    /// New `on_run_completed` (`Some(None)`: unset).
    pub on_run_completed: Option<Option<String>>,
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// New next tick (`Some(None)`: none), in microseconds.
    pub next_run_us: Option<Option<i64>>,
}

/// Filters of a cron search.
#[derive(Clone, Debug, Default)]
pub struct CronQuery {
    /// Only crons of this assistant.
    pub assistant_id: Option<String>,
    /// Only crons of this thread.
    pub thread_id: Option<String>,
    /// Only enabled (or disabled) crons.
    pub enabled: Option<bool>,
    /// Metadata containment.
    pub metadata: Map<String, Value>,
    /// Page size (0 or less: no limit).
    pub limit: i64,
    /// Page start.
    pub offset: i64,
    /// One of `cron_id`, `assistant_id`, `thread_id`, `created_at`, `updated_at`,
    /// `next_run_date`, `end_time` (default `created_at`).
    pub sort_by: Option<String>,
    /// Order.
    pub sort_order: SortOrder,
}

/// A cron whose tick is due, as the scheduler reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct DueCron {
    /// The cron.
    pub cron: Cron,
    /// Its owner.
    pub owner: String,
    /// The tick that is due (its stored `next_run_date`), in microseconds.
    pub due_us: i64,
}

/// One tick of a cron being fired: from `due_us` (what the scheduler read) to `next_us`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronTick {
    /// The cron.
    pub cron_id: String,
    /// The tick being fired: `next_run_date` must still hold it.
    pub due_us: i64,
    /// The cron's next tick after this one (`None`: no more, its `end_time` is reached).
    pub next_us: Option<i64>,
}

/// What firing a tick did.
#[derive(Clone, Debug, PartialEq)]
// One value per fired tick, returned at once: boxing the run would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Fired {
    /// The run was created (claimed at once when the [`NewRun`] asked and it could be) and
    /// the cron moved to its next tick.
    Run(Run),
    /// The cron moved to its next tick without a run (none was given).
    Skipped,
    /// Another replica fired this tick first, or the cron was changed or deleted since it
    /// was read: nothing was written.
    Taken,
    /// The run's thread does not exist any more: nothing was written.
    ThreadGone,
    /// The run's thread is busy and the run's strategy is `reject`: nothing was written.
    Busy,
}

/// Storage of crons (see the module docs).
#[async_trait]
pub trait CronDb: Send + Sync {
    /// Insert a cron. `Conflict` when the id exists.
    async fn create_cron(&self, new: &NewCron) -> DbResult<Cron>;
    /// A cron of this owner.
    async fn get_cron(&self, owner: &str, cron_id: &str) -> DbResult<Option<Cron>>;
    /// Change a cron of this owner; None when not found.
    async fn patch_cron(&self, owner: &str, cron_id: &str, patch: &CronPatch) -> DbResult<Option<Cron>>;
    /// Delete a cron of this owner; false when not found.
    async fn delete_cron(&self, owner: &str, cron_id: &str) -> DbResult<bool>;
    /// Search the owner's crons; the page and the total count of matches.
    async fn search_crons(&self, owner: &str, q: &CronQuery) -> DbResult<(Vec<Cron>, i64)>;
    /// Enabled crons of any owner whose `next_run_date` is at or before `now_us`, oldest
    /// tick first, at most `limit`.
    async fn due_crons(&self, now_us: i64, limit: i64) -> DbResult<Vec<DueCron>>;
    /// Fire `tick`: if the cron's `next_run_date` is still `tick.due_us`, create `run`
    /// (when given) and set `next_run_date` to `tick.next_us`, in one transaction.
    async fn fire_cron(&self, tick: &CronTick, run: Option<&NewRun>) -> DbResult<Fired>;
}
