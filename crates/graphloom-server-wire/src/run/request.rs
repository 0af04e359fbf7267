//! [`RunRequest`]: the body of every run-creating route.

use super::options::{
    CheckpointRef, Command, Durability, IfNotExists, NodeSelection, OnCompletion, OnDisconnect, OneOrMany,
};
use crate::stream::WireMode;
use graphloom_server_db::models::MultitaskStrategy;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A run request (every run-creating route), parsed once at the edge: a field of the
/// wrong type or an unknown word answers 422 naming the field's path.
///
/// Two fields are checked beyond their type at the edge, against the bounds in
/// `api/bounds.rs`: `after_seconds` and `config` (an object whose `recursion_limit` is in
/// range); they keep their JSON type here so those checks can name the value.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = RunBody)]
pub struct RunRequest {
    /// The assistant to run: an assistant id, or a graph id for its system assistant.
    pub assistant_id: String,
    /// Input: a partial update of the graph's state (its input schema).
    #[serde(default)]
    pub input: Option<Value>,
    /// Instead of input: `{"update", "resume", "goto"}`.
    #[serde(default)]
    #[schema(inline)]
    pub command: Option<Command>,
    /// Metadata of the run (copied to its checkpoints).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// Run configuration (`recursion_limit`, `configurable`, ...), merged over the
    /// assistant's.
    #[serde(default)]
    pub config: Option<Value>,
    /// Context handed to nodes, merged over the assistant's.
    #[serde(default)]
    pub context: Option<Value>,
    /// Start from this checkpoint (`{"checkpoint_id": ...}`): a fork.
    #[serde(default)]
    #[schema(inline)]
    pub checkpoint: Option<CheckpointRef>,
    /// Start from this checkpoint id: a fork.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// Pause before these nodes (a list of names, or `"*"`).
    #[serde(default)]
    #[schema(inline)]
    pub interrupt_before: Option<NodeSelection>,
    /// Pause after these nodes (a list of names, or `"*"`).
    #[serde(default)]
    #[schema(inline)]
    pub interrupt_after: Option<NodeSelection>,
    /// Stream modes: one or a list of `values`, `updates`, `messages`, `messages-tuple`,
    /// `custom`, `events`, `debug`, `tasks`, `checkpoints` (default `values`).
    #[serde(default)]
    #[schema(inline)]
    pub stream_mode: Option<OneOrMany<WireMode>>,
    /// Include subgraph events.
    #[serde(default)]
    pub stream_subgraphs: Option<bool>,
    /// Keep the run's events for replay (`Last-Event-ID`) after it ends.
    #[serde(default)]
    pub stream_resumable: Option<bool>,
    /// When the thread already has an active run: `reject`, `interrupt`, `rollback` or
    /// `enqueue` (the default).
    #[serde(default)]
    #[schema(inline)]
    pub multitask_strategy: Option<MultitaskStrategy>,
    /// When the thread does not exist: `reject` (404, the default) or `create`.
    #[serde(default)]
    #[schema(inline)]
    pub if_not_exists: Option<IfNotExists>,
    /// Start the run this many seconds from now (at most one year).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 31_536_000)]
    pub after_seconds: Option<f64>,
    /// `sync`, `async` or `exit`: when checkpoints become durable.
    #[serde(default)]
    #[schema(inline)]
    pub durability: Option<Durability>,
    /// When a streaming client disconnects: `continue` (the default) or `cancel`.
    #[serde(default)]
    #[schema(inline)]
    pub on_disconnect: Option<OnDisconnect>,
    /// For stateless runs: `delete` the temporary thread (the default) or `keep` it.
    #[serde(default)]
    #[schema(inline)]
    pub on_completion: Option<OnCompletion>,
    /// A URL the run's end is POSTed to (see the server's `webhook` module): https, and
    /// not a loopback, private or link-local host unless the server allows it.
    #[serde(default)]
    pub webhook: Option<String>,
    /// Accepted and stored.
    #[serde(default)]
    pub feedback_keys: Option<Value>,
    /// A run of the thread protocol (see
    /// [`RunKwargs::thread_protocol`](crate::run::RunKwargs::thread_protocol)): set by its
    /// commands, never read from a request.
    #[serde(skip)]
    pub thread_protocol: bool,
}

impl RunRequest {
    /// The checkpoint to start from: `checkpoint_id`, or `checkpoint.checkpoint_id`.
    #[must_use]
    pub fn start_checkpoint(&self) -> Option<String> {
        self.checkpoint_id
            .clone()
            .or_else(|| self.checkpoint.as_ref().and_then(|c| c.checkpoint_id.clone()))
    }

    /// Whether the request gives both an input and a command (one is allowed).
    #[must_use]
    pub fn has_input_and_command(&self) -> bool {
        self.input.as_ref().is_some_and(|v| !v.is_null()) && self.command.is_some()
    }
}
