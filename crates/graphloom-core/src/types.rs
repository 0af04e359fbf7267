//! The vocabulary nodes and callers speak: routes, `Send`, `Command`, interrupts, policies.

use crate::error_source::ErrorSource;
use crate::state::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The virtual first node: edges from `START` say where a run begins.
pub const START: &str = "__start__";
/// The virtual last node: routing to `END` ends that branch.
pub const END: &str = "__end__";

type Encoder = fn(&(dyn Any + std::marker::Send + Sync)) -> Result<Value, serde_json::Error>;

fn encode_as<T: Serialize + 'static>(
    v: &(dyn Any + std::marker::Send + Sync),
) -> Result<Value, serde_json::Error> {
    let typed = v
        .downcast_ref::<T>()
        .ok_or_else(|| <serde_json::Error as serde::ser::Error>::custom("packet type mismatch"))?;
    serde_json::to_value(typed)
}

/// A `Send` packet: a typed value (never serialised inside the loop), or JSON (from a
/// checkpoint or a request).
#[derive(Clone)]
pub enum Packet {
    /// A typed value and how to encode it.
    Typed(Arc<dyn Any + std::marker::Send + Sync>, Encoder),
    /// A JSON value.
    Json(Value),
}

impl Packet {
    /// Wrap a typed value.
    pub fn typed<T: Serialize + std::marker::Send + Sync + 'static>(value: T) -> Self {
        Packet::Typed(Arc::new(value), encode_as::<T>)
    }
    /// The packet as JSON.
    ///
    /// # Errors
    /// When the typed value does not serialise.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        match self {
            Packet::Typed(v, enc) => enc(v.as_ref()),
            Packet::Json(v) => Ok(v.clone()),
        }
    }
    /// The typed value, if this packet holds a `T`.
    #[must_use]
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        match self {
            Packet::Typed(v, _) => v.downcast_ref::<T>(),
            Packet::Json(_) => None,
        }
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Packet::Typed(..) => f.write_str("Packet::Typed(..)"),
            Packet::Json(v) => write!(f, "Packet::Json({v})"),
        }
    }
}

/// Run `node` once with `packet` as its input in the next superstep (map-reduce fan-out).
#[derive(Clone, Debug)]
pub struct Send {
    /// Target node.
    pub node: String,
    /// Its input.
    pub packet: Packet,
}

impl Send {
    /// A packet of any serialisable type. Nodes added with `add_node` take a packet of the
    /// graph's state type; nodes added with `add_packet_node::<T>` take a `T`.
    pub fn new<T: Serialize + std::marker::Send + Sync + 'static>(
        node: impl Into<String>,
        packet: T,
    ) -> Self {
        Self {
            node: node.into(),
            packet: Packet::typed(packet),
        }
    }
    /// A JSON packet.
    pub fn json(node: impl Into<String>, packet: Value) -> Self {
        Self {
            node: node.into(),
            packet: Packet::Json(packet),
        }
    }
}

/// Where a branch goes next.
#[derive(Clone, Debug)]
pub enum Route {
    /// A node (by name, or by path-map key for conditional edges with a path map).
    To(String),
    /// End this branch.
    End,
    /// Run a node with a packet.
    Send(Send),
}

impl From<&str> for Route {
    fn from(s: &str) -> Self {
        if s == END {
            Route::End
        } else {
            Route::To(s.to_owned())
        }
    }
}
impl From<String> for Route {
    fn from(s: String) -> Self {
        if s == END {
            Route::End
        } else {
            Route::To(s)
        }
    }
}
impl From<Send> for Route {
    fn from(s: Send) -> Self {
        Route::Send(s)
    }
}

/// What a router returns: one or several routes.
#[derive(Clone, Debug, Default)]
pub struct Routes(pub Vec<Route>);

