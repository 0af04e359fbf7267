//! LangChain's `astream_events` (v2) vocabulary, built into every run.
//!
//! A run that streams [`crate::StreamMode::Events`] (or is read with
//! [`CompiledGraph::stream_events`](crate::CompiledGraph::stream_events)) reports:
//!
//! - `on_chain_start` / `on_chain_stream` / `on_chain_end` for the graph (named after it,
//!   `LangGraph` unless renamed), for each node's task (tags `graph:step:N`), and for a
//!   compiled graph run as a node (a chain nested in its node's, tags `seq:step:1`);
//! - `on_chat_model_start` / `on_chat_model_stream` / `on_chat_model_end` for each model
//!   call inside a node (graphloom-llm's models report them through [`EventRun`]);
//! - `on_tool_start` / `on_tool_end` / `on_tool_error` for each tool a `ToolNode` runs.
//!
//! Each event carries a `run_id` of its own, the `parent_ids` of the runs it is nested in
//! (outermost first), `tags`, `metadata` (`langgraph_step`, `langgraph_node`,
//! `langgraph_triggers`, `langgraph_path`, `langgraph_checkpoint_ns`, `thread_id`, and
//! `checkpoint_ns` inside a node) and `data` (`input`, `chunk`, `output`, `error`), shaped
//! and ordered as LangChain serialises them. A failing node reports no `on_chain_end`
//! (LangChain has no `on_chain_error` event); a failing tool reports `on_tool_error`.
//!
//! A run that does not stream events builds none of this: no id is drawn, no state is
//! turned into JSON.

use crate::runtime::RunShared;
use crate::stream::{StreamData, StreamMode};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The kind of a [`StreamEvent`], by its wire name (`on_chain_start`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// `on_chain_start`: a graph or a node starts.
    #[serde(rename = "on_chain_start")]
    ChainStart,
    /// `on_chain_stream`: a node's output, or a graph's `{node: update}`.
    #[serde(rename = "on_chain_stream")]
    ChainStream,
    /// `on_chain_end`: a graph or a node ends.
    #[serde(rename = "on_chain_end")]
    ChainEnd,
    /// `on_chat_model_start`: a model call starts.
    #[serde(rename = "on_chat_model_start")]
    ChatModelStart,
    /// `on_chat_model_stream`: one chunk of a model's answer.
    #[serde(rename = "on_chat_model_stream")]
    ChatModelStream,
    /// `on_chat_model_end`: the whole answer.
    #[serde(rename = "on_chat_model_end")]
    ChatModelEnd,
    /// `on_tool_start`: a tool is called.
    #[serde(rename = "on_tool_start")]
    ToolStart,
    /// `on_tool_end`: a tool returned.
    #[serde(rename = "on_tool_end")]
    ToolEnd,
    /// `on_tool_error`: a tool failed.
    #[serde(rename = "on_tool_error")]
    ToolError,
}

impl EventKind {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ChainStart => "on_chain_start",
            EventKind::ChainStream => "on_chain_stream",
            EventKind::ChainEnd => "on_chain_end",
            EventKind::ChatModelStart => "on_chat_model_start",
            EventKind::ChatModelStream => "on_chat_model_stream",
            EventKind::ChatModelEnd => "on_chat_model_end",
            EventKind::ToolStart => "on_tool_start",
            EventKind::ToolEnd => "on_tool_end",
            EventKind::ToolError => "on_tool_error",
        }
    }

    /// The run type the event belongs to, as LangChain's `include_types` filters it.
    #[must_use]
    pub fn run_type(self) -> RunType {
        match self {
            EventKind::ChainStart | EventKind::ChainStream | EventKind::ChainEnd => RunType::Chain,
            EventKind::ChatModelStart | EventKind::ChatModelStream | EventKind::ChatModelEnd => {
                RunType::ChatModel
            }
            EventKind::ToolStart | EventKind::ToolEnd | EventKind::ToolError => RunType::Tool,
        }
    }

    /// The start, stream or end event of a run of type `ty` (a tool has no stream event;
    /// its error event is [`EventRun::error`]'s).
    fn of(ty: RunType, phase: Phase) -> Self {
        match (ty, phase) {
            (RunType::Chain, Phase::Start) => EventKind::ChainStart,
            (RunType::Chain, Phase::Stream) => EventKind::ChainStream,
            (RunType::Chain, Phase::End) => EventKind::ChainEnd,
            (RunType::ChatModel, Phase::Start) => EventKind::ChatModelStart,
            (RunType::ChatModel, Phase::Stream) => EventKind::ChatModelStream,
            (RunType::ChatModel, Phase::End) => EventKind::ChatModelEnd,
            (RunType::Tool, Phase::Start) => EventKind::ToolStart,
            (RunType::Tool, Phase::Stream | Phase::End) => EventKind::ToolEnd,
        }
    }
}

