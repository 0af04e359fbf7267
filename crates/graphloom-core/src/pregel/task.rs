//! Planning and running the tasks of one superstep.

use super::state::LoopState;
use crate::checkpoint::{self, PendingWrite};
use crate::error::{Error, ErrorSource};
use crate::graph::node::{InputKind, NodeInput};
use crate::graph::spec::GraphInner;
use crate::runtime::{RunShared, Runtime, TaskCtx};
use crate::state::State;
use crate::stream::StreamMode;
use crate::types::{Interrupt, NodeError, NodeErrorKind, NodeOutput, Packet, Route, Send};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

/// How a task was triggered.
#[derive(Clone)]
pub(crate) enum TaskKind {
    /// The start task applying the run's input.
    Start,
    /// A node triggered by these channels.
    Pull(Vec<String>),
    /// A node run for a `Send` packet (index in the step's packets).
    Push(usize, Packet),
}

/// A planned task.
#[derive(Clone)]
pub(crate) struct Task {
    pub id: String,
    pub node: String,
    pub kind: TaskKind,
}

impl Task {
    pub fn triggers(&self) -> Vec<String> {
        match &self.kind {
            TaskKind::Start => vec![super::state::START_CHANNEL.to_owned()],
            TaskKind::Pull(t) => t.clone(),
            TaskKind::Push(..) => vec![checkpoint::TASKS.to_owned()],
        }
    }
    pub fn path(&self) -> Value {
        match &self.kind {
            TaskKind::Push(i, _) => json!(["__pregel_push", i]),
            _ => json!(["__pregel_pull", self.node]),
        }
    }
}

/// Deterministic task id: the same checkpoint, namespace, step and trigger give the same id,
/// so writes saved before a crash are found again on resume.
pub(crate) fn task_id(checkpoint_id: &str, ns: &str, step: i64, node: &str, tag: &str) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [checkpoint_id, ns, &step.to_string(), node, tag] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    let x = h.digest128();
    let s = format!("{x:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &s[0..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    )
}

/// The tasks of the next superstep, in deterministic order: start, pull tasks by node
/// name, then push tasks in send order.
pub(crate) fn plan<S: State>(g: &GraphInner<S>, ls: &LoopState<S>, ns: &str) -> Vec<Task> {
    let mut tasks = Vec::new();
    let step = ls.step + 1;
    if ls.start.is_some() {
        tasks.push(Task {
            id: task_id(&ls.checkpoint_id, ns, step, crate::types::START, "start"),
            node: crate::types::START.to_owned(),
            kind: TaskKind::Start,
        });
    }
    let consider = |node: &str, tasks: &mut Vec<Task>| {
        let Some(triggers) = g.node_triggers.get(node) else {
            return;
        };
        let fired: Vec<String> = triggers
            .iter()
            .filter(|ch| {
                ls.version_newer(node, ch)
                    && (!ch.starts_with("join:") || g.join_complete(ch, ls.barriers.get(ch.as_str())))
            })
            .cloned()
            .collect();
        if !fired.is_empty() {
            tasks.push(Task {
                id: task_id(&ls.checkpoint_id, ns, step, node, "pull"),
                node: node.to_owned(),
                kind: TaskKind::Pull(fired),
            });
        }
    };
    match &ls.candidates {
        // A deferred node still waiting was triggered in an earlier step: consider it too.
        Some(c) if !g.deferred.is_empty() => {
            let mut all = c.clone();
            all.extend(g.deferred.iter().cloned());
            all.iter().for_each(|n| consider(n, &mut tasks));
        }
        Some(c) => c.iter().for_each(|n| consider(n, &mut tasks)),
        None => g.node_names.iter().for_each(|n| consider(n, &mut tasks)),
    }
    for (i, s) in ls.sends.iter().enumerate() {
        tasks.push(Task {
            id: task_id(&ls.checkpoint_id, ns, step, &s.node, &format!("push:{i}")),
            node: s.node.clone(),
            kind: TaskKind::Push(i, s.packet.clone()),
        });
    }
    if !g.deferred.is_empty() {
        hold_deferred(g, &mut tasks);
    }
    tasks
}