impl<T: Into<Route>> From<T> for Routes {
    fn from(r: T) -> Self {
        Routes(vec![r.into()])
    }
}
impl<T: Into<Route>> From<Vec<T>> for Routes {
    fn from(v: Vec<T>) -> Self {
        Routes(v.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<Route>> FromIterator<T> for Routes {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Routes(iter.into_iter().map(Into::into).collect())
    }
}

/// Which graph a `Command` addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommandGraph {
    /// The graph the node belongs to.
    #[default]
    Current,
    /// The parent graph of the subgraph the node belongs to.
    Parent,
}

/// A node's instruction to update state and choose where to go, or a caller's resume.
#[derive(Clone)]
pub struct Command<S: State> {
    /// State update.
    pub update: Option<S::Update>,
    /// Update for the parent graph as JSON (with [`CommandGraph::Parent`]).
    pub parent_update: Option<Value>,
    /// Where to go (in addition to the node's static edges).
    pub goto: Vec<Route>,
    /// Resume values for pending interrupts (caller side).
    pub resume: Option<Resume>,
    /// Which graph this addresses.
    pub graph: CommandGraph,
    /// The writes this command joins, in order, when it stands for several (a tool node
    /// applying the commands of several tool calls, or a tool's list of commands): each a
    /// state key and its JSON value. They change only how the `updates` stream shows the
    /// task: when a key is written more than once, as one update per write, in order (as
    /// LangGraph shows a task's writes); otherwise as the joined `update`. Empty for a
    /// plain command.
    pub writes: Vec<(String, Value)>,
}

impl<S: State> Default for Command<S> {
    fn default() -> Self {
        Self {
            update: None,
            parent_update: None,
            goto: Vec::new(),
            resume: None,
            graph: CommandGraph::Current,
            writes: Vec::new(),
        }
    }
}

impl<S: State> Command<S> {
    /// An empty command.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Go to these routes.
    #[must_use]
    pub fn goto(mut self, routes: impl Into<Routes>) -> Self {
        self.goto.extend(routes.into().0);
        self
    }
    /// Apply this update.
    #[must_use]
    pub fn update(mut self, update: S::Update) -> Self {
        self.update = Some(update);
        self
    }
    /// The writes this command's update joins, in order (see [`Command::writes`]).
    #[must_use]
    pub fn writes(mut self, writes: Vec<(String, Value)>) -> Self {
        self.writes = writes;
        self
    }
    /// Resume pending interrupts (single value for a single interrupt).
    #[must_use]
    pub fn resume(value: impl Into<Value>) -> Self {
        Self {
            resume: Some(Resume::Value(value.into())),
            ..Self::default()
        }
    }
    /// Resume pending interrupts by id.
    #[must_use]
    pub fn resume_map(map: BTreeMap<String, Value>) -> Self {
        Self {
            resume: Some(Resume::ById(map)),
            ..Self::default()
        }
    }
    /// Address the parent graph: `update` is applied there (as JSON of the parent's
    /// update type) and `goto` names parent nodes.
    #[must_use]
    pub fn to_parent(update: Option<Value>, goto: impl Into<Routes>) -> Self {
        Self {
            parent_update: update,
            goto: goto.into().0,
            graph: CommandGraph::Parent,
            ..Self::default()
        }
    }
}

/// Resume values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Resume {
    /// One value, for a run with exactly one pending interrupt.
    Value(Value),
    /// Values by interrupt id.
    ById(BTreeMap<String, Value>),
}

/// A pending interrupt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// Stable id; distinct for every `interrupt()` call site in every task.
    pub id: String,
    /// What the node asked.
    pub value: Value,
    /// JSON Schema the resume value must match, when the node gave one
    /// ([`Runtime::interrupt_with_schema`](crate::Runtime::interrupt_with_schema)); a
    /// resume that does not match is refused before the node runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
}

/// What a node returns.
#[derive(Clone)]
pub enum NodeOutput<S: State> {
    /// Nothing to write.
    None,
    /// A state update.
    Update(S::Update),
    /// A command.
    Command(Command<S>),
}

impl<S: State> From<Command<S>> for NodeOutput<S> {
    fn from(c: Command<S>) -> Self {
        NodeOutput::Command(c)
    }
}
impl<S: State> From<()> for NodeOutput<S> {
    fn from((): ()) -> Self {
        NodeOutput::None
    }
}
impl<S: State> From<Option<S::Update>> for NodeOutput<S> {
    fn from(u: Option<S::Update>) -> Self {
        u.map_or(NodeOutput::None, NodeOutput::Update)
    }
}

