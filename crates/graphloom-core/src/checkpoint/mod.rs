//! Checkpoints: what the executor saves after every superstep, and the [`Checkpointer`]
//! trait that backends implement.
//!
//! A checkpoint is written as a *delta*: `channel_values` in [`Checkpointer::put`] holds only
//! the channels listed in `new_versions`, and a sequence channel that only grew holds just
//! the appended items ([`ChannelValue::Append`]). Backends store one blob per
//! `(channel, version)` and resolve the chain when reading, so storage grows with what
//! changed, not with the whole state at every step. A checkpoint returned by
//! [`Checkpointer::get_tuple`] or [`Checkpointer::list`] has every channel resolved to
//! [`ChannelValue::Full`].

pub mod codec;
mod erased;
pub mod memory;
mod resolve;
mod storage;
pub mod typed;
mod version;

pub use codec::{BlobCodec, CodecError};
pub use erased::DynCheckpointer;
pub use memory::InMemorySaver;
pub use resolve::{resolve_channel, ResolveError, StoredBlob};
pub use storage::{StoredCount, ThreadStorage};
pub use version::{ParseVersionError, Version};

use crate::error::Result;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::future::Future;

/// Current checkpoint format version.
pub const CHECKPOINT_FORMAT: u32 = 1;

/// Write channel of a task error.
pub const ERROR: &str = "__error__";
/// Write channel of a task interrupt.
pub const INTERRUPT: &str = "__interrupt__";
/// Write channel of resume values for a task.
pub const RESUME: &str = "__resume__";
/// Write channel of a task's `Send` packets.
pub const TASKS: &str = "__pregel_tasks";
/// Write channel recording that a task failed and its node's error handler is due (the
/// failure as JSON); the handler's own writes are under its own task id.
pub const ERROR_HANDLER: &str = "__error_handler__";
/// Write channel recording that a task finished without writing anything.
pub const NO_WRITES: &str = "__no_writes__";

/// The index a write is stored under. Special channels have fixed negative indexes, so
/// writing them again replaces the earlier row; ordinary writes use their position and a
/// repeated `(task_id, idx)` is stored once.
#[must_use]
pub fn write_idx(channel: &str, position: usize) -> i64 {
    match channel {
        ERROR => -1,
        INTERRUPT => -3,
        RESUME => -4,
        ERROR_HANDLER => -5,
        _ => i64::try_from(position).unwrap_or(i64::MAX),
    }
}

/// Where a checkpoint lives: thread, namespace (empty for the root graph, `node:task_id`
/// segments joined by `|` for subgraphs) and optionally a checkpoint id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// Thread id.
    pub thread_id: String,
    /// Namespace, empty for the root graph.
    #[serde(default)]
    pub checkpoint_ns: String,
    /// A specific checkpoint; `None` means the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
}

impl CheckpointConfig {
    /// The latest checkpoint of a thread's root graph.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            checkpoint_ns: String::new(),
            checkpoint_id: None,
        }
    }
    /// The same thread and namespace at checkpoint `id`.
    #[must_use]
    pub fn at(mut self, id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }
    /// The same thread in namespace `ns`.
    #[must_use]
    pub fn in_ns(mut self, ns: impl Into<String>) -> Self {
        self.checkpoint_ns = ns.into();
        self
    }
}

/// A channel's value inside a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", content = "v", rename_all = "snake_case")]
pub enum ChannelValue {
    /// The whole value.
    Full(Value),
    /// The value at version `base` of the same channel, plus `items` appended (a JSON array).
    Append {
        /// The version this extends.
        base: Version,
        /// The appended items.
        items: Vec<Value>,
    },
    /// The whole value of a list whose items are shared with the state, not copied (see
    /// [`crate::State::field_shared_items`]). It is stored exactly as [`ChannelValue::Full`]
    /// of a JSON array (and reads back as one); the in-memory saver keeps the pointers.
    #[serde(rename(serialize = "full"), skip_deserializing)]
    Items(Vec<std::sync::Arc<Value>>),
}

impl ChannelValue {
    /// [`ChannelValue::Items`] as [`ChannelValue::Full`] (a copy of the items); other
    /// values as they are.
    #[must_use]
    pub fn into_owned(self) -> ChannelValue {
        match self {
            ChannelValue::Items(items) => ChannelValue::Full(items_to_json(&items)),
            other => other,
        }
    }
}

/// Shared JSON items as one JSON array (a copy).
#[must_use]
pub fn items_to_json(items: &[std::sync::Arc<Value>]) -> Value {
    Value::Array(items.iter().map(|v| (**v).clone()).collect())
}