/// Deferred nodes wait while any other task is pending: their pull tasks leave the step
/// (their triggers stay unseen, so they are planned again) unless nothing else is left.
fn hold_deferred<S: State>(g: &GraphInner<S>, tasks: &mut Vec<Task>) {
    let is_deferred =
        |t: &Task| matches!(t.kind, TaskKind::Pull(_)) && g.deferred.binary_search(&t.node).is_ok();
    if tasks.iter().any(|t| !is_deferred(t)) {
        tasks.retain(|t| !is_deferred(t));
    }
}

/// What a finished task produced.
pub(crate) enum Outcome<S: State> {
    /// Success: an optional update and routes from a `Command`.
    Done {
        /// Shared with the `updates` stream, which reads it while the step goes on; the
        /// merge takes it back without a copy once the stream has let it go.
        update: Option<Arc<S::Update>>,
        goto: Vec<Route>,
        parent: Option<(Option<Value>, Vec<Route>)>,
        /// How the `updates` stream shows the task when its command joined writes that
        /// repeat a key: one `{key: value}` per write, in order ([`Command::writes`]).
        ///
        /// [`Command::writes`]: crate::types::Command::writes
        per_write: Option<Value>,
    },
    /// `interrupt()` was called; resume values the task consumed so far.
    Interrupted(Vec<Interrupt>, BTreeMap<String, Value>),
    /// Failed after retries.
    Failed(crate::error::Error),
    /// Failed after retries, and the node has an error handler to run.
    HandlerDue(Arc<crate::node_failure::NodeFailure>),
    /// The node's error handler ran in its place: its update and routes (the node's own
    /// edges are not followed).
    Handled {
        update: Option<Arc<S::Update>>,
        goto: Vec<Route>,
    },
}

impl<S: State> Outcome<S> {
    pub fn from_output(out: NodeOutput<S>) -> Self {
        match out {
            NodeOutput::None => Outcome::Done {
                update: None,
                goto: Vec::new(),
                parent: None,
                per_write: None,
            },
            NodeOutput::Update(u) => Outcome::Done {
                update: Some(Arc::new(u)),
                goto: Vec::new(),
                parent: None,
                per_write: None,
            },
            NodeOutput::Command(c) => match c.graph {
                crate::types::CommandGraph::Current => Outcome::Done {
                    update: c.update.map(Arc::new),
                    goto: c.goto,
                    parent: None,
                    per_write: per_write(c.writes),
                },
                crate::types::CommandGraph::Parent => Outcome::Done {
                    update: None,
                    goto: Vec::new(),
                    parent: Some((c.parent_update, c.goto)),
                    per_write: None,
                },
            },
        }
    }
}

/// A command's joined writes as the `updates` stream shows them: one `{key: value}` per
/// write, in order, when a key is written more than once (LangGraph's rule for a task's
/// writes); `None` when every key is written once and the joined update says it all.
fn per_write(writes: Vec<(String, Value)>) -> Option<Value> {
    let mut seen = std::collections::HashSet::new();
    if writes.iter().all(|(k, _)| seen.insert(k.as_str())) {
        return None;
    }
    Some(Value::Array(
        writes.into_iter().map(|(k, v)| json!({ k: v })).collect(),
    ))
}

/// Encode a successful task's writes for `put_writes`.
pub(crate) fn encode_writes<S: State>(
    state: &S,
    update: Option<&S::Update>,
    goto: &[Route],
) -> Result<Vec<(String, Value)>, ErrorSource> {
    let mut writes = Vec::new();
    if let Some(u) = update {
        match state.update_to_json(u)? {
            Value::Object(m) => writes.extend(m),
            other => writes.push(("__update__".to_owned(), other)),
        }
    }
    for r in goto {
        match r {
            Route::To(n) => writes.push((format!("branch:to:{n}"), Value::Null)),
            Route::End => {}
            Route::Send(s) => writes.push((
                checkpoint::TASKS.to_owned(),
                json!({"node": s.node, "packet": s.packet.to_json()?}),
            )),
        }
    }
    if writes.is_empty() {
        writes.push((checkpoint::NO_WRITES.to_owned(), Value::Null));
    }
    Ok(writes)
}

