//! [`RunKwargs`]: what a run row keeps of its request, and how the worker reads it.

use super::options::{Command, Durability, NodeSelection, OnDisconnect};
use crate::json::JsonRunRequest;
use crate::stream::{WireMode, WireModes};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The configuration of a run (the assistant's with the request's over it): the keys the
/// server reads, and the rest as given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Superstep limit (checked at the edge: 1 to 1,000,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_limit: Option<usize>,
    /// LangGraph's `configurable`: the run's context when it gives none of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configurable: Option<Value>,
    /// Every other key, kept for the client.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A run's `kwargs`: its request as the server resolved it (the assistant's config and
/// context merged in, the checkpoint to start from, the defaults filled in), plus what the
/// server adds (`graph_id`, `assistant_id`, `owner`, `temporary`). The runs service writes
/// it to the run row; clients read it from `GET /runs/{id}` (without `owner`); the worker
/// reads it back to execute the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunKwargs {
    /// Input: a partial update of the graph's state.
    #[serde(default)]
    pub input: Option<Value>,
    /// Instead of input: a command.
    #[serde(default)]
    pub command: Option<Command>,
    /// Configuration.
    #[serde(default)]
    pub config: RunConfig,
    /// Context handed to nodes.
    #[serde(default)]
    pub context: Value,
    /// Metadata of the run (copied to its checkpoints).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Stream modes.
    #[serde(default = "default_modes")]
    pub stream_mode: Vec<WireMode>,
    /// Include subgraph events.
    #[serde(default)]
    pub stream_subgraphs: bool,
    /// Keep the run's events for replay after it ends.
    #[serde(default)]
    pub stream_resumable: bool,
    /// Pause before these nodes.
    #[serde(default)]
    pub interrupt_before: Option<NodeSelection>,
    /// Pause after these nodes.
    #[serde(default)]
    pub interrupt_after: Option<NodeSelection>,
    /// Start from this checkpoint: a fork.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// When checkpoints become durable (`None`: `sync`).
    #[serde(default)]
    pub durability: Option<Durability>,
    /// What a streaming client's disconnect does.
    #[serde(default)]
    pub on_disconnect: OnDisconnect,
    /// Where the run's end is POSTed.
    #[serde(default)]
    pub webhook: Option<String>,
    /// Stored.
    #[serde(default)]
    pub feedback_keys: Option<Value>,
    /// The graph the run executes.
    #[serde(default)]
    pub graph_id: String,
    /// The assistant (resolved: an id, never a graph id).
    #[serde(default)]
    pub assistant_id: String,
    /// A stateless run's temporary thread, deleted when the run ends.
    #[serde(default)]
    pub temporary: bool,
    /// The principal the run acts for (`""` with auth off); not shown to clients.
    #[serde(default)]
    pub owner: String,
    /// A run the thread protocol started: its events are what the protocol's channels
    /// read. Its `checkpoints` events carry each checkpoint's envelope (`config`,
    /// `parent_config`, `metadata`), not its state, next nodes and tasks; its `messages`
    /// events are the models' chunks, not the messages nodes return (those show in its
    /// `updates` and `values`). Absent (false) for every other run, and in rows written
    /// before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thread_protocol: bool,
}

/// Why a run row's kwargs do not read: the field's path and the cause.
pub type KwargsError = serde_path_to_error::Error<serde_json::Error>;

fn default_modes() -> Vec<WireMode> {
    vec![WireMode::Values]
}

/// What the readers of a run's events need of its kwargs, read without the rest (the
/// input, the config): whether its events are kept for replay, and its graph. The fields
/// are [`RunKwargs`]' own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct StreamFacts {
    /// [`RunKwargs::stream_resumable`].
    #[serde(default)]
    pub stream_resumable: bool,
    /// [`RunKwargs::graph_id`].
    #[serde(default)]
    pub graph_id: String,
}

impl StreamFacts {
    /// The facts of a run row's kwargs; `None` when they are not an object of the
    /// kwargs' shape.
    #[must_use]
    pub fn of(kwargs: &Value) -> Option<Self> {
        Self::deserialize(kwargs).ok()
    }
}

impl RunKwargs {
    /// The kwargs of a run row.
    ///
    /// # Errors
    /// When the row's JSON is not a run's kwargs (a row written by hand, or damaged); the
    /// error names the field's path.
    pub fn of(kwargs: &Value) -> Result<Self, KwargsError> {
        serde_path_to_error::deserialize(kwargs)
    }