/// A packet sent with `Send`, waiting to run in the next superstep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingSend {
    /// Target node.
    pub node: String,
    /// The packet (the node's input).
    pub packet: Value,
}

/// One superstep's saved state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version ([`CHECKPOINT_FORMAT`]).
    pub v: u32,
    /// Checkpoint id: a UUIDv7, so ids sort by creation time.
    pub id: String,
    /// Creation time, RFC 3339.
    pub ts: String,
    /// Channel values (see the module docs for what `put` receives).
    pub channel_values: BTreeMap<String, ChannelValue>,
    /// Current version of every channel.
    pub channel_versions: BTreeMap<String, Version>,
    /// For each node, the version of each trigger channel it last ran on.
    pub versions_seen: BTreeMap<String, BTreeMap<String, Version>>,
    /// `Send` packets to run in the next superstep.
    #[serde(default)]
    pub pending_sends: Vec<PendingSend>,
    /// Channels written in the step that produced this checkpoint.
    #[serde(default)]
    pub updated_channels: Vec<String>,
    /// For sequence channels stored as appends: how long the chain since the last full
    /// value is, so the next writer knows when to store the whole list again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub delta_meta: BTreeMap<String, DeltaMeta>,
}

/// Bookkeeping for a sequence channel stored as appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeltaMeta {
    /// Length of the list when it was last stored whole.
    pub full_len: usize,
    /// Items appended since then.
    pub since_full: usize,
}

impl Checkpoint {
    /// An empty checkpoint with a fresh id.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            v: CHECKPOINT_FORMAT,
            id: new_checkpoint_id(),
            ts: now_rfc3339(),
            channel_values: BTreeMap::new(),
            channel_versions: BTreeMap::new(),
            versions_seen: BTreeMap::new(),
            pending_sends: Vec::new(),
            updated_channels: Vec::new(),
            delta_meta: BTreeMap::new(),
        }
    }
}

/// Why a checkpoint was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointSource {
    /// The input of a run.
    Input,
    /// A superstep of the loop.
    Loop,
    /// `update_state`.
    Update,
    /// A copy of an older checkpoint, made to run from it.
    Fork,
}

/// Metadata saved with a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Why it was written.
    pub source: CheckpointSource,
    /// Superstep number: -1 for the input checkpoint, then 0, 1, ...
    pub step: i64,
    /// Checkpoint ids of parent graphs, by namespace.
    #[serde(default)]
    pub parents: BTreeMap<String, String>,
    /// The run that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// User metadata from the run config (searchable with list filters).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CheckpointMetadata {
    /// True if every key of `filter` is present with an equal value (core keys included).
    #[must_use]
    pub fn matches(&self, filter: &Map<String, Value>) -> bool {
        if filter.is_empty() {
            return true;
        }
        let Ok(Value::Object(me)) = serde_json::to_value(self) else {
            return false;
        };
        filter.iter().all(|(k, v)| me.get(k) == Some(v))
    }
}

/// A write of a task, kept until the superstep's checkpoint is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// Channel written (a state field, or a special channel such as [`ERROR`]).
    pub channel: String,
    /// The value.
    pub value: Value,
}

/// A checkpoint with its config, metadata, parent and pending writes.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointTuple {
    /// Where it lives (with `checkpoint_id` set).
    pub config: CheckpointConfig,
    /// The checkpoint, channels resolved.
    pub checkpoint: Checkpoint,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// The checkpoint it follows, if any.
    pub parent_config: Option<CheckpointConfig>,
    /// Writes of tasks of the next superstep that already finished, in write order.
    pub pending_writes: Vec<PendingWrite>,
}

/// What [`Checkpointer::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this thread (all threads when `None`).
    pub thread_id: Option<String>,
    /// Only this namespace (all namespaces when `None`).
    pub checkpoint_ns: Option<String>,
    /// Only checkpoints whose metadata matches every key.
    pub filter: Map<String, Value>,
    /// Only checkpoints created before this checkpoint id.
    pub before: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

impl ListQuery {
    /// All checkpoints of a thread's root namespace.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: Some(thread_id.into()),
            checkpoint_ns: Some(String::new()),
            ..Self::default()
        }
    }
}

/// One task's writes, as [`Checkpointer::put_writes`] takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskWrites {
    /// The checkpoint the task ran from.
    pub config: CheckpointConfig,
    /// The task.
    pub task_id: String,
    /// The task's path (may be empty).
    pub task_path: String,
    /// `(channel, value)` in the order the task wrote them.
    pub writes: Vec<(String, Value)>,
}