/// Rebuild a task's outcome from writes saved before (so it is not run again). `None` if
/// the task has no successful writes.
pub(crate) fn decode_writes<S: State>(
    state: &S,
    task_id: &str,
    writes: &[PendingWrite],
) -> Option<Result<Outcome<S>, String>> {
    let mine: Vec<&PendingWrite> = writes.iter().filter(|w| w.task_id == task_id).collect();
    let success = mine.iter().any(|w| {
        !matches!(
            w.channel.as_str(),
            checkpoint::ERROR | checkpoint::INTERRUPT | checkpoint::RESUME | checkpoint::ERROR_HANDLER
        )
    });
    if !success {
        return None;
    }
    let mut update = serde_json::Map::new();
    let mut goto = Vec::new();
    for w in mine {
        match w.channel.as_str() {
            checkpoint::NO_WRITES
            | checkpoint::ERROR
            | checkpoint::INTERRUPT
            | checkpoint::RESUME
            | checkpoint::ERROR_HANDLER => {}
            checkpoint::TASKS => {
                let node = w.value.get("node").and_then(Value::as_str).unwrap_or_default();
                goto.push(Route::Send(Send::json(
                    node,
                    w.value.get("packet").cloned().unwrap_or(Value::Null),
                )));
            }
            ch if ch.starts_with("branch:to:") => goto.push(Route::To(ch["branch:to:".len()..].to_owned())),
            ch => {
                update.insert(ch.to_owned(), w.value.clone());
            }
        }
    }
    let update = if update.is_empty() {
        None
    } else {
        match state.update_from_json(Value::Object(update)) {
            Ok(u) => Some(u),
            Err(e) => return Some(Err(e.to_string())),
        }
    };
    Some(Ok(Outcome::Done {
        update: update.map(Arc::new),
        goto,
        parent: None,
        per_write: None,
    }))
}

/// The failure saved for a task whose node's error handler is due, if there is one.
pub(crate) fn handler_due(
    task_id: &str,
    writes: &[PendingWrite],
) -> Option<crate::node_failure::NodeFailure> {
    writes
        .iter()
        .filter(|w| w.task_id == task_id && w.channel == checkpoint::ERROR_HANDLER)
        .find_map(|w| crate::node_failure::NodeFailure::from_json(&w.value))
}

/// The task an error handler runs as: the failed task's trigger under an id of its own
/// (derived from the failed task's, so a resume finds the handler's writes again).
pub(crate) fn handler_task(failed: &Task) -> Task {
    Task {
        id: task_id(
            &failed.id,
            "",
            0,
            &crate::node_failure::handler_name(&failed.node),
            "error_handler",
        ),
        node: failed.node.clone(),
        kind: failed.kind.clone(),
    }
}

/// Resume values a task already received (from its saved `__resume__` write).
pub(crate) fn saved_resumes(task_id: &str, writes: &[PendingWrite]) -> BTreeMap<String, Value> {
    writes
        .iter()
        .filter(|w| w.task_id == task_id && w.channel == checkpoint::RESUME)
        .filter_map(|w| serde_json::from_value::<BTreeMap<String, Value>>(w.value.clone()).ok())
        .next_back()
        .unwrap_or_default()
}

/// Everything a task needs to run, owned so it can move into a spawned future.
pub(crate) struct TaskRun<S: State> {
    pub graph: Arc<GraphInner<S>>,
    pub run: Arc<RunShared>,
    pub ns: Arc<[String]>,
    pub task: Task,
    pub input: NodeInput<S>,
    pub cache_key: Option<String>,
    pub step: i64,
    pub remaining: usize,
    pub resumed: BTreeMap<String, Value>,
    /// The graph's `events` run, when the run streams events.
    pub events: Option<Arc<crate::events::EventRun>>,
    pub step_checkpoint: Option<Arc<crate::runtime::StepCheckpoint>>,
    /// Set when this runs the node's error handler for this failure, not the node.
    pub failure: Option<Arc<crate::node_failure::NodeFailure>>,
}

