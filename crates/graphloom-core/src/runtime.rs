//! [`Runtime`]: what a node gets besides its input — config, context, store, stream
//! writer, and `interrupt()`.

use crate::checkpoint::DynCheckpointer;
use crate::store::DynStore;
use crate::stream::{StreamData, StreamMode, StreamPart};
use crate::types::{Interrupt, NodeError};
use serde_json::{json, Map, Value};
use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// Where stream parts go, and which modes are wanted.
#[derive(Clone)]
pub(crate) struct StreamSink {
    pub tx: UnboundedSender<StreamPart>,
    pub modes: u8,
    pub subgraphs: bool,
}

pub(crate) fn mode_bit(m: StreamMode) -> u8 {
    1 << (m as u8)
}

impl StreamSink {
    pub fn new(tx: UnboundedSender<StreamPart>, modes: &[StreamMode], subgraphs: bool) -> Self {
        Self {
            tx,
            modes: modes.iter().fold(0, |acc, m| acc | mode_bit(*m)),
            subgraphs,
        }
    }
}

/// State shared by every task of one run (and its subgraphs).
pub(crate) struct RunShared {
    pub run_id: String,
    pub thread_id: Option<String>,
    pub store: Option<Arc<dyn DynStore>>,
    pub checkpointer: Option<Arc<dyn DynCheckpointer>>,
    pub context: Option<Arc<dyn Any + Send + Sync>>,
    pub sink: Option<StreamSink>,
    /// Resume values of this run, by interrupt id.
    pub resume: Mutex<HashMap<String, Value>>,
    /// Step limit and durability of the run, inherited by subgraphs.
    pub recursion_limit: usize,
    pub durability: crate::types::Durability,
    /// Told about each root task as it ends.
    pub on_task_end: Option<crate::config::TaskObserver>,
    /// Ids of the messages `messages` mode has emitted (chunks or whole), so none is
    /// emitted whole twice. Untouched unless the run streams `messages`.
    pub seen_messages: Mutex<HashSet<String>>,
    /// What `checkpoints` events carry, at every depth.
    pub checkpoint_events: crate::stream::CheckpointEvents,
    /// What `messages` events carry, at every depth.
    pub message_events: crate::stream::MessageEvents,
    /// `checkpoints` events need not wait for their save ([`crate::RunConfig::early_checkpoint_events`]).
    pub early_checkpoint_events: bool,
}

impl RunShared {
    /// Whether a part of `mode` from namespace depth `depth` is wanted.
    /// `events` are wanted at every depth: their nesting is in `parent_ids`.
    pub fn wants(&self, mode: StreamMode, depth: usize) -> bool {
        self.sink.as_ref().is_some_and(|s| {
            s.modes & mode_bit(mode) != 0 && (depth == 0 || s.subgraphs || mode == StreamMode::Events)
        })
    }
    /// Whether a part of `mode` is wanted at some depth.
    pub fn wants_any(&self, mode: StreamMode) -> bool {
        self.sink.as_ref().is_some_and(|s| s.modes & mode_bit(mode) != 0)
    }
    pub fn emit(&self, ns: &[String], mode: StreamMode, data: StreamData) {
        if let Some(sink) = &self.sink {
            if self.wants(mode, ns.len()) {
                let _ = sink.tx.send(StreamPart {
                    ns: ns.to_vec(),
                    mode,
                    data,
                });
            }
        }
    }
    /// Record `id` as emitted in `messages` mode; false if it already was.
    pub fn mark_message_seen(&self, id: &str) -> bool {
        let mut seen = self
            .seen_messages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.contains(id) {
            return false;
        }
        seen.insert(id.to_owned())
    }
    pub fn take_resume(&self, id: &str) -> Option<Value> {
        let guard = self
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.get(id).cloned()
    }
}