/// Why a node did not finish.
///
/// A node's own error keeps its type: `?` on any `std::error::Error` (or
/// [`NodeError::terminal`]) makes a [`NodeError::Failed`] whose
/// [`source`](NodeError::source) is that error, found again with
/// [`NodeError::downcast_ref`] by a retry predicate ([`RetryPolicy::retry_when`]) and, once
/// the run ends with [`Error::Node`](crate::Error::Node), as that error's
/// [`source`](std::error::Error::source). What is shown (`Display`) is the error's message.
///
/// `NodeError` does not implement `std::error::Error` itself: it is what a node returns,
/// and every error converts into it with `?`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum NodeError {
    /// It failed.
    Failed {
        /// What went wrong.
        message: String,
        /// Whether a retry policy may try again (default predicate).
        retryable: bool,
        /// The node's own error, when it returned one.
        source: Option<ErrorSource>,
    },
    /// One attempt ran past a limit of the node's [`TimeoutPolicy`](crate::TimeoutPolicy).
    TimedOut {
        /// The limit that fired.
        after_ms: u64,
        /// Which limit: the hard run timeout or the idle timeout.
        kind: crate::timeout::TimeoutKind,
    },
    /// A run budget (model calls, tokens, cost, time) would be exceeded; never retried.
    BudgetExceeded {
        /// Which budget.
        budget: String,
        /// Details (limit and usage).
        message: String,
    },
    /// It called `interrupt()` with no resume value waiting (or a subgraph did).
    Interrupted(Vec<Interrupt>),
    /// A subgraph node returned a `Command` for its parent graph.
    ParentCommand {
        /// Parent update as JSON.
        update: Option<Value>,
        /// Parent routes.
        goto: Vec<Route>,
    },
}

/// What sort of [`NodeError`] (and of [`Error::Node`](crate::Error::Node)) a failure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeErrorKind {
    /// A failure a retry may fix: the default predicate of a [`RetryPolicy`] retries it.
    Retryable,
    /// A failure no retry fixes.
    Terminal,
    /// An attempt ran past the node's timeout (retryable by default).
    TimedOut,
    /// A run budget would be exceeded (never retried).
    BudgetExceeded,
    /// The node paused at an interrupt.
    Interrupted,
    /// A subgraph node addressed its parent graph.
    ParentCommand,
}

impl NodeError {
    /// A failure that a retry policy may retry.
    pub fn new(message: impl Into<String>) -> Self {
        NodeError::Failed {
            message: message.into(),
            retryable: true,
            source: None,
        }
    }
    /// A failure that is never retried.
    pub fn fatal(message: impl Into<String>) -> Self {
        NodeError::Failed {
            message: message.into(),
            retryable: false,
            source: None,
        }
    }
    /// `error` as a failure that is never retried, keeping it as the source (`?` makes a
    /// retryable one).
    pub fn terminal<E: std::error::Error + std::marker::Send + Sync + 'static>(error: E) -> Self {
        NodeError::Failed {
            message: error.to_string(),
            retryable: false,
            source: Some(ErrorSource::new(error)),
        }
    }
    /// This failure with `source` as its cause (the message stays). Other kinds of error
    /// are returned as they are.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<ErrorSource>) -> Self {
        if let NodeError::Failed { source: s, .. } = &mut self {
            *s = Some(source.into());
        }
        self
    }
    /// What sort of error this is.
    #[must_use]
    pub fn kind(&self) -> NodeErrorKind {
        match self {
            NodeError::Failed { retryable: true, .. } => NodeErrorKind::Retryable,
            NodeError::Failed { retryable: false, .. } => NodeErrorKind::Terminal,
            NodeError::TimedOut { .. } => NodeErrorKind::TimedOut,
            NodeError::BudgetExceeded { .. } => NodeErrorKind::BudgetExceeded,
            NodeError::Interrupted(_) => NodeErrorKind::Interrupted,
            NodeError::ParentCommand { .. } => NodeErrorKind::ParentCommand,
        }
    }
    /// True for failures the default retry predicate retries.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            NodeError::Failed { retryable: true, .. } | NodeError::TimedOut { .. }
        )
    }
    /// The node's own error, if it returned one.
    #[must_use]
    pub fn source(&self) -> Option<&ErrorSource> {
        match self {
            NodeError::Failed { source, .. } => source.as_ref(),
            _ => None,
        }
    }
    /// The first `E` in the node's own error or its source chain.
    ///
    /// ```
    /// use graphloom_core::NodeError;
    ///
    /// fn read() -> Result<(), NodeError> {
    ///     std::fs::read("/definitely/not/here")?;
    ///     Ok(())
    /// }
    /// let err = read().unwrap_err();
    /// assert!(err.is_retryable());
    /// let io = err.downcast_ref::<std::io::Error>();
    /// assert_eq!(io.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
    /// ```
    #[must_use]
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source().and_then(ErrorSource::find)
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Failed { message, .. } => f.write_str(message),
            NodeError::TimedOut { after_ms, kind } => write!(f, "{kind} {after_ms} ms"),
            NodeError::BudgetExceeded { budget, message } => write!(f, "{budget} budget exceeded: {message}"),
            NodeError::Interrupted(i) => write!(f, "interrupted ({} pending)", i.len()),
            NodeError::ParentCommand { .. } => f.write_str("command for the parent graph"),
        }
    }
}