impl<S: State> TaskRun<S> {
    /// Report this task's start as an `on_chain_start` nested in the graph's run.
    fn start_events(&self, graph: &crate::events::EventRun) -> crate::events::EventRun {
        let mut cp_ns = self.ns.join("|");
        if !cp_ns.is_empty() {
            cp_ns.push('|');
        }
        cp_ns.push_str(&self.task.node);
        cp_ns.push(':');
        cp_ns.push_str(&self.task.id);
        let scope = graph.scope().child([
            ("langgraph_step".to_owned(), json!(self.step)),
            ("langgraph_node".to_owned(), json!(self.task.node)),
            ("langgraph_triggers".to_owned(), json!(self.task.triggers())),
            ("langgraph_path".to_owned(), self.task.path()),
            ("langgraph_checkpoint_ns".to_owned(), json!(cp_ns)),
        ]);
        let input = match &self.input {
            NodeInput::State(s) => s.to_json().unwrap_or(Value::Null),
            NodeInput::Packet(p) => p.to_json().unwrap_or(Value::Null),
        };
        crate::events::EventRun::new(
            Arc::clone(&self.run),
            Arc::clone(&self.ns),
            crate::events::RunType::Chain,
            self.task.node.clone(),
            vec![format!("graph:step:{}", self.step)],
            Arc::new(scope),
        )
        .start(input, true)
    }

    /// Report this task's output: its own `on_chain_stream` and `on_chain_end`, then (in
    /// the root graph) the graph's `on_chain_stream` of `{node: output}`.
    fn end_events(&self, ev: crate::events::EventRun, out: &NodeOutput<S>) {
        let update = match out {
            NodeOutput::Update(u) => Some(u),
            NodeOutput::Command(c) => c.update.as_ref(),
            NodeOutput::None => None,
        };
        let output = update
            .and_then(|u| self.graph.shape.update_to_json(u).ok())
            .unwrap_or(Value::Null);
        ev.stream(output.clone());
        ev.end(output.clone());
        if let (Some(graph), true) = (&self.events, self.ns.is_empty()) {
            let mut m = serde_json::Map::new();
            m.insert(self.task.node.clone(), output);
            graph.stream(Value::Object(m));
        }
    }

