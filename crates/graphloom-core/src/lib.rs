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
pub mod error;
mod error_source;
pub mod func;
pub mod graph;
pub mod json_state;
mod mermaid;
pub mod message_stream;
pub mod messages;
pub mod migrate;
pub(crate) mod pregel;
pub mod reducers;
pub mod runtime;
pub mod seq;
pub mod state;
pub mod store;
pub mod stream;
pub mod types;

pub use config::{
    CancelToken, Completion, CompletionHook, RunConfig, RunInput, StreamOptions, TaskEnd, TaskObserver,
    DEFAULT_RECURSION_LIMIT,
};
pub use error::{BackendError, BackendErrorKind, Error, ErrorSource, Result};
pub use graph::{
    CompiledGraph, HistoryQuery, PendingTask, RunEvent, RunOutput, RunStatus, RunStream, StateGraph,
    StateSnapshot, SubgraphInfo,
};
pub use graphloom_derive::State;
pub use json_state::{JsonReduceFn, JsonReduceSharedFn, JsonReducer, JsonState, JsonUpdate, JsonWrite};
pub use messages::{content_text, Message, MessageKind, MessageLike, ToolCall};
pub use reducers::{Add, AddMessages, Append, LastValue, MergeMap, Reducer, ReducerError};
pub use runtime::Runtime;
pub use seq::{Seq, SeqLike};
pub use state::{Changed, FieldChange, State, StateError, TaskUpdate};
pub use store::{InMemoryStore, Store};
pub use stream::{StreamData, StreamMode, StreamPart};
pub use types::{
    CachePolicy, Command, Durability, Interrupt, NodeError, NodeErrorKind, NodeOutput, NodeSet, Packet,
    Resume, RetryPolicy, Route, Routes, Send, END, START,
};

#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