    /// The kwargs as the run row stores them.
    #[must_use]
    pub fn to_value(&self) -> Value {
        // Every field is a JSON value, a string, a number or a map with string keys.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The wire stream modes the client asked for.
    #[must_use]
    pub fn wire_modes(&self) -> WireModes {
        WireModes::from_modes(&self.stream_mode)
    }

    /// The context handed to nodes: the run's own (a non-empty object), else the config's
    /// `configurable`.
    fn node_context(&self) -> Option<Value> {
        match &self.context {
            Value::Object(m) if !m.is_empty() => Some(self.context.clone()),
            _ => self.config.configurable.clone().filter(Value::is_object),
        }
    }

    /// The graph request of run `run_id` on `thread_id`. A run that `started` already
    /// (taken over after a crash, with a checkpoint of its own) continues from its
    /// checkpoint instead of applying its input, command or fork again. The caller adds
    /// what only the worker has (stream modes, timeout, cancel token, hooks, store).
    #[must_use]
    pub fn graph_request(&self, run_id: &str, thread_id: &str, started: bool) -> JsonRunRequest {
        let mut metadata = self.metadata.clone();
        metadata.insert("graph_id".into(), Value::String(self.graph_id.clone()));
        metadata.insert("assistant_id".into(), Value::String(self.assistant_id.clone()));
        let fresh = !started;
        JsonRunRequest {
            input: self.input.clone().filter(|v| fresh && !v.is_null()),
            command: self
                .command
                .as_ref()
                .filter(|_| fresh)
                .map(Command::to_json_command),
            thread_id: Some(thread_id.to_owned()),
            checkpoint_id: self.checkpoint_id.clone().filter(|_| fresh),
            recursion_limit: self.config.recursion_limit,
            interrupt_before: self
                .interrupt_before
                .as_ref()
                .map(NodeSelection::node_set)
                .unwrap_or_default(),
            interrupt_after: self
                .interrupt_after
                .as_ref()
                .map(NodeSelection::node_set)
                .unwrap_or_default(),
            durability: self.durability.unwrap_or_default().into(),
            context: self.node_context(),
            configurable: self.config.configurable.clone().filter(Value::is_object),
            metadata,
            run_id: Some(run_id.to_owned()),
            subgraphs: self.stream_subgraphs,
            checkpoint_events: if self.thread_protocol {
                graphloom_core::CheckpointEvents::Envelope
            } else {
                graphloom_core::CheckpointEvents::Full
            },
            // Its `messages` channel reads the models' chunks alone.
            message_events: if self.thread_protocol {
                graphloom_core::MessageEvents::ModelChunks
            } else {
                graphloom_core::MessageEvents::All
            },
            // Its checkpoint envelopes are kept for the `checkpoints` channel: its first
            // node need not wait for its input's save.
            early_checkpoint_events: self.thread_protocol,
            ..JsonRunRequest::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The JSON a run row held before the kwargs were typed: it reads the same.
    #[test]
    fn stored_kwargs_keep_their_shape() {
        let stored = json!({
            "input": {"messages": [{"role": "user", "content": "hi"}]},
            "command": null,
            "config": {"recursion_limit": 5, "configurable": {"user": "u1"}, "tags": ["a"]},
            "context": {},
            "metadata": {"m": 1},
            "stream_mode": ["values", "messages-tuple"],
            "stream_subgraphs": false,
            "stream_resumable": true,
            "interrupt_before": "*",
            "interrupt_after": null,
            "checkpoint_id": null,
            "durability": "async",
            "on_disconnect": "continue",
            "webhook": null,
            "feedback_keys": null,
            "graph_id": "echo",
            "assistant_id": "a1",
            "temporary": false,
            "owner": "ann",
        });
        let kw = RunKwargs::of(&stored).unwrap();
        assert_eq!(kw.to_value(), stored);
        assert_eq!(kw.config.recursion_limit, Some(5));
        let req = kw.graph_request("r1", "t1", false);
        assert_eq!(req.context, Some(json!({"user": "u1"})));
        assert_eq!(req.durability, graphloom_core::Durability::Async);
        assert_eq!(req.interrupt_before, graphloom_core::NodeSet::All);
        assert_eq!(req.metadata["graph_id"], "echo");
        assert!(req.input.is_some());
        assert!(kw.graph_request("r1", "t1", true).input.is_none());
    }

    /// The two facts a stream reads are the kwargs' own, read from the row as written.
    #[test]
    fn stream_facts_read_the_kwargs_fields() {
        let kw = RunKwargs {
            stream_resumable: true,
            graph_id: "echo".into(),
            input: Some(json!({"n": 1})),
            ..RunKwargs::default()
        };
        let facts = StreamFacts::of(&kw.to_value()).unwrap();
        assert_eq!((facts.stream_resumable, facts.graph_id.as_str()), (true, "echo"));
        assert_eq!(
            StreamFacts::of(&json!({"input": 1})),
            Some(StreamFacts::default())
        );
        assert_eq!(StreamFacts::of(&json!({"stream_resumable": "yes"})), None);
        assert_eq!(StreamFacts::of(&json!(7)), None);
    }

    /// A row of only the keys an older server or a test wrote.
    #[test]
    fn sparse_kwargs_take_the_defaults() {
        let kw = RunKwargs::of(&json!({"input": {"n": 1}, "graph_id": "echo", "owner": ""})).unwrap();
        assert_eq!(kw.stream_mode, [WireMode::Values]);
        assert_eq!(kw.on_disconnect, OnDisconnect::Continue);
        assert!(RunKwargs::of(&json!({"stream_mode": "values"})).is_err());
    }
}
