//! Graphs as the server sees them: type-erased, JSON in and JSON out.
//!
//! A graph is registered as a factory that compiles it against the server's checkpointer
//! and store ([`GraphDeps`]); [`HostedGraph`] is implemented for every
//! [`CompiledGraph<S>`](graphloom_core::CompiledGraph).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use graphloom_core::checkpoint::{CheckpointConfig, DynCheckpointer};
use graphloom_core::store::DynStore;
use graphloom_core::{Durability, Interrupt, NodeSet, StreamMode};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What a graph is compiled against inside the server.
#[derive(Clone)]
pub struct GraphDeps {
    /// The server's checkpointer (SQLite or PostgreSQL).
    pub checkpointer: Arc<dyn DynCheckpointer>,
    /// The server's store.
    pub store: Arc<dyn DynStore>,
}

/// Builds a graph against the server's persistence.
pub type GraphFactory = Arc<dyn Fn(&GraphDeps) -> graphloom_core::Result<Arc<dyn HostedGraph>> + Send + Sync>;

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
#[derive(Clone, Debug, Default)]
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
    /// Metadata written to the run's checkpoints.
    pub metadata: Map<String, Value>,
    /// Run id.
    pub run_id: Option<String>,
    /// Stream modes to produce.
    pub modes: Vec<StreamMode>,
    /// Include subgraph events.
    pub subgraphs: bool,
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

/// A compiled graph behind JSON.
pub trait HostedGraph: Send + Sync + 'static {
    /// Node names, sorted.
    fn node_names(&self) -> Vec<String>;
    /// JSON Schema of the input (the state's update shape).
    fn input_schema(&self) -> Value;
    /// JSON Schema of the output.
    fn output_schema(&self) -> Value;
    /// JSON Schema of the state.
    fn state_schema(&self) -> Value;
    /// The drawing data: `{"nodes": [{"id", "type", "data"}], "edges": [{"source", "target", "conditional"}]}`.
    fn drawing(&self) -> Value;
    /// Mermaid text.
    fn mermaid(&self) -> String;
    /// Run and stream.
    fn stream(&self, req: JsonRunRequest) -> BoxStream<'static, JsonRunEvent>;
    /// The thread's state (latest, or at a checkpoint) as a LangGraph `ThreadState` JSON
    /// object; `None` when the thread has no checkpoint.
    fn get_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Value>>>;
    /// History, newest first, as `ThreadState` objects.
    fn history<'a>(
        &'a self,
        thread_id: &'a str,
        filter: Map<String, Value>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, graphloom_core::Result<Vec<Value>>>;
    /// Apply `values` as if `as_node` wrote them; returns the new checkpoint.
    fn update_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
        values: Option<Value>,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<CheckpointConfig>>;
}
