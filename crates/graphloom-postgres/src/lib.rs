//! graphloom-postgres: graphloom's checkpointer and store on PostgreSQL, for teams and for
//! several server replicas sharing one database.
//!
//! - [`PostgresSaver`] implements [`Checkpointer`](graphloom_core::checkpoint::Checkpointer):
//!   delta-encoded checkpoints (a channel that did not change is not written again; a list
//!   that grew stores only the new items), pending writes, metadata filters in SQL, and no
//!   lock around the saver: every call uses its own pooled connection. See [`saver`].
//! - [`PostgresStore`] implements [`Store`](graphloom_core::Store): JSONB items under
//!   namespaces, filters, TTL, and vector search (brute-force cosine over `real[]`
//!   embeddings; pgvector is not required). See [`store`].
//! - **Checkpoint hooks** ([`PostgresSaver::with_hook`], [`CheckpointHook`]): the
//!   application's own rows (a final record per thread, an outbox message) written in the
//!   same transaction as the checkpoints the hook wants, so both commit or neither does; a
//!   failing hook fails the put and says which hook and why. A cheap `wants` test keeps
//!   every other checkpoint on its one-statement path. See [`saver::hook`].
//! - Both create and upgrade their tables on first use, under an advisory lock, so several
//!   processes may start on one fresh database at once ([`migrate`](mod@migrate)).
//! - Database failures come back typed ([`error`]): a connection that died is a
//!   [`BackendErrorKind::Connection`](graphloom_core::BackendErrorKind::Connection) error,
//!   and the pool opens a new connection for the next call.
//!
//! | feature | what it adds |
//! |---|---|
//! | `encryption` | AES-256-GCM sealing of stored checkpoint rows: [`PostgresSaver::with_codec`] with `BlobCodec::encrypted(&key)`; an encrypting saver refuses plaintext rows |
//! | `server` | [`server::PgDb`]: the tables of graphloom's server (assistants, threads, the run queue, run events), its `Db` trait implemented on PostgreSQL |
//! | `testing` | [`testing::test_database`]: a fresh database per test, on `GRAPHLOOM_PG_URL` or a private server started from the installed binaries |
//!
//! # Example
//!
//! This example is `no_run`: it needs a PostgreSQL server at `DATABASE_URL`, which doc tests
//! do not have. The same flow runs for real in `tests/interrupt_resume.rs`.
//!
//! ```no_run
//! use graphloom_core::{Command, RunConfig, RunStatus, State, StateGraph, END, START};
//! use graphloom_postgres::{PostgresSaver, PostgresStore};
//! use sqlx::postgres::PgPoolOptions;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Approval {
//!     request: String,
//!     verdict: Option<String>,
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> graphloom_core::Result<()> {
//! let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://localhost/app".into());
//! let saver = PostgresSaver::connect_with(&url, PgPoolOptions::new().max_connections(20)).await?;
//! // The store can share the saver's pool.
//! let store = PostgresStore::from_pool(saver.pool().clone());
//! let graph = StateGraph::<Approval>::new()
//!     .add_node("ask", |s, rt| async move {
//!         let answer = rt.interrupt(format!("approve {}?", s.request))?;
//!         Ok(ApprovalUpdate::new().verdict(answer.as_str().map(String::from)))
//!     })
//!     .add_edge(START, "ask")
//!     .add_edge("ask", END)
//!     .checkpointer(saver)
//!     .store(store)
//!     .compile()?;
//! let cfg = RunConfig::thread("refund-42");
//! let paused = graph.invoke(ApprovalUpdate::new().request("refund".into()), cfg.clone()).await?;
//! assert_eq!(paused.status, RunStatus::Interrupted);
//! // Later, in this process or another one (another replica) on the same database:
//! let done = graph.resume(Command::resume("yes"), cfg).await?;
//! assert_eq!(done.values.verdict.as_deref(), Some("yes"));
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod error;
pub mod migrate;
pub mod saver;
#[cfg(feature = "server")]
pub mod server;
mod storage;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod typed;

pub use error::{classify, classify_sqlstate};
pub use migrate::migrate;
pub use saver::{CheckpointHook, HookCheckpoint, HookError, HookFuture, PostgresSaver};
pub use store::PostgresStore;

/// Re-exported so callers can build pools and pool options without naming `sqlx` themselves.
pub use sqlx::postgres::{PgPool, PgPoolOptions};
