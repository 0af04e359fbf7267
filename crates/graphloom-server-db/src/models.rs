//! The resources of the API, in the JSON shapes the `langgraph-sdk` clients expect.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Time as RFC 3339 text with microseconds and a `+00:00` offset, like the reference server.
#[must_use]
pub fn now_rfc3339() -> String {
    graphloom_core::checkpoint::now_rfc3339()
}

/// RFC 3339 text of a time given in microseconds since the Unix epoch.
#[must_use]
pub fn rfc3339_from_micros(us: i64) -> String {
    graphloom_core::checkpoint::rfc3339_from_micros(us)
}

/// An assistant: a graph plus configuration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Assistant {
    /// Id (a UUID; system assistants use UUID v5 of the graph id).
    pub assistant_id: String,
    /// The registered graph it runs.
    pub graph_id: String,
    /// Run configuration defaults (`configurable`, `recursion_limit`, ...).
    #[serde(default)]
    pub config: Value,
    /// Context defaults.
    #[serde(default)]
    pub context: Value,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// Free metadata.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Version, from 1.
    pub version: i64,
    /// Display name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
}

/// Thread status, derived from its runs and last checkpoint.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThreadStatus {
    /// No run active, last run ended normally.
    #[default]
    Idle,
    /// A run is active.
    Busy,
    /// Paused at an interrupt.
    Interrupted,
    /// The last run failed.
    Error,
}

impl ThreadStatus {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Busy => "busy",
            ThreadStatus::Interrupted => "interrupted",
            ThreadStatus::Error => "error",
        }
    }
    /// From the wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => ThreadStatus::Idle,
            "busy" => ThreadStatus::Busy,
            "interrupted" => ThreadStatus::Interrupted,
            "error" => ThreadStatus::Error,
            _ => return None,
        })
    }
}

/// A thread: one conversation / one durable state.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Thread {
    /// Id.
    pub thread_id: String,
    /// Creation time.
    pub created_at: String,
    /// Last change of the row.
    pub updated_at: String,
    /// Last change of the state.
    pub state_updated_at: String,
    /// Free metadata (`graph_id` and `assistant_id` are added by runs).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Configuration of the last run.
    #[serde(default)]
    pub config: Value,
    /// Status.
    pub status: ThreadStatus,
    /// Latest state values (a copy, refreshed when a run ends).
    #[serde(default)]
    pub values: Value,
    /// Pending interrupts by task id.
    #[serde(default)]
    pub interrupts: Value,
    /// The last run's error.
    #[serde(default)]
    pub error: Option<Value>,
    /// Time to live, when set: `{"strategy": "delete", "ttl": minutes}`.
    #[serde(default)]
    pub ttl: Option<Value>,
}

/// Run status.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Queued.
    Pending,
    /// Executing (held by a worker's lease).
    Running,
    /// Failed.
    Error,
    /// Finished.
    Success,
    /// Ran past its timeout.
    Timeout,
    /// Paused at an interrupt, or cancelled.
    Interrupted,
}

impl RunStatus {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Error => "error",
            RunStatus::Success => "success",
            RunStatus::Timeout => "timeout",
            RunStatus::Interrupted => "interrupted",
        }
    }
    /// From the wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => RunStatus::Pending,
            "running" => RunStatus::Running,
            "error" => RunStatus::Error,
            "success" => RunStatus::Success,
            "timeout" => RunStatus::Timeout,
            "interrupted" => RunStatus::Interrupted,
            _ => return None,
        })
    }
    /// Whether the run has ended.
    #[must_use]
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Pending | RunStatus::Running)
    }
}

/// What to do with a new run when its thread already has an active one.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MultitaskStrategy {
    /// Refuse the new run with 409.
    Reject,
    /// Stop the active run (keeping its progress), then run the new one.
    Interrupt,
    /// Stop the active run and delete it and its checkpoints' progress, then run the new one.
    Rollback,
    /// Queue the new run behind the active one.
    #[default]
    Enqueue,
}

