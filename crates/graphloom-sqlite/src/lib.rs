//! graphloom-sqlite: the embedded default persistence of graphloom, on SQLite.
//!
//! - [`SqliteSaver`] is a [`Checkpointer`](graphloom_core::checkpoint::Checkpointer): it
//!   makes runs durable, resumable after a crash or an interrupt, and browsable.
//! - [`SqliteStore`] is a [`Store`](graphloom_core::Store): long-term memory shared across
//!   threads, with filters, TTL and (with an [`IndexConfig`](graphloom_core::store::IndexConfig))
//!   vector search.
//!
//! Both keep everything in **one file in WAL mode** (they may share it), opened with
//! [`SqliteSaver::open`] / [`SqliteStore::open`] or a builder. To share one file between a
//! saver, a store and tables of your own with one writer (so their commits are grouped
//! into the same transactions), open a [`SqliteDatabase`] and take them from it. Missing tables are created by
//! versioned migrations on first use (the `graphloom_migrations` table records every applied
//! migration, the server's tables' too; several processes may open a fresh file at once).
//!
//! [`typed::TypedSaver`] keeps checkpoints another runtime serialized (the Python package's
//! LangGraph savers) in tables of their own, through the same writer.
//!
//! One driver: every connection is a `rusqlite` one (the writer's, the read connections,
//! the one that opens and migrates the file).
//!
//! **Durability.** With the default [`Synchronous::Full`], `put` and `put_writes` return only
//! after their transaction is committed and fsynced. [`Synchronous::Normal`] trades the last
//! commits before a power loss for speed. All writes go through one writer thread that commits
//! everything queued in one transaction (group commit), so many concurrent runs share fsyncs
//! and never see "database is locked"; reads use a small pool of connections.
//!
//! **Storage grows with what changed.** Checkpoints are stored without their channel values;
//! each `(thread, namespace, channel, version)` is one blob holding a full value or an append
//! to an earlier version, written once and never rewritten.
//!
//! **Safe decoding.** Every stored value goes through a
//! [`BlobCodec`](graphloom_core::checkpoint::BlobCodec) with associated data naming its row.
//! A corrupt or tampered row is an error naming the row
//! ([`Error::CorruptCheckpoint`](graphloom_core::Error::CorruptCheckpoint) from the saver, a
//! `Corrupt` backend error from the store), never a panic. With the `encryption` feature and
//! `BlobCodec::encrypted(&key)` rows are sealed with AES-256-GCM and plaintext rows are
//! refused. Checkpoint metadata stays plaintext JSON so list filters can use it (with
//! encryption on it is still authenticated by the sealed checkpoint row); store namespaces,
//! keys, timestamps and embeddings are plaintext too.
//!
//! | feature | what it adds |
//! |---|---|
//! | `encryption` | AES-256-GCM sealing of stored values (`BlobCodec::encrypted`, from `graphloom-core/encryption`) |
//! | `server` | [`server::SqliteDb`]: the tables of graphloom's server (assistants, threads, the run queue, run events) in the same file, written through the same writer, its `Db` trait implemented on SQLite |
//!
//! ```
//! use graphloom_core::{Command, RunConfig, RunStatus, State, StateGraph, END, START};
//! use graphloom_sqlite::SqliteSaver;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Approval {
//!     request: String,
//!     verdict: Option<String>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("graph.db");
//! let build = |saver: SqliteSaver| {
//!     StateGraph::<Approval>::new()
//!         .add_node("ask", |s, rt| async move {
//!             let answer = rt.interrupt(format!("approve {}?", s.request))?;
//!             Ok(ApprovalUpdate::new().verdict(answer.as_str().map(String::from)))
//!         })
//!         .add_edge(START, "ask")
//!         .add_edge("ask", END)
//!         .checkpointer(saver)
//!         .compile()
//! };
//! let cfg = RunConfig::thread("t1");
//! let graph = build(SqliteSaver::open(&path).await?)?;
//! let paused = graph.invoke(ApprovalUpdate::new().request("refund".into()), cfg.clone()).await?;
//! assert_eq!(paused.status, RunStatus::Interrupted);
//! drop(graph);
//!
//! // Another process (here: another saver on the same file) resumes the run.
//! let graph = build(SqliteSaver::open(&path).await?)?;
//! let done = graph.resume(Command::resume("yes"), cfg).await?;
//! assert_eq!(done.values.verdict.as_deref(), Some("yes"));
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod aad;
mod database;
mod db;
pub mod error;
pub mod migrate;
mod options;
mod pool;
mod row;
mod saver;
#[cfg(feature = "server")]
pub mod server;
mod storage;
mod store;
pub mod typed;
mod writer;

pub use database::SqliteDatabase;
pub use error::rusqlite_error;
pub use migrate::SCHEMA_VERSION;
pub use options::{
    SqliteOptions, Synchronous, DEFAULT_BUSY_TIMEOUT, DEFAULT_READ_CONNECTIONS, DEFAULT_VALUE_CACHE_BYTES,
};
/// The `rusqlite` crate that [`SqliteDatabase::write`] operations receive a connection of.
pub use rusqlite;
pub use saver::{SqliteSaver, SqliteSaverBuilder, StorageStats};
pub use store::{SqliteStore, SqliteStoreBuilder};
pub use writer::CommitStats;
