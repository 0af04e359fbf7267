//! The functional API: LangGraph's `@entrypoint` and `@task` as a builder.
//!
//! An [`Entrypoint`] is a durable async function `(input, ctx) -> output` run on a thread
//! with a checkpointer. Through its [`EntrypointCtx`] it calls [`Task`]s, which start at
//! once and run in parallel when awaited together; each finished call's result is saved
//! against the entrypoint's checkpoint (a pending write of its step, keyed by the call's
//! position, the task's name and its caller), so when the entrypoint runs again — after
//! an interrupt, an error or a crash — finished calls return their saved result and are
//! not run again. `interrupt()` works in the entrypoint and in its tasks; resume with
//! `Command::resume`. [`EntrypointCtx::previous`] reads what the last run on the thread
//! saved, and [`Final`] returns one value while saving another.
//!
//! Calls are matched by their position among the caller's calls and the task's name, not
//! by their arguments: an entrypoint must call its tasks in an order that does not depend
//! on timing. A task result is saved as soon as the call returns, whatever the run's
//! [`Durability`](crate::Durability) (`exit` included), so that it is never lost to a
//! crash while its side effect is not. A result saved by older code that no longer decodes
//! into the task's output type fails the entrypoint with [`TaskResultDecodeError`].
//!
//! Under the hood an entrypoint is a one-node graph over [`FuncState`]: it runs on the
//! same executor, checkpointers and stores as any graph, and
//! [`CompiledEntrypoint::graph`] gives the [`CompiledGraph`](crate::CompiledGraph) for
//! history, time travel and the server.
//!
//! ```
//! use futures::future::try_join_all;
//! use graphloom_core::checkpoint::InMemorySaver;
//! use graphloom_core::func::{Entrypoint, Task};
//! use graphloom_core::RunConfig;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> graphloom_core::Result<()> {
//! let square = Task::new("square", |x: i64, _ctx| async move { Ok(x * x) });
//! let sum_of_squares = Entrypoint::<Vec<i64>, i64>::new("sum_of_squares", move |xs, ctx| {
//!     let square = square.clone();
//!     async move {
//!         let calls = xs.into_iter().map(|x| ctx.call(&square, x));
//!         let total: i64 = try_join_all(calls).await?.into_iter().sum();
//!         // What this run saves; the next run on the thread reads it.
//!         let before: i64 = ctx.previous()?.unwrap_or(0);
//!         Ok(total + before)
//!     }
//! })
//! .checkpointer(InMemorySaver::new())
//! .compile()?;
//!
//! let cfg = RunConfig::thread("t");
//! assert_eq!(sum_of_squares.invoke(vec![1, 2, 3], cfg.clone()).await?.value, Some(14));
//! assert_eq!(sum_of_squares.invoke(vec![1], cfg).await?.value, Some(15));
//! # Ok(()) }
//! ```

mod context;
mod entrypoint;
mod state;
mod task;

pub use context::{EntrypointCtx, TaskContext};
pub use entrypoint::{CompiledEntrypoint, Entrypoint, EntrypointOutput, Final};
pub use state::{FuncState, FuncUpdate};
pub use task::{Task, TaskCall, TaskResultDecodeError};

/// The channel a task call's result is saved under (a pending write of the entrypoint's
/// checkpoint, one per call id), as LangGraph names it.
pub const RETURN: &str = "__return__";