    /// Run the node with its retry policy, timeout and cache.
    pub async fn execute(self) -> Outcome<S> {
        let Some(spec) = self.graph.nodes.get(&self.task.node) else {
            return Outcome::Failed(crate::error::Error::UnknownNode(self.task.node.clone()));
        };
        if let Some(failure) = &self.failure {
            return self.handle(spec, Arc::clone(failure)).await;
        }
        if let Some(key) = &self.cache_key {
            if let Some(out) = self.graph.cache_get(&self.task.node, key) {
                return Outcome::from_output(out);
            }
        }
        let messages_mode = self.run.wants_any(StreamMode::Messages);
        let mut node_events = self.events.as_ref().map(|g| self.start_events(g));
        let policy = spec.retry.clone();
        // A model called in a node whose idle timeout counts tokens as progress streams
        // into the node's runtime, so each token refreshes it.
        let auto_progress = spec.timeout.is_some_and(|t| t.auto_progress());
        let max_attempts = policy.as_ref().map_or(1, |p| p.max_attempts.max(1));
        let mut attempt = 0usize;
        loop {
            attempt += 1;
            let ctx = Arc::new(TaskCtx {
                run: Arc::clone(&self.run),
                node: self.task.node.clone(),
                task_id: self.task.id.clone(),
                step: self.step,
                triggers: self.task.triggers(),
                push: match &self.task.kind {
                    TaskKind::Push(i, _) => Some(*i),
                    _ => None,
                },
                ns: Arc::clone(&self.ns),
                remaining_steps: self.remaining,
                resumed: self.resumed.clone(),
                consumed: Mutex::new(BTreeMap::new()),
                interrupt_idx: AtomicUsize::new(0),
                sequence: AtomicUsize::new(0),
                events: node_events.as_ref().map(|e| Arc::clone(e.scope())),
                step_checkpoint: self.step_checkpoint.clone(),
                progress: spec
                    .timeout
                    .filter(|t| t.idle_timeout().is_some())
                    .map(|t| Arc::new(crate::timeout::Progress::new(t.auto_progress()))),
                failure: None,
            });
            let rt = Runtime { ctx };
            let progress = rt.ctx.progress.clone();
            let input = match &self.input {
                NodeInput::State(s) => NodeInput::State(Arc::clone(s)),
                NodeInput::Packet(p) => NodeInput::Packet(p.clone()),
            };
            // One `node` span per attempt. Without a subscriber listening it is a no-op:
            // no field is evaluated and nothing is allocated.
            let span = tracing::info_span!(
                "node",
                graphloom.node = self.task.node.as_str(),
                graphloom.task_id = self.task.id.as_str(),
                graphloom.step = self.step,
                graphloom.attempt = i64::try_from(attempt).unwrap_or(i64::MAX),
                otel.status_code = tracing::field::Empty,
                otel.status_description = tracing::field::Empty,
            );
            let fut = span.in_scope(|| (spec.func)(input, rt.clone()));
            let fut = tracing::Instrument::instrument(fut, span.clone());
            // While the run streams `messages`, model calls inside the node find its
            // runtime (or, at a depth nobody listens to, find none).
            // So do they when the run streams events (to report their own).
            let fut = if messages_mode || node_events.is_some() || auto_progress {
                let here = self.run.wants(StreamMode::Messages, self.ns.len())
                    || node_events.is_some()
                    || auto_progress;
                futures::future::Either::Left(crate::message_stream::scope(here.then(|| rt.clone()), fut))
            } else {
                futures::future::Either::Right(fut)
            };
            let result = match &spec.timeout {
                Some(t) => {
                    // Without an idle limit nothing reads the clock: a throwaway one.
                    let clock = progress.unwrap_or_else(|| Arc::new(crate::timeout::Progress::new(false)));
                    crate::timeout::run_timed(fut, t, &clock).await
                }
                None => fut.await,
            };
            match result {
                Ok(mut out) => {
                    if let (Some(key), Some(cp)) = (&self.cache_key, &spec.cache) {
                        // Tokio's clock: a paused test clock moves it. A TTL too long to
                        // represent never expires.
                        let expires = cp.ttl.and_then(|t| tokio::time::Instant::now().checked_add(t));
                        self.graph.cache_put(&self.task.node, key, out.clone(), expires);
                    }
                    if messages_mode
                        && self.run.message_events == crate::stream::MessageEvents::All
                        && self.run.wants(StreamMode::Messages, self.ns.len())
                    {
                        crate::message_stream::emit_returned(&self.graph.shape, &self.input, &rt, &mut out);
                    }
                    if let Some(ev) = node_events.take() {
                        self.end_events(ev, &out);
                    }
                    return Outcome::from_output(out);
                }
                Err(NodeError::Interrupted(ints)) => {
                    let mut consumed = self.resumed.clone();
                    consumed.extend(rt.consumed_resumes());
                    return Outcome::Interrupted(ints, consumed);
                }
                Err(NodeError::ParentCommand { update, goto }) => {
                    // A subgraph node addressed this graph: apply it here as this task's output.
                    let update = match update {
                        Some(v) => match self.graph.shape.update_from_json(v) {
                            Ok(u) => Some(u),
                            Err(e) => {
                                return Outcome::Failed(crate::error::Error::Node {
                                    node: self.task.node.clone(),
                                    message: format!(
                                        "Command for the parent graph has an invalid update: {e}"
                                    ),
                                    kind: crate::types::NodeErrorKind::Terminal,
                                    source: Some(e.into()),
                                })
                            }
                        },
                        None => None,
                    };
                    return Outcome::Done {
                        update: update.map(Arc::new),
                        goto,
                        parent: None,
                        per_write: None,
                    };
                }
                Err(e) => {
                    if !span.is_disabled() {
                        span.record("otel.status_code", "ERROR");
                        span.record("otel.status_description", tracing::field::display(&e));
                    }
                    let retry = policy
                        .as_ref()
                        .is_some_and(|p| attempt < max_attempts && (p.retry_on)(&e));
                    if retry {
                        if let Some(p) = &policy {
                            tokio::time::sleep(p.delay(attempt)).await;
                        }
                        continue;
                    }
                    if spec.error_handler.is_some() && !matches!(e, NodeError::BudgetExceeded { .. }) {
                        let failure = crate::node_failure::NodeFailure::new(&self.task.node, &e, attempt);
                        return Outcome::HandlerDue(Arc::new(failure));
                    }
                    return Outcome::Failed(crate::error::Error::from_node(self.task.node.clone(), e));
                }
            }
        }
    }
}

