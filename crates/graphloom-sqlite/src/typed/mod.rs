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
pub use graphloom_core::checkpoint::typed::{
    TypedPut, TypedQuery, TypedTuple, TypedValue, TypedWrite, TypedWrites,
};
use graphloom_core::Result;
use std::sync::Arc;

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