#[derive(Clone, Copy)]
enum Phase {
    Start,
    Stream,
    End,
}

/// The type of a run that reports events (LangChain's `run_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunType {
    /// A graph or a node.
    Chain,
    /// A chat model call.
    ChatModel,
    /// A tool call.
    Tool,
}

impl RunType {
    /// The name `include_types` / `exclude_types` use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunType::Chain => "chain",
            RunType::ChatModel => "chat_model",
            RunType::Tool => "tool",
        }
    }
}

/// The `data` of a [`StreamEvent`]: which fields are set depends on the kind (`input` at
/// a start, `chunk` in a stream event, `output` and `input` at an end, `error`, `input`
/// and `tool_call_id` at a tool error).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct EventData {
    /// What the run was given.
    #[serde(default)]
    pub input: Option<Value>,
    /// One piece of a streamed output.
    #[serde(default)]
    pub chunk: Option<Value>,
    /// What the run returned.
    #[serde(default)]
    pub output: Option<Value>,
    /// Why the run failed.
    #[serde(default)]
    pub error: Option<Value>,
    /// The tool call a failed tool answered.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

impl Serialize for EventData {
    /// In LangChain's order: `chunk`, `error`, `output`, `input`, `tool_call_id`.
    fn serialize<Ser: Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(v) = &self.chunk {
            m.serialize_entry("chunk", v)?;
        }
        if let Some(v) = &self.error {
            m.serialize_entry("error", v)?;
        }
        if let Some(v) = &self.output {
            m.serialize_entry("output", v)?;
        }
        if let Some(v) = &self.input {
            m.serialize_entry("input", v)?;
        }
        if let Some(v) = &self.tool_call_id {
            m.serialize_entry("tool_call_id", v)?;
        }
        m.end()
    }
}

/// One `astream_events` (v2) event.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct StreamEvent {
    /// Its kind (`on_chain_start`, ...).
    pub event: EventKind,
    /// The graph, node, model or tool it is about.
    pub name: String,
    /// The id of the run it is about (one per graph run, task, model call, tool call).
    pub run_id: String,
    /// The ids of the runs it is nested in, outermost first.
    #[serde(default)]
    pub parent_ids: Vec<String>,
    /// Tags: `graph:step:N` on a node, `seq:step:1` on what a node calls.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Metadata: the run's, then the node's (`langgraph_node`, `langgraph_step`, ...).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Input, chunk, output or error.
    #[serde(default)]
    pub data: EventData,
}

impl Serialize for StreamEvent {
    /// In the order LangChain builds each kind: starts `event, data, name, tags, run_id,
    /// metadata, parent_ids`; stream events `event, run_id, name, tags, metadata, data,
    /// parent_ids`; ends and errors `event, data, run_id, name, tags, metadata,
    /// parent_ids`.
    fn serialize<Ser: Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut m = s.serialize_map(Some(7))?;
        m.serialize_entry("event", self.event.as_str())?;
        match self.event {
            EventKind::ChainStart | EventKind::ChatModelStart | EventKind::ToolStart => {
                m.serialize_entry("data", &self.data)?;
                m.serialize_entry("name", &self.name)?;
                m.serialize_entry("tags", &self.tags)?;
                m.serialize_entry("run_id", &self.run_id)?;
                m.serialize_entry("metadata", &self.metadata)?;
            }
            EventKind::ChainStream | EventKind::ChatModelStream => {
                m.serialize_entry("run_id", &self.run_id)?;
                m.serialize_entry("name", &self.name)?;
                m.serialize_entry("tags", &self.tags)?;
                m.serialize_entry("metadata", &self.metadata)?;
                m.serialize_entry("data", &self.data)?;
            }
            EventKind::ChainEnd | EventKind::ChatModelEnd | EventKind::ToolEnd | EventKind::ToolError => {
                m.serialize_entry("data", &self.data)?;
                m.serialize_entry("run_id", &self.run_id)?;
                m.serialize_entry("name", &self.name)?;
                m.serialize_entry("tags", &self.tags)?;
                m.serialize_entry("metadata", &self.metadata)?;
            }
        }
        m.serialize_entry("parent_ids", &self.parent_ids)?;
        m.end()
    }
}