impl<S: State> TaskRun<S> {
    /// Run the node's error handler for `failure`, once (a handler that fails fails the
    /// run). Its result takes the node's place: [`Outcome::Handled`].
    async fn handle(
        &self,
        spec: &crate::graph::node::NodeSpec<S>,
        failure: Arc<crate::node_failure::NodeFailure>,
    ) -> Outcome<S> {
        let name = spec.handler_name(&self.task.node);
        let Some(handler) = spec.error_handler.clone() else {
            return Outcome::Failed(crate::error::Error::node_failed(name, failure.to_string()));
        };
        let rt = Runtime {
            ctx: Arc::new(TaskCtx {
                run: Arc::clone(&self.run),
                node: name.clone(),
                task_id: self.task.id.clone(),
                step: self.step,
                triggers: self.task.triggers(),
                push: match &self.task.kind {
                    TaskKind::Push(i, _) => Some(*i),
                    _ => None,
                },
                ns: Arc::clone(&self.ns),
                remaining_steps: self.remaining,
                resumed: self.resumed.clone(),
                consumed: Mutex::new(BTreeMap::new()),
                interrupt_idx: AtomicUsize::new(0),
                sequence: AtomicUsize::new(0),
                events: None,
                step_checkpoint: self.step_checkpoint.clone(),
                progress: None,
                failure: Some(failure),
            }),
        };
        let input = match &self.input {
            NodeInput::State(s) => NodeInput::State(Arc::clone(s)),
            NodeInput::Packet(p) => NodeInput::Packet(p.clone()),
        };
        match handler(input, rt.clone()).await {
            Ok(out) => match Outcome::from_output(out) {
                Outcome::Done {
                    update,
                    goto,
                    parent: None,
                    ..
                } => Outcome::Handled { update, goto },
                other => other,
            },
            Err(NodeError::Interrupted(ints)) => {
                let mut consumed = self.resumed.clone();
                consumed.extend(rt.consumed_resumes());
                Outcome::Interrupted(ints, consumed)
            }
            Err(e) => Outcome::Failed(crate::error::Error::from_node(name, e)),
        }
    }
}

/// The input a task hands its node, or why it cannot be built.
pub(crate) fn task_input<S: State>(
    g: &GraphInner<S>,
    ls: &LoopState<S>,
    task: &Task,
) -> Result<NodeInput<S>, Error> {
    let Some(spec) = g.nodes.get(&task.node) else {
        return Err(Error::node_failed(
            &task.node,
            format!("unknown node `{}`", task.node),
        ));
    };
    match (&task.kind, spec.input) {
        (TaskKind::Push(_, p), InputKind::State) => match p {
            Packet::Json(v) => ls
                .state
                .state_from_json(v.clone())
                .map(|s| NodeInput::State(Arc::new(s)))
                .map_err(|e| Error::Node {
                    node: task.node.clone(),
                    message: format!("packet for `{}`: {e}", task.node),
                    kind: NodeErrorKind::Terminal,
                    source: Some(e.into()),
                }),
            p => p
                .downcast_ref::<S>()
                .map(|s| NodeInput::State(Arc::new(s.clone())))
                .ok_or_else(|| {
                    Error::node_failed(
                        &task.node,
                        format!("packet for `{}` is not of the graph's state type", task.node),
                    )
                }),
        },
        (TaskKind::Push(_, p), InputKind::Packet | InputKind::Either) => Ok(NodeInput::Packet(p.clone())),
        (_, _) => Ok(NodeInput::State(Arc::clone(&ls.state))),
    }
}