/// `?` on any error in a node: a retryable failure with the error as its source.
impl<E: std::error::Error + std::marker::Send + Sync + 'static> From<E> for NodeError {
    fn from(e: E) -> Self {
        NodeError::Failed {
            message: e.to_string(),
            retryable: true,
            source: Some(ErrorSource::new(e)),
        }
    }
}

/// Retry a failing node with exponential backoff.
#[derive(Clone)]
pub struct RetryPolicy {
    /// Wait before the first retry.
    pub initial_interval: Duration,
    /// Multiplier for each further retry.
    pub backoff_factor: f64,
    /// Longest wait between attempts.
    pub max_interval: Duration,
    /// Total attempts, the first included.
    pub max_attempts: usize,
    /// Add up to 100% random jitter to each wait.
    pub jitter: bool,
    /// Which failures retry (default: [`NodeError::is_retryable`]).
    pub retry_on: Arc<dyn Fn(&NodeError) -> bool + std::marker::Send + Sync>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(128),
            max_attempts: 3,
            jitter: true,
            retry_on: Arc::new(NodeError::is_retryable),
        }
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("max_attempts", &self.max_attempts)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// `max_attempts` attempts with the default backoff.
    #[must_use]
    pub fn attempts(max_attempts: usize) -> Self {
        Self {
            max_attempts,
            ..Self::default()
        }
    }
    /// Set the first wait.
    #[must_use]
    pub fn initial_interval(mut self, d: Duration) -> Self {
        self.initial_interval = d;
        self
    }
    /// Set the backoff factor.
    #[must_use]
    pub fn backoff_factor(mut self, f: f64) -> Self {
        self.backoff_factor = f;
        self
    }
    /// Set the longest wait.
    #[must_use]
    pub fn max_interval(mut self, d: Duration) -> Self {
        self.max_interval = d;
        self
    }
    /// Turn jitter on or off.
    #[must_use]
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }
    /// Choose which failures retry.
    #[must_use]
    pub fn retry_on(mut self, f: impl Fn(&NodeError) -> bool + std::marker::Send + Sync + 'static) -> Self {
        self.retry_on = Arc::new(f);
        self
    }
    /// Retry only failures whose own error (or an error in its source chain) is an `E` for
    /// which `f` says yes; every other failure, timeouts included, is not retried.
    ///
    /// ```
    /// use graphloom_core::{NodeError, RetryPolicy};
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("http {0}")]
    /// struct Http(u16);
    ///
    /// let policy = RetryPolicy::attempts(3).retry_when(|e: &Http| e.0 == 429 || e.0 >= 500);
    /// assert!((policy.retry_on)(&NodeError::from(Http(503))));
    /// assert!(!(policy.retry_on)(&NodeError::from(Http(404))));
    /// assert!(!(policy.retry_on)(&NodeError::new("no typed cause")));
    /// ```
    #[must_use]
    pub fn retry_when<E: std::error::Error + 'static>(
        self,
        f: impl Fn(&E) -> bool + std::marker::Send + Sync + 'static,
    ) -> Self {
        self.retry_on(move |e: &NodeError| e.downcast_ref::<E>().is_some_and(&f))
    }
    /// The wait before attempt `attempt` (1-based count of attempts already made).
    #[must_use]
    pub fn delay(&self, attempt: usize) -> Duration {
        let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial_interval.as_secs_f64() * self.backoff_factor.powi(exp);
        let capped = base.min(self.max_interval.as_secs_f64()).max(0.0);
        let with_jitter = if self.jitter {
            capped * (1.0 + rand::random::<f64>())
        } else {
            capped
        };
        Duration::try_from_secs_f64(with_jitter.min(self.max_interval.as_secs_f64().max(capped)))
            .unwrap_or(self.max_interval)
    }
}