/// Per-task data behind a [`Runtime`].
pub(crate) struct TaskCtx {
    pub run: Arc<RunShared>,
    pub node: String,
    pub task_id: String,
    pub step: i64,
    pub triggers: Vec<String>,
    /// For a task run for a `Send` packet: the packet's index in its step.
    pub push: Option<usize>,
    /// Namespace segments of the graph this task runs in.
    pub ns: Arc<[String]>,
    pub remaining_steps: usize,
    /// Resume values this task already received (persisted as its `__resume__` write).
    pub resumed: BTreeMap<String, Value>,
    /// Resume values taken from the run during this attempt.
    pub consumed: Mutex<BTreeMap<String, Value>>,
    pub interrupt_idx: AtomicUsize,
    /// Numbers handed out by [`Runtime::next_sequence`] during this attempt.
    pub sequence: AtomicUsize,
    /// This task's place in the `events` tree; `None` unless the run streams events.
    pub events: Option<Arc<crate::events::EventScope>>,
    /// The checkpoint this task runs from and its saver, when the run persists (the
    /// functional API saves each finished `task` call against it).
    pub step_checkpoint: Option<Arc<StepCheckpoint>>,
    /// This attempt's progress clock, when its node has an idle timeout.
    pub progress: Option<Arc<crate::timeout::Progress>>,
    /// The failure an error handler handles; `None` in a node.
    pub failure: Option<Arc<crate::node_failure::NodeFailure>>,
}

/// The checkpoint a step's tasks run from, and the saver its writes go to.
pub(crate) struct StepCheckpoint {
    pub saver: Arc<dyn DynCheckpointer>,
    pub config: crate::checkpoint::CheckpointConfig,
}

/// The handle every node receives.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) ctx: Arc<TaskCtx>,
}

/// Id of the `idx`-th interrupt of task `task_id` in namespace `ns`.
#[must_use]
pub fn interrupt_id(ns: &[String], task_id: &str, idx: usize) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for seg in ns {
        h.update(seg.as_bytes());
        h.update(b"|");
    }
    h.update(task_id.as_bytes());
    h.update(b"#");
    h.update(idx.to_string().as_bytes());
    format!("{:032x}", h.digest128())
}

impl Runtime {
    /// Pause the run and ask the caller for a value.
    ///
    /// The first time, this returns `Err(NodeError::Interrupted)`; propagate it with `?`.
    /// When the caller resumes (`Command::resume`), the node runs again from its start and
    /// this call returns the resume value. Several calls in one node are matched by their
    /// order; every call has its own id.
    pub fn interrupt(&self, value: impl serde::Serialize) -> Result<Value, NodeError> {
        self.interrupt_inner(value, None)
    }

    /// [`Runtime::interrupt`] with a JSON Schema for the answer (LangGraph's
    /// `interrupt(value, response_schema=..)`): the schema travels with the interrupt (in
    /// the state's interrupts, the server's JSON, the thread protocol's `input.requested`),
    /// and a resume whose value does not match it is refused with
    /// [`Error::InvalidResume`](crate::Error::InvalidResume) before the node runs again;
    /// nothing is saved, so the interrupt can be answered again. A schema that is not
    /// valid JSON Schema fails the node.
    ///
    /// ```
    /// # use graphloom_core::{NodeError, Runtime};
    /// # fn ask(rt: &Runtime) -> Result<(), NodeError> {
    /// let schema = serde_json::json!({
    ///     "type": "object",
    ///     "properties": {"approved": {"type": "boolean"}},
    ///     "required": ["approved"],
    /// });
    /// let answer = rt.interrupt_with_schema("ship it?", schema)?;
    /// let approved = answer["approved"].as_bool() == Some(true);
    /// # let _ = approved; Ok(()) }
    /// ```
    pub fn interrupt_with_schema(
        &self,
        value: impl serde::Serialize,
        response_schema: Value,
    ) -> Result<Value, NodeError> {
        if let Err(e) = jsonschema::validator_for(&response_schema) {
            return Err(NodeError::fatal(format!(
                "the interrupt's response schema is not a valid JSON Schema: {e}"
            )));
        }
        self.interrupt_inner(value, Some(response_schema))
    }

    /// [`Runtime::interrupt_with_schema`] with the JSON Schema of `T`, and the answer
    /// decoded into a `T`.
    pub fn interrupt_for<T: schemars::JsonSchema + serde::de::DeserializeOwned>(
        &self,
        value: impl serde::Serialize,
    ) -> Result<T, NodeError> {
        let schema = serde_json::to_value(schemars::schema_for!(T)).map_err(NodeError::terminal)?;
        let answer = self.interrupt_with_schema(value, schema)?;
        serde_json::from_value(answer).map_err(NodeError::terminal)
    }

