//! [`TypedSaver`]: checkpoints whose contents another runtime serialized, stored through
//! the same writer and file as graphloom's own.
//!
//! A LangGraph saver (the Python package's `graphloom.checkpoint.sqlite`) hands over each
//! value already serialized by its `serde`: a type tag and bytes, opaque here. What this
//! layer needs to know to store and find them is plain: the thread, namespace and id of a
//! checkpoint, its parent, which version of which channel it holds (to store each channel
//! version once, not the whole state at every step), its metadata as JSON (for list
//! filters) and its run.
//!
//! # Tables (migration component `typed`)
//!
//! | table | key | holds |
//! |---|---|---|
//! | `typed_checkpoints` | thread, namespace, checkpoint id | the checkpoint without its channel values (type, bytes), its channel versions, parent, metadata JSON, run id |
//! | `typed_blobs` | thread, namespace, channel, version | one channel value (type, bytes), written once |
//! | `typed_writes` | thread, namespace, checkpoint id, task id, idx | pending writes (type, bytes) with their channel and task path |
//!
//! Writes go through the writer thread (group commit: a `put` or `put_writes` returns once
//! its transaction committed, fsynced with [`Synchronous::Full`](crate::Synchronous)); reads
//! run on the calling thread on a read connection, each in one read transaction, so a
//! checkpoint, its values and its writes are read from one snapshot.
//!
//! | file | what |
//! |---|---|
//! | `read.rs` | `get_tuple`, `list` |
//! | `write.rs` | `put`, `put_writes` |
//! | `thread.rs` | `delete_thread`, `delete_for_runs`, `copy_thread`, `prune`, unreferenced blobs dropped |

mod read;
mod thread;
mod write;

use crate::db::Db;
use crate::migrate::TYPED_MIGRATIONS;
use crate::{SqliteDatabase, SqliteOptions};
use graphloom_core::Result;
use serde_json::{Map, Value};
use std::sync::Arc;

/// A value serialized by its writer: a type tag and bytes (LangGraph's `dumps_typed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedValue {
    /// The serializer's type tag (`"msgpack"`, `"json"`, `"msgpack+aes"`, ...).
    pub type_tag: String,
    /// The serialized bytes.
    pub bytes: Vec<u8>,
}

impl TypedValue {
    /// `bytes` tagged `type_tag`.
    pub fn new(type_tag: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            type_tag: type_tag.into(),
            bytes,
        }
    }
}

/// A checkpoint to store with [`TypedSaver::put`].
#[derive(Debug, Clone, PartialEq)]
pub struct TypedPut {
    /// Thread id.
    pub thread_id: String,
    /// Namespace (empty for the root graph).
    pub checkpoint_ns: String,
    /// The checkpoint's id (ids sort by creation time).
    pub checkpoint_id: String,
    /// The checkpoint it follows, if any.
    pub parent_id: Option<String>,
    /// The checkpoint without its channel values.
    pub checkpoint: TypedValue,
    /// `(channel, version)` of every channel the checkpoint has a value for: a read fetches
    /// these blobs.
    pub channel_versions: Vec<(String, String)>,
    /// `(channel, version, value)` of the channel versions this checkpoint writes first.
    pub blobs: Vec<(String, String, TypedValue)>,
    /// Metadata as a JSON object (list filters match its keys).
    pub metadata: Map<String, Value>,
}

/// One task's writes, for [`TypedSaver::put_writes`].
#[derive(Debug, Clone, PartialEq)]
pub struct TypedWrites {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// The checkpoint the task ran from.
    pub checkpoint_id: String,
    /// The task.
    pub task_id: String,
    /// The task's path (writes are read back ordered by path, task id, idx).
    pub task_path: String,
    /// `(idx, channel, value)`.
    pub writes: Vec<(i64, String, TypedValue)>,
    /// Replace writes already stored under the same `(task_id, idx)` (special channels
    /// such as errors and interrupts); otherwise the first write of an idx is kept.
    pub replace: bool,
}

/// A pending write read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value.
    pub value: TypedValue,
}

/// A stored checkpoint with its values and pending writes.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedTuple {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// The checkpoint it follows, if any.
    pub parent_id: Option<String>,
    /// The checkpoint without its channel values.
    pub checkpoint: TypedValue,
    /// The metadata JSON object, as stored.
    pub metadata: String,
    /// `(channel, value)` of every channel version the checkpoint names that has a value.
    pub values: Vec<(String, TypedValue)>,
    /// Pending writes, ordered by task path, task id and idx.
    pub writes: Vec<TypedWrite>,
}

/// What [`TypedSaver::list`] returns: newest first.
#[derive(Debug, Clone, Default)]
pub struct TypedQuery {
    /// Only this thread.
    pub thread_id: Option<String>,
    /// Only this namespace.
    pub checkpoint_ns: Option<String>,
    /// Only checkpoints whose metadata has every key with an equal value.
    pub filter: Map<String, Value>,
    /// Only checkpoints with an id below this one.
    pub before: Option<String>,
    /// At most this many.
    pub limit: Option<usize>,
}

/// Checkpoints serialized by their writer, in one SQLite file (WAL), written through
/// graphloom's writer thread. Cloning is cheap; clones share the writer and connections.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use graphloom_sqlite::typed::{TypedPut, TypedSaver, TypedValue};
/// let dir = tempfile::tempdir()?;
/// let saver = TypedSaver::open(graphloom_sqlite::SqliteOptions::new(dir.path().join("lg.db"))).await?;
/// saver
///     .put(TypedPut {
///         thread_id: "t1".into(),
///         checkpoint_ns: String::new(),
///         checkpoint_id: "1".into(),
///         parent_id: None,
///         checkpoint: TypedValue::new("json", b"{}".to_vec()),
///         channel_versions: vec![("messages".into(), "1".into())],
///         blobs: vec![("messages".into(), "1".into(), TypedValue::new("json", b"[]".to_vec()))],
///         metadata: serde_json::Map::new(),
///     })
///     .await?;
/// let tuple = saver.get_tuple("t1", "", None)?.expect("stored");
/// assert_eq!(tuple.values[0].1.bytes, b"[]");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TypedSaver {
    db: Arc<Db>,
}

impl TypedSaver {
    /// Open (creating if needed) the file of `opts` and its typed tables.
    ///
    /// # Errors
    /// A backend error if the file cannot be opened or migrated.
    pub async fn open(opts: SqliteOptions) -> Result<Self> {
        let db = Arc::new(Db::open(&opts).await?);
        db.migrate(TYPED_MIGRATIONS).await?;
        Ok(Self { db })
    }

    /// The typed tables of an open database: their writes share its writer (and its
    /// transactions) with the database's saver, store and the application's writes.
    ///
    /// # Errors
    /// A backend error if the typed tables cannot be created.
    pub async fn from_database(database: &SqliteDatabase) -> Result<Self> {
        let db = Arc::clone(database.db());
        db.migrate(TYPED_MIGRATIONS).await?;
        Ok(Self { db })
    }
}