/// A checkpoint saver.
///
/// Implementations must keep these promises (the conformance kit of `graphloom-test-kit`
/// checks them):
/// `put` stores a checkpoint and returns its config; `get_tuple` with no id returns the
/// newest checkpoint of the namespace; pending writes with a repeated `(task_id, idx)` are
/// stored once (special channels replace); `list` returns newest first.
pub trait Checkpointer: Send + Sync + 'static {
    /// Fetch a checkpoint (the latest of the namespace when `config.checkpoint_id` is None).
    fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> impl Future<Output = Result<Option<CheckpointTuple>>> + Send;

    /// Checkpoints matching a query, newest first.
    fn list(&self, query: &ListQuery) -> impl Future<Output = Result<Vec<CheckpointTuple>>> + Send;

    /// Store a checkpoint. `config.checkpoint_id` is the parent (or None); `new_versions`
    /// names the channels whose values `checkpoint.channel_values` carries.
    fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> impl Future<Output = Result<CheckpointConfig>> + Send;

    /// Store writes of task `task_id` against the checkpoint in `config`.
    fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Store the writes of the task that finished a step, then the checkpoint that step
    /// produced. A backend that can do both in one transaction should (one commit instead
    /// of two on the critical path of every step); the default calls [`Self::put_writes`]
    /// and then [`Self::put`], so the writes are never later than the checkpoint.
    fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> impl Future<Output = Result<CheckpointConfig>> + Send {
        async move {
            self.put_writes(&writes.config, writes.writes, &writes.task_id, &writes.task_path)
                .await?;
            self.put(config, checkpoint, metadata, new_versions).await
        }
    }

    /// Delete every checkpoint and write of a thread (all namespaces).
    fn delete_thread(&self, thread_id: &str) -> impl Future<Output = Result<()>> + Send;

    /// Copy every checkpoint and write of `source` to `target` (all namespaces).
    fn copy_thread(&self, source: &str, target: &str) -> impl Future<Output = Result<()>> + Send;

    /// Whether saves issued one after another (each future polled once, in order) are made
    /// durable in that order: a later one is never durable while an earlier one is not (one
    /// writer applying a queue in order, or saves done by the time they are issued). The
    /// executor then issues a run's input and `__start__` checkpoints in `sync` mode
    /// without waiting for them before the first node starts (it waits before that node's
    /// writes are saved and before it reports anything saved), as a crash can no longer
    /// leave a later checkpoint saved without them. The default says no.
    fn saves_in_order(&self) -> bool {
        false
    }

    /// Delete the checkpoints of `thread_id` (all namespaces) whose metadata names run
    /// `run_id`, and their pending writes: rolling back a cancelled run. The thread's
    /// latest checkpoint is then the one the run started from. Channel values stay (older
    /// checkpoints may share them). The default refuses: a backend that cannot do it must
    /// not pretend it did.
    fn delete_run(&self, thread_id: &str, run_id: &str) -> impl Future<Output = Result<()>> + Send {
        let message =
            format!("this checkpointer cannot delete the checkpoints of run {run_id} on thread {thread_id}");
        async move { Err(crate::error::BackendError::new(crate::error::BackendErrorKind::Other, message).into()) }
    }

    /// Keep only the latest checkpoint of each namespace of `thread_id` (the thread's
    /// state as it is now), with its pending writes, and drop every older checkpoint, its
    /// writes, and the channel values only they used (retention's `keep_latest`). The
    /// values the latest checkpoint holds stay readable; where they were stored as appends
    /// to older versions they are stored whole. A namespace that got a newer checkpoint
    /// meanwhile is left as it is. Returns how many checkpoints were dropped. The default
    /// refuses: a backend that cannot do it must not pretend it did.
    fn prune_to_latest(&self, thread_id: &str) -> impl Future<Output = Result<usize>> + Send {
        let message = format!("this checkpointer cannot prune the history of thread {thread_id}");
        async move { Err(crate::error::BackendError::new(crate::error::BackendErrorKind::Other, message).into()) }
    }

    /// What the checkpoints of `thread_id` take in storage (all namespaces). The default
    /// refuses: a backend that cannot measure must not report zero.
    fn thread_storage(&self, thread_id: &str) -> impl Future<Output = Result<ThreadStorage>> + Send {
        let message = format!("this checkpointer cannot measure the storage of thread {thread_id}");
        async move { Err(crate::error::BackendError::new(crate::error::BackendErrorKind::Other, message).into()) }
    }
}