impl MultitaskStrategy {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MultitaskStrategy::Reject => "reject",
            MultitaskStrategy::Interrupt => "interrupt",
            MultitaskStrategy::Rollback => "rollback",
            MultitaskStrategy::Enqueue => "enqueue",
        }
    }
}

/// How a cancel stops a running run.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CancelAction {
    /// Stop; keep the checkpoints; the run ends `interrupted`.
    #[default]
    Interrupt,
    /// Stop and delete the run (its thread returns to where it was).
    Rollback,
}

impl CancelAction {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CancelAction::Interrupt => "interrupt",
            CancelAction::Rollback => "rollback",
        }
    }
    /// From the wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "interrupt" => Some(CancelAction::Interrupt),
            "rollback" => Some(CancelAction::Rollback),
            _ => None,
        }
    }
}

/// Why a run was cancelled, as [`Run::cancel_reason`] says it.
pub mod cancel_reason {
    use super::CancelAction;

    /// A cancel request (`POST .../cancel`, `POST /runs/cancel`): `requested`, with the
    /// identity that asked when the request was authenticated.
    #[must_use]
    pub fn requested(identity: &str) -> String {
        if identity.is_empty() {
            "requested".to_owned()
        } else {
            format!("requested by {identity}")
        }
    }

    /// The client of a run created with `on_disconnect: "cancel"` went away.
    pub const CLIENT_DISCONNECTED: &str = "client disconnected";

    /// A new run of the thread, created with multitask strategy `interrupt` or
    /// `rollback`, displaced this one.
    #[must_use]
    pub fn multitask(action: CancelAction, new_run_id: &str) -> String {
        format!("multitask strategy {}: run {new_run_id}", action.as_str())
    }
}

/// A run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Run {
    /// Id (UUID v7, so ids sort by creation).
    pub run_id: String,
    /// Its thread (stateless runs get a temporary one).
    pub thread_id: String,
    /// The assistant it runs.
    pub assistant_id: String,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// Status.
    pub status: RunStatus,
    /// Free metadata.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The request that created it (input, command, config, stream modes, ...).
    #[serde(default)]
    pub kwargs: Value,
    /// The strategy it was created with.
    pub multitask_strategy: MultitaskStrategy,
    /// Why it was cancelled, once a cancel was asked for (see [`cancel_reason`]); `null`
    /// for a run nobody cancelled.
    #[serde(default)]
    pub cancel_reason: Option<String>,
    /// Its place among its thread's runs, in creation order from 0, set by the database
    /// when it creates the run: no other run of the thread has it, before or after, a
    /// deleted one's is not given again. The thread-centric protocol's sequence numbers
    /// carry it, so a client's last one stays valid when a rollback deletes a run. Not
    /// part of the API's run.
    #[serde(skip)]
    pub ordinal: i64,
}

/// A queued or running run as the queue sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedRun {
    /// The run.
    pub run: Run,
    /// Attempt number, from 1; a run taken over after a crash or lost lease has 2 or more.
    pub attempt: i64,
}

/// A cron: a schedule that creates runs of an assistant, on one thread or each on a new
/// one (a stateless cron).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Cron {
    /// Id (UUID v7).
    pub cron_id: String,
    /// The assistant its runs use.
    pub assistant_id: String,
    /// Its thread; `null` for a stateless cron (each run gets a new thread).
    pub thread_id: Option<String>,
    /// The principal it acts for (`""` with auth off).
    #[serde(default)]
    pub user_id: Option<String>,
    /// When it stops firing (`null`: never).
    pub end_time: Option<String>,
    /// Standard 5-field cron expression.
    pub schedule: String,
    /// IANA time zone of the schedule (`null`: UTC).
    #[serde(default)]
    pub timezone: Option<String>,
    /// The run request each tick makes.
    #[serde(default)]
    pub payload: Value,
    /// The next tick (`null`: none, its end is reached).
    pub next_run_date: Option<String>,
    /// Free metadata.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// For a stateless cron: `delete` (the default) or `keep` each run's thread.
    #[serde(default)]
    pub on_run_completed: Option<String>,
    /// Whether it fires.
    pub enabled: bool,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}