/// Which events a consumer keeps, as LangChain's `include_*` / `exclude_*` arguments:
/// with no `include_*` list every event is a candidate, otherwise only those whose name,
/// run type or one of whose tags is included; then any event whose name, type or a tag is
/// excluded is dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Keep events of runs with these names.
    pub include_names: Vec<String>,
    /// Keep events of runs of these types.
    pub include_types: Vec<RunType>,
    /// Keep events of runs with one of these tags.
    pub include_tags: Vec<String>,
    /// Drop events of runs with these names.
    pub exclude_names: Vec<String>,
    /// Drop events of runs of these types.
    pub exclude_types: Vec<RunType>,
    /// Drop events of runs with one of these tags.
    pub exclude_tags: Vec<String>,
}

impl EventFilter {
    /// Every event.
    #[must_use]
    pub fn all() -> Self {
        Self::default()
    }
    /// Also keep runs named `name`.
    #[must_use]
    pub fn include_name(mut self, name: impl Into<String>) -> Self {
        self.include_names.push(name.into());
        self
    }
    /// Also keep runs of type `ty`.
    #[must_use]
    pub fn include_type(mut self, ty: RunType) -> Self {
        self.include_types.push(ty);
        self
    }
    /// Also keep runs tagged `tag`.
    #[must_use]
    pub fn include_tag(mut self, tag: impl Into<String>) -> Self {
        self.include_tags.push(tag.into());
        self
    }
    /// Drop runs named `name`.
    #[must_use]
    pub fn exclude_name(mut self, name: impl Into<String>) -> Self {
        self.exclude_names.push(name.into());
        self
    }
    /// Drop runs of type `ty`.
    #[must_use]
    pub fn exclude_type(mut self, ty: RunType) -> Self {
        self.exclude_types.push(ty);
        self
    }
    /// Drop runs tagged `tag`.
    #[must_use]
    pub fn exclude_tag(mut self, tag: impl Into<String>) -> Self {
        self.exclude_tags.push(tag.into());
        self
    }

    /// Whether `ev` passes.
    #[must_use]
    pub fn keeps(&self, ev: &StreamEvent) -> bool {
        let ty = ev.event.run_type();
        let included =
            (self.include_names.is_empty() && self.include_types.is_empty() && self.include_tags.is_empty())
                || self.include_names.contains(&ev.name)
                || self.include_types.contains(&ty)
                || ev.tags.iter().any(|t| self.include_tags.contains(t));
        included
            && !self.exclude_names.contains(&ev.name)
            && !self.exclude_types.contains(&ty)
            && !ev.tags.iter().any(|t| self.exclude_tags.contains(t))
    }
}

/// Where a run (graph, task, model or tool call) sits in the event tree: its id, the ids
/// above it, and the metadata its children inherit.
#[derive(Debug)]
pub(crate) struct EventScope {
    pub run_id: String,
    pub parent_ids: Vec<String>,
    pub metadata: Map<String, Value>,
}

impl EventScope {
    /// A scope nested in this one, with a fresh id and `metadata` added to the inherited.
    pub fn child(&self, metadata: impl IntoIterator<Item = (String, Value)>) -> EventScope {
        let mut parent_ids = Vec::with_capacity(self.parent_ids.len() + 1);
        parent_ids.extend(self.parent_ids.iter().cloned());
        parent_ids.push(self.run_id.clone());
        let mut meta = self.metadata.clone();
        meta.extend(metadata);
        EventScope {
            run_id: new_run_id(),
            parent_ids,
            metadata: meta,
        }
    }
}

