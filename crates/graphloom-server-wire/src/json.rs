//! A run in JSON terms: what a hosted graph is asked to do ([`JsonRunRequest`], with a
//! [`JsonCommand`]) and what it answers ([`JsonRunEvent`]s, ending with a
//! [`JsonRunOutput`] or an error).

use graphloom_core::checkpoint::CheckpointConfig;
use graphloom_core::store::DynStore;
use graphloom_core::{Durability, Interrupt, NodeSet, StreamMode};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// A `Command` as JSON: `{update, resume, goto}`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonCommand {
    /// A state update applied before resuming.
    pub update: Option<Value>,
    /// A resume value, or a map from interrupt id to value.
    pub resume: Option<Value>,
    /// Nodes to go to: names, or `{"node": .., "input": ..}` sends.
    pub goto: Vec<Value>,
}

/// A run request in JSON terms.
#[derive(Clone, Default)]
pub struct JsonRunRequest {
    /// New input. `None` (and no command) continues from the checkpoint.
    pub input: Option<Value>,
    /// A command (resume, update, goto).
    pub command: Option<JsonCommand>,
    /// Thread id (stateless runs get a temporary one).
    pub thread_id: Option<String>,
    /// Start from this checkpoint instead of the latest.
    pub checkpoint_id: Option<String>,
    /// Superstep limit.
    pub recursion_limit: Option<usize>,
    /// Pause before these nodes.
    pub interrupt_before: NodeSet,
    /// Pause after these nodes.
    pub interrupt_after: NodeSet,
    /// Durability mode.
    pub durability: Durability,
    /// Run timeout.
    pub timeout: Option<Duration>,
    /// Context handed to nodes (as a `serde_json::Value` in the runtime's context).
    pub context: Option<Value>,
    /// The run config's `configurable`, as the client gave it (with what the server adds:
    /// the authenticated user). A graph of LangGraph's reads it from its config; a Rust
    /// graph gets it as [`Self::context`] when the run gives no context of its own.
    pub configurable: Option<Value>,
    /// Metadata written to the run's checkpoints.
    pub metadata: Map<String, Value>,
    /// Run id.
    pub run_id: Option<String>,
    /// Stream modes to produce.
    pub modes: Vec<StreamMode>,
    /// Include subgraph events.
    pub subgraphs: bool,
    /// Cancels the run (pass it on as `RunConfig::cancel`).
    pub cancel: Option<graphloom_core::CancelToken>,
    /// Drains the run: it stops at its next step boundary (pass it on as
    /// `RunConfig::control`). The worker drains its runs at a graceful shutdown; a graph
    /// that cannot drain ignores it and is cancelled after the grace period.
    pub control: Option<graphloom_core::RunControl>,
    /// Told as each root task ends (pass it on as `RunConfig::on_task_end`); the worker
    /// times nodes with it.
    pub on_task_end: Option<graphloom_core::TaskObserver>,
    /// Told when the run completes, alongside its last checkpoint's put (pass it on as
    /// `RunConfig::on_complete`); the worker records the outcome with it.
    pub on_complete: Option<graphloom_core::CompletionHook>,
    /// The run's store instead of the graph's (pass it on as `RunConfig::store`); the
    /// worker hands a run with auth on its owner's scoped store.
    pub store: Option<Arc<dyn DynStore>>,
    /// What `checkpoints` events carry (pass it on as `RunConfig::checkpoint_events`): a
    /// thread-protocol run keeps only their envelopes.
    pub checkpoint_events: graphloom_core::CheckpointEvents,
    /// What `messages` events carry (pass it on as `RunConfig::message_events`): a
    /// thread-protocol run keeps only the models' chunks.
    pub message_events: graphloom_core::MessageEvents,
    /// Whether `checkpoints` events may come before their save is done (pass it on as
    /// `RunConfig::early_checkpoint_events`): a thread-protocol run, which keeps them for
    /// its `checkpoints` channel.
    pub early_checkpoint_events: bool,
}

impl std::fmt::Debug for JsonRunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonRunRequest")
            .field("input", &self.input)
            .field("command", &self.command)
            .field("thread_id", &self.thread_id)
            .field("checkpoint_id", &self.checkpoint_id)
            .field("run_id", &self.run_id)
            .field("modes", &self.modes)
            .field("store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

/// How a run ended, in JSON.
#[derive(Clone, Debug)]
pub struct JsonRunOutput {
    /// Final values.
    pub values: Value,
    /// Pending interrupts (empty when done).
    pub interrupts: Vec<Interrupt>,
    /// Whether it paused (static or dynamic interrupt).
    pub interrupted: bool,
    /// The checkpoint it ended on.
    pub checkpoint: Option<CheckpointConfig>,
}

/// One event of a run: a stream part, or the end (exactly once, last).
#[derive(Debug)]
pub enum JsonRunEvent {
    /// A part in one of the requested modes.
    Part {
        /// Mode.
        mode: StreamMode,
        /// Subgraph namespace (empty for the root graph).
        ns: Vec<String>,
        /// Payload in the mode's JSON shape.
        data: Value,
    },
    /// The end.
    End(Result<JsonRunOutput, graphloom_core::Error>),
}

/// A failure raised in a graph of another language (a Python graph's exception): the
/// error's class name and its own message, which a run's `error` event reports as they are
/// (`{"error": "ValueError", "message": "..."}`), as LangGraph Server does. Put it as the
/// source of the [`graphloom_core::Error`] the run ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignError {
    /// The exception's class name, e.g. `ValueError`.
    pub class: String,
    /// Its message.
    pub message: String,
}

impl std::fmt::Display for ForeignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.class)
        } else {
            write!(f, "{}: {}", self.class, self.message)
        }
    }
}

impl std::error::Error for ForeignError {}