impl<T: Checkpointer> Checkpointer for std::sync::Arc<T> {
    fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> impl Future<Output = Result<Option<CheckpointTuple>>> + Send {
        (**self).get_tuple(config)
    }
    fn list(&self, query: &ListQuery) -> impl Future<Output = Result<Vec<CheckpointTuple>>> + Send {
        (**self).list(query)
    }
    fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> impl Future<Output = Result<CheckpointConfig>> + Send {
        (**self).put(config, checkpoint, metadata, new_versions)
    }
    fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).put_writes(config, writes, task_id, task_path)
    }
    fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> impl Future<Output = Result<CheckpointConfig>> + Send {
        (**self).put_writes_then_checkpoint(writes, config, checkpoint, metadata, new_versions)
    }
    fn delete_thread(&self, thread_id: &str) -> impl Future<Output = Result<()>> + Send {
        (**self).delete_thread(thread_id)
    }
    fn copy_thread(&self, source: &str, target: &str) -> impl Future<Output = Result<()>> + Send {
        (**self).copy_thread(source, target)
    }
    fn delete_run(&self, thread_id: &str, run_id: &str) -> impl Future<Output = Result<()>> + Send {
        (**self).delete_run(thread_id, run_id)
    }
    fn saves_in_order(&self) -> bool {
        (**self).saves_in_order()
    }
    fn prune_to_latest(&self, thread_id: &str) -> impl Future<Output = Result<usize>> + Send {
        (**self).prune_to_latest(thread_id)
    }
    fn thread_storage(&self, thread_id: &str) -> impl Future<Output = Result<ThreadStorage>> + Send {
        (**self).thread_storage(thread_id)
    }
}

/// A fresh, time-ordered checkpoint id.
#[must_use]
pub fn new_checkpoint_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The current time as RFC 3339 (UTC, microseconds).
#[must_use]
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_from_micros(i64::try_from(now.as_micros()).unwrap_or(i64::MAX))
}

/// RFC 3339 text (UTC, microseconds, a `+00:00` offset, as the reference server writes
/// times) of `us` microseconds since the Unix epoch. Written digit by digit: servers write
/// a few of these per run, and `format!`'s padded fields cost ten times as much.
#[must_use]
pub fn rfc3339_from_micros(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let micros = us.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    if !(0..=9999).contains(&y) {
        // Outside years 0-9999: the general (slow) form.
        return format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{micros:06}+00:00");
    }
    let mut out = *b"0000-00-00T00:00:00.000000+00:00";
    for (range, v) in [
        (0..4, y),
        (5..7, i64::from(mo)),
        (8..10, i64::from(d)),
        (11..13, h),
        (14..16, mi),
        (17..19, s),
        (20..26, micros),
    ] {
        let mut v = v;
        for b in out[range].iter_mut().rev() {
            *b = b'0' + u8::try_from(v % 10).unwrap_or(0);
            v /= 10;
        }
    }
    out.iter().map(|&b| char::from(b)).collect()
}

/// The civil date (year, month, day) of a day count since the Unix epoch (Howard
/// Hinnant's days-to-civil algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instant() {
        assert_eq!(rfc3339_from_micros(0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(
            rfc3339_from_micros(1_795_000_000_000_005),
            "2026-11-18T11:06:40.000005+00:00"
        );
        assert_eq!(rfc3339_from_micros(-1), "1969-12-31T23:59:59.999999+00:00");
        assert_eq!(
            rfc3339_from_micros(951_782_400_000_000),
            "2000-02-29T00:00:00.000000+00:00"
        );
        assert_eq!(
            rfc3339_from_micros(253_402_300_799_999_999),
            "9999-12-31T23:59:59.999999+00:00"
        );
        assert_eq!(
            rfc3339_from_micros(253_402_300_800_000_000),
            "10000-01-01T00:00:00.000000+00:00"
        );
    }

    /// The digit-by-digit text is `format!`'s, instant by instant (a day and a bit apart,
    /// over four centuries and across the epoch).
    #[test]
    fn rfc3339_matches_the_formatted_fields() {
        let mut us: i64 = -2_000_000_000_000_000;
        while us < 11_000_000_000_000_000 {
            let secs = us.div_euclid(1_000_000);
            let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
            let rem = secs.rem_euclid(86_400);
            let want = format!(
                "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60,
                us.rem_euclid(1_000_000)
            );
            assert_eq!(rfc3339_from_micros(us), want);
            us += 90_061_000_123;
        }
    }

    #[test]
    fn special_writes_have_fixed_indexes() {
        assert_eq!(write_idx(ERROR, 3), -1);
        assert_eq!(write_idx(INTERRUPT, 0), -3);
        assert_eq!(write_idx("x", 2), 2);
    }
}