pub(crate) fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// One run that reports events: a graph, a task, or (through
/// [`Runtime::event_run`](crate::Runtime::event_run), which reports its start) a model or
/// tool call inside a node. [`stream`](EventRun::stream), [`end`](EventRun::end) and
/// [`error`](EventRun::error) report the rest under the same `run_id`.
pub struct EventRun {
    run: Arc<RunShared>,
    ns: Arc<[String]>,
    ty: RunType,
    name: String,
    tags: Vec<String>,
    scope: Arc<EventScope>,
    input: Option<Value>,
}

impl std::fmt::Debug for EventRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRun")
            .field("name", &self.name)
            .field("run_id", &self.scope.run_id)
            .finish_non_exhaustive()
    }
}

impl EventRun {
    /// A run of type `ty` named `name` at `scope`; nothing is reported before
    /// [`EventRun::start`].
    pub(crate) fn new(
        run: Arc<RunShared>,
        ns: Arc<[String]>,
        ty: RunType,
        name: String,
        tags: Vec<String>,
        scope: Arc<EventScope>,
    ) -> Self {
        Self {
            run,
            ns,
            ty,
            name,
            tags,
            scope,
            input: None,
        }
    }

    /// Report the start (`input` goes into `data.input`; with `keep_input` it is repeated
    /// at the end, as LangChain does for everything but the root graph).
    pub(crate) fn start(mut self, input: Value, keep_input: bool) -> Self {
        self.send(
            EventKind::of(self.ty, Phase::Start),
            EventData {
                input: Some(input.clone()),
                ..EventData::default()
            },
        );
        if keep_input {
            self.input = Some(input);
        }
        self
    }

    /// The run's id.
    #[must_use]
    pub fn run_id(&self) -> &str {
        &self.scope.run_id
    }

    pub(crate) fn scope(&self) -> &Arc<EventScope> {
        &self.scope
    }

    fn send(&self, event: EventKind, data: EventData) {
        let ev = StreamEvent {
            event,
            name: self.name.clone(),
            run_id: self.scope.run_id.clone(),
            parent_ids: self.scope.parent_ids.clone(),
            tags: self.tags.clone(),
            metadata: self.scope.metadata.clone(),
            data,
        };
        self.run
            .emit(&self.ns, StreamMode::Events, StreamData::Event(Box::new(ev)));
    }

    /// Report a piece of the output (`on_chain_stream`, `on_chat_model_stream`).
    pub fn stream(&self, chunk: Value) {
        self.send(
            EventKind::of(self.ty, Phase::Stream),
            EventData {
                chunk: Some(chunk),
                ..EventData::default()
            },
        );
    }

    /// Report the end with the whole output.
    pub fn end(self, output: Value) {
        self.end_ref(output);
    }

    /// [`EventRun::end`] for a run shared behind an `Arc` (a graph's).
    pub(crate) fn end_ref(&self, output: Value) {
        let input = self.input.clone();
        self.send(
            EventKind::of(self.ty, Phase::End),
            EventData {
                output: Some(output),
                input,
                ..EventData::default()
            },
        );
    }

    /// Report a failure: `on_tool_error` for a tool (with the call's id); chains and
    /// models report none, as in LangChain. `error_type` and `message` go into
    /// `data.error` as LangGraph Server serialises an exception:
    /// `{"error": <type>, "message": <text>}`.
    pub fn error(self, error_type: &str, message: impl Into<String>, tool_call_id: Option<&str>) {
        if self.ty != RunType::Tool {
            return;
        }
        let input = self.input.clone();
        self.send(
            EventKind::ToolError,
            EventData {
                error: Some(serde_json::json!({"error": error_type, "message": message.into()})),
                input,
                tool_call_id: tool_call_id.map(str::to_owned),
                ..EventData::default()
            },
        );
    }
}