    fn interrupt_inner(
        &self,
        value: impl serde::Serialize,
        response_schema: Option<Value>,
    ) -> Result<Value, NodeError> {
        let idx = self.ctx.interrupt_idx.fetch_add(1, Ordering::SeqCst);
        let id = interrupt_id(&self.ctx.ns, &self.ctx.task_id, idx);
        if let Some(v) = self.ctx.resumed.get(&id) {
            return Ok(v.clone());
        }
        if let Some(v) = self.ctx.run.take_resume(&id) {
            let mut consumed = self
                .ctx
                .consumed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            consumed.insert(id, v.clone());
            return Ok(v);
        }
        let value = serde_json::to_value(value).map_err(NodeError::terminal)?;
        Err(NodeError::Interrupted(vec![Interrupt {
            id,
            value,
            response_schema,
        }]))
    }

    /// The context value handed to the run, if it is a `T`.
    #[must_use]
    pub fn context<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.ctx.run.context.as_ref()?.downcast_ref::<T>()
    }

    /// The long-term memory store of the run: [`RunConfig::store`](crate::RunConfig::store)
    /// when the run was given one, else the graph's, if it has one. Subgraphs share their
    /// parent run's.
    #[must_use]
    pub fn store(&self) -> Option<&Arc<dyn DynStore>> {
        self.ctx.run.store.as_ref()
    }

    /// Tell the node's idle timeout ([`TimeoutPolicy::idle`](crate::TimeoutPolicy::idle))
    /// that the node is making progress, for work that shows none otherwise (a long
    /// computation, a poll). A no-op when the node has no idle timeout.
    pub fn heartbeat(&self) {
        if let Some(p) = &self.ctx.progress {
            p.heartbeat();
        }
    }

    /// Record visible progress (a write, a token): refreshes an idle timeout whose policy
    /// counts it.
    fn touch(&self) {
        if let Some(p) = &self.ctx.progress {
            p.touch();
        }
    }

    /// Write a `custom` stream event. Counts as progress for the node's idle timeout.
    pub fn write(&self, value: impl serde::Serialize) {
        self.touch();
        if self.ctx.run.wants(StreamMode::Custom, self.ctx.ns.len()) {
            if let Ok(v) = serde_json::to_value(value) {
                self.ctx
                    .run
                    .emit(&self.ctx.ns, StreamMode::Custom, StreamData::Json(v));
            }
        }
    }

    /// Whether anyone listens to `messages` events (skip building chunks otherwise).
    #[must_use]
    pub fn wants_messages(&self) -> bool {
        self.ctx.run.wants(StreamMode::Messages, self.ctx.ns.len())
    }

    /// Whether anyone listens to `events` (skip building their inputs otherwise).
    #[must_use]
    pub fn wants_events(&self) -> bool {
        self.ctx.events.is_some()
    }

    /// Start reporting a run nested in this node (a model call, a tool call) as
    /// `astream_events` events: reports its start (`on_chat_model_start`,
    /// `on_tool_start`, ...) with `input`, and returns the handle that reports its
    /// chunks and end. Its metadata is the node's plus `checkpoint_ns` and `extra`; its
    /// tags `seq:step:1`, as LangChain tags what a node calls. `None` (and nothing built)
    /// when the run does not stream events; check [`Runtime::wants_events`] before
    /// building an expensive `input`.
    #[must_use]
    pub fn event_run(
        &self,
        ty: crate::events::RunType,
        name: &str,
        input: Value,
        extra: Map<String, Value>,
    ) -> Option<crate::events::EventRun> {
        self.touch();
        let task = self.ctx.events.as_ref()?;
        let mut meta = vec![("checkpoint_ns".to_owned(), Value::String(self.checkpoint_ns()))];
        meta.extend(extra);
        let scope = Arc::new(task.child(meta));
        Some(
            crate::events::EventRun::new(
                Arc::clone(&self.ctx.run),
                Arc::clone(&self.ctx.ns),
                ty,
                name.to_owned(),
                vec!["seq:step:1".to_owned()],
                scope,
            )
            .start(input, true),
        )
    }

    pub(crate) fn event_scope(&self) -> Option<&Arc<crate::events::EventScope>> {
        self.ctx.events.as_ref()
    }

    /// Emit a `messages` event: a message chunk (LangChain's `AIMessageChunk` JSON) with
    /// this task's metadata. Its `id` is recorded, so the whole message the node returns
    /// under that id is not emitted again.
    pub fn emit_message(&self, chunk: Value) {
        self.emit_message_with(chunk, Map::new());
    }

    /// [`Runtime::emit_message`] with `extra` added to the metadata (a model call adds
    /// `ls_provider`, `ls_model_name`, ...). A chunk counts as progress for the node's idle
    /// timeout, streamed or not.
    pub fn emit_message_with(&self, chunk: Value, extra: Map<String, Value>) {
        self.touch();
        if !self.wants_messages() {
            return;
        }
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            self.ctx.run.mark_message_seen(id);
        }
        let mut meta = self.metadata();
        if let Value::Object(m) = &mut meta {
            m.extend(extra);
        }
        let data = Value::Array(vec![chunk, meta]);
        self.ctx
            .run
            .emit(&self.ctx.ns, StreamMode::Messages, StreamData::Json(data));
    }

    /// Emit a whole message (its JSON, with an id) unless a message with its id was
    /// emitted already.
    pub(crate) fn emit_whole_message(&self, message: Value) {
        self.touch();
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return;
        };
        if !self.ctx.run.mark_message_seen(id) {
            return;
        }
        let data = Value::Array(vec![message, self.metadata()]);
        self.ctx
            .run
            .emit(&self.ctx.ns, StreamMode::Messages, StreamData::Json(data));
    }

    /// The task metadata LangGraph attaches to message events.
    #[must_use]
    pub fn metadata(&self) -> Value {
        let path = match self.ctx.push {
            Some(i) => json!(["__pregel_push", i]),
            None => json!(["__pregel_pull", self.ctx.node]),
        };
        json!({
            "langgraph_step": self.ctx.step,
            "langgraph_node": self.ctx.node,
            "langgraph_triggers": self.ctx.triggers,
            "langgraph_path": path,
            "langgraph_checkpoint_ns": self.checkpoint_ns(),
            "thread_id": self.ctx.run.thread_id,
            "run_id": self.ctx.run.run_id,
        })
    }

    /// This node's name.
    #[must_use]
    pub fn node(&self) -> &str {
        &self.ctx.node
    }
    /// This task's id (stable across retries and resumes).
    #[must_use]
    pub fn task_id(&self) -> &str {
        &self.ctx.task_id
    }
    /// The superstep number.
    #[must_use]
    pub fn step(&self) -> i64 {
        self.ctx.step
    }
    /// The thread id, if the run has one.
    #[must_use]
    pub fn thread_id(&self) -> Option<&str> {
        self.ctx.run.thread_id.as_deref()
    }
    /// The run id.
    #[must_use]
    pub fn run_id(&self) -> &str {
        &self.ctx.run.run_id
    }
    /// Supersteps left before the recursion limit.
    #[must_use]
    pub fn remaining_steps(&self) -> usize {
        self.ctx.remaining_steps
    }
    /// True when this is the last superstep the limit allows.
    #[must_use]
    pub fn is_last_step(&self) -> bool {
        self.ctx.remaining_steps <= 1
    }
    /// Namespace of a subgraph started by this task: the graph's namespace plus
    /// `node:task_id`.
    #[must_use]
    pub fn checkpoint_ns(&self) -> String {
        let mut s = self.ctx.ns.join("|");
        if !s.is_empty() {
            s.push('|');
        }
        s.push_str(&self.ctx.node);
        s.push(':');
        s.push_str(&self.ctx.task_id);
        s
    }
    /// An idempotency key for side effects of this task: stable across retries, resumes
    /// and crashes of the same task.
    #[must_use]
    pub fn idempotency_key(&self, suffix: &str) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(self.ctx.run.thread_id.as_deref().unwrap_or("").as_bytes());
        h.update(b"|");
        h.update(self.ctx.task_id.as_bytes());
        h.update(b"|");
        h.update(suffix.as_bytes());
        format!("{:032x}", h.digest128())
    }
    /// The next number (0, 1, 2, ...) of this task attempt's sequence: with
    /// [`Runtime::idempotency_key`], the id of the n-th side effect of a task (a model
    /// call, a payment), the same when the task runs again after a retry, a resume or a
    /// crash, since every attempt counts from 0. Everything in the task that calls it
    /// shares the sequence: keep those calls in a deterministic order.
    #[must_use]
    pub fn next_sequence(&self) -> usize {
        self.ctx.sequence.fetch_add(1, Ordering::SeqCst)
    }
    pub(crate) fn consumed_resumes(&self) -> BTreeMap<String, Value> {
        self.ctx
            .consumed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
    pub(crate) fn run(&self) -> &Arc<RunShared> {
        &self.ctx.run
    }
    pub(crate) fn ns(&self) -> &Arc<[String]> {
        &self.ctx.ns
    }
}
