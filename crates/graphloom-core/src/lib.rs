//! graphloom-core: the Pregel graph runtime at the heart of graphloom.
//!
//! A graph is a set of nodes (async functions of a state snapshot) joined by edges. A run
//! proceeds in *supersteps*: every node triggered in a step runs concurrently against the
//! same snapshot, their writes are merged through each field's reducer in a fixed order,
//! and a checkpoint is saved. Checkpoints make runs resumable after an error, a crash or an
//! interrupt, and let callers read and edit history.
//!
//! | feature | what it adds |
//! |---|---|
//! | `encryption` | AES-256-GCM sealing of stored blobs ([`checkpoint::BlobCodec::encrypted`]) |
//!
//! ```
//! use graphloom_core::{checkpoint::InMemorySaver, Command, RunConfig, RunStatus, State, StateGraph, END, START};
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Approval {
//!     request: String,
//!     verdict: Option<String>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> graphloom_core::Result<()> {
//! let graph = StateGraph::<Approval>::new()
//!     .add_node("ask", |s, rt| async move {
//!         let answer = rt.interrupt(format!("approve {}?", s.request))?;
//!         Ok(ApprovalUpdate::new().verdict(answer.as_str().map(String::from)))
//!     })
//!     .add_edge(START, "ask")
//!     .add_edge("ask", END)
//!     .checkpointer(InMemorySaver::new())
//!     .compile()?;
//! let cfg = RunConfig::thread("t1");
//! let paused = graph.invoke(ApprovalUpdate::new().request("refund".into()), cfg.clone()).await?;
//! assert_eq!(paused.status, RunStatus::Interrupted);
//! let done = graph.resume(Command::resume("yes"), cfg).await?;
//! assert_eq!(done.values.verdict.as_deref(), Some("yes"));
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod change;
pub mod checkpoint;
pub mod config;
pub mod draw;
pub mod error;
mod error_source;
pub mod events;
pub mod func;
pub mod graph;
pub mod json_state;
mod mermaid;
pub mod message_stream;
pub mod messages;
pub mod migrate;
pub mod node_failure;
pub(crate) mod pregel;
pub mod reducers;
pub mod runtime;
pub mod seq;
pub mod state;
pub mod store;
pub mod stream;
pub mod timeout;
pub mod types;

pub use config::{
    CancelToken, Completion, CompletionHook, RunConfig, RunControl, RunInput, StreamOptions, TaskEnd,
    TaskObserver, DEFAULT_RECURSION_LIMIT,
};
pub use error::{BackendError, BackendErrorKind, Error, ErrorSource, Result};
pub use events::{EventData, EventFilter, EventKind, EventRun, RunType, StreamEvent};
pub use graph::{
    CompiledGraph, EdgeSources, EventStream, HistoryQuery, NodeDefaults, PendingTask, RunEvent, RunOutput,
    RunStatus, RunStream, StateGraph, StateSnapshot, SubgraphInfo,
};
pub use graphloom_derive::State;
pub use json_state::{JsonReduceFn, JsonReduceSharedFn, JsonReducer, JsonState, JsonUpdate, JsonWrite};
pub use messages::{content_text, Message, MessageBody, MessageKind, MessageLike, ToolCall};
pub use node_failure::NodeFailure;
pub use reducers::{Add, AddMessages, Append, LastValue, MergeMap, Reducer, ReducerError};
pub use runtime::Runtime;
pub use seq::{Seq, SeqLike};
pub use state::{Changed, FieldChange, State, StateError, TaskUpdate};
pub use store::{InMemoryStore, Store};
pub use stream::{CheckpointEvents, MessageEvents, StreamData, StreamMode, StreamPart};
pub use timeout::{RefreshOn, TimeoutKind, TimeoutPolicy};
pub use types::{
    CachePolicy, Command, Durability, Interrupt, NodeError, NodeErrorKind, NodeOutput, NodeSet, Packet,
    Resume, RetryPolicy, Route, Routes, Send, END, START,
};

/// What a module that builds graphs needs, in one import, without the clash of
/// `use graphloom_core::*`: the packet type [`Send`](crate::Send) shares its name with
/// `std::marker::Send`, so a glob import of the crate breaks every `impl Fn(..) + Send`
/// bound in that module (E0404). The prelude leaves the type out and offers [`send`]
/// (LangGraph's `Send("node", arg)`) to build packets.
///
/// ```
/// use graphloom_core::prelude::*;
///
/// // `Send` here is still `std::marker::Send`.
/// fn boxed(f: impl Fn() -> u32 + Send + Sync + 'static) -> Box<dyn Fn() -> u32 + Send + Sync> {
///     Box::new(f)
/// }
/// let routes: Routes = vec![send("worker", 1), send("worker", 2)].into();
/// assert_eq!(boxed(|| 2)(), 2);
/// # let _ = routes;
/// ```
pub mod prelude {
    pub use crate::checkpoint::InMemorySaver;
    pub use crate::{
        Add, AddMessages, Append, CachePolicy, Command, CompiledGraph, Durability, Error, HistoryQuery,
        Interrupt, JsonReducer, JsonState, JsonUpdate, LastValue, MergeMap, Message, NodeError, NodeOutput,
        NodeSet, Result, RetryPolicy, Route, Routes, RunConfig, RunEvent, RunInput, RunOutput, RunStatus,
        Runtime, State, StateGraph, StreamMode, StreamOptions, ToolCall, END, START,
    };

    /// A packet for `node` (LangGraph's `Send(node, arg)`), as a [`Route`] a router or a
    /// `Command::goto` returns.
    pub fn send<T: serde::Serialize + Send + Sync + 'static>(node: impl Into<String>, packet: T) -> Route {
        Route::Send(crate::Send::new(node, packet))
    }
}

#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