/// Cache a node's output by a key computed from its input, for `ttl` (LangGraph's
/// `CachePolicy(key_func, ttl)`), set with [`StateGraph::cache`](crate::StateGraph::cache).
///
/// Before a task of the node runs, `key` is computed from its input state; if the compiled
/// graph holds an output for that node and key younger than `ttl`, the task returns it
/// without calling the node (no retry, no timeout, and the node's side effects do not
/// happen again); otherwise the node runs and its output is stored with the time it
/// expires. The output is reused as it was: its update, or its `Command` with the same
/// `goto`. An entry past its TTL is dropped when next looked up, and the node runs again.
///
/// The cache is in memory, in the compiled graph: shared by its clones, by every thread
/// and run of it, and lost when the process ends. Only nodes that take the graph state
/// are cached (not `Send` packet nodes). Ages are measured on tokio's clock
/// ([`tokio::time::Instant`]), so a test with a paused clock (`tokio::time::pause`,
/// `advance`) controls them; a TTL too large to add to the clock never expires.
///
/// ```
/// use graphloom_core::{CachePolicy, State, StateGraph, START, END};
/// use std::time::Duration;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Q {
///     query: String,
///     answer: String,
/// }
/// let graph = StateGraph::<Q>::new()
///     .add_node("search", |s: std::sync::Arc<Q>, _rt| async move {
///         Ok(QUpdate::new().answer(format!("results for {}", s.query)))
///     })
///     // The same query within five minutes reuses the answer.
///     .cache("search", CachePolicy::with_key(Some(Duration::from_secs(300)), |s: &Q| s.query.clone()))
///     .add_edge(START, "search")
///     .add_edge("search", END)
///     .compile();
/// assert!(graph.is_ok());
/// ```
pub struct CachePolicy<S: State> {
    /// Key of an input; equal keys reuse the cached output.
    pub key: Arc<dyn Fn(&S) -> String + std::marker::Send + Sync>,
    /// How long an entry lives (`None`: for the life of the compiled graph).
    pub ttl: Option<Duration>,
}

impl<S: State> Clone for CachePolicy<S> {
    fn clone(&self) -> Self {
        Self {
            key: Arc::clone(&self.key),
            ttl: self.ttl,
        }
    }
}

impl<S: State> CachePolicy<S> {
    /// Key by the whole input state as JSON.
    #[must_use]
    pub fn new(ttl: Option<Duration>) -> Self {
        Self {
            key: Arc::new(|s: &S| s.to_json().map(|v| v.to_string()).unwrap_or_default()),
            ttl,
        }
    }
    /// Key by a function of the input.
    #[must_use]
    pub fn with_key(
        ttl: Option<Duration>,
        key: impl Fn(&S) -> String + std::marker::Send + Sync + 'static,
    ) -> Self {
        Self {
            key: Arc::new(key),
            ttl,
        }
    }
}

/// When checkpoints are made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Each superstep's writes and checkpoint are saved before the next step starts. The
    /// default: a crash never loses a step that was reported done. Checkpoints with no node
    /// code between them and the next save go with that save: a run's input checkpoint
    /// with the `__start__` step's, and a completing run's last checkpoint with its
    /// [`CompletionHook`](crate::CompletionHook). On a backend that saves in order
    /// ([`Checkpointer::saves_in_order`](crate::checkpoint::Checkpointer::saves_in_order):
    /// SQLite, in-memory) the first node starts while the input and `__start__`
    /// checkpoints are being saved; its writes and its step's checkpoint are queued behind
    /// them.
    #[default]
    Sync,
    /// Saved in the background, in order, while the next step runs; the run waits for them
    /// before it returns.
    Async,
    /// Saved once, when the run ends (LangGraph's `durability="exit"`): no checkpoint is
    /// written while the run goes, not even its input. When it ends, one checkpoint of the
    /// last completed step is put: at completion the final state; at an interrupt, an
    /// error, a cancel, a timeout or the step limit, the checkpoint the unfinished step was
    /// planned from, with the writes of the tasks of that step that finished (so they do
    /// not run again on resume) and its interrupts or error. Fastest for short runs; a
    /// process killed mid-run leaves the thread as it was before the run, and that run's
    /// work is lost. Pinned by `graphloom-core/tests/it/durability_exit.rs`.
    Exit,
}

/// Nodes named by `interrupt_before` / `interrupt_after`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NodeSet {
    /// None.
    #[default]
    None,
    /// Every node (`"*"`).
    All,
    /// These nodes.
    Some(Vec<String>),
}

impl NodeSet {
    /// Whether `node` is in the set.
    #[must_use]
    pub fn contains(&self, node: &str) -> bool {
        match self {
            NodeSet::None => false,
            NodeSet::All => true,
            NodeSet::Some(v) => v.iter().any(|n| n == node),
        }
    }
    /// A set from names (`"*"` alone means all).
    pub fn of<I: IntoIterator<Item = T>, T: Into<String>>(names: I) -> Self {
        let v: Vec<String> = names.into_iter().map(Into::into).collect();
        if v.iter().any(|n| n == "*") {
            NodeSet::All
        } else if v.is_empty() {
            NodeSet::None
        } else {
            NodeSet::Some(v)
        }
    }
    /// True if empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        matches!(self, NodeSet::None)
    }
}
