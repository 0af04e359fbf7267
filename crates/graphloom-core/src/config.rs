//! Per-run configuration and input.

use crate::state::State;
use crate::store::DynStore;
use crate::stream::StreamMode;
use crate::types::{Command, Durability, NodeSet};
use serde_json::{Map, Value};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// Default superstep limit.
///
/// LangGraph used 25 for years (too low: a ReAct agent with a dozen tool calls hit it) and
/// now uses 10,007 (so high that a graph stuck in a loop burns thousands of model calls
/// before it stops). 100 lets an agent make about 50 tool round trips and still stops a
/// runaway loop within seconds; raise it per run with [`RunConfig::recursion_limit`].
pub const DEFAULT_RECURSION_LIMIT: usize = 100;

/// Configuration of one run.
#[derive(Clone)]
pub struct RunConfig {
    /// Thread to persist to (needs a checkpointer).
    pub thread_id: Option<String>,
    /// Start from this checkpoint (time travel / fork) instead of the latest.
    pub checkpoint_id: Option<String>,
    /// Maximum supersteps this run may take.
    pub recursion_limit: usize,
    /// Pause before these nodes (in addition to the compiled ones).
    pub interrupt_before: NodeSet,
    /// Pause after these nodes (in addition to the compiled ones).
    pub interrupt_after: NodeSet,
    /// When checkpoints are saved.
    pub durability: Durability,
    /// Wall-clock limit for the whole run.
    pub timeout: Option<Duration>,
    /// Immutable user context (user id, tenant, ...) handed to every node.
    pub context: Option<Arc<dyn Any + Send + Sync>>,
    /// Metadata saved with every checkpoint of the run.
    pub metadata: Map<String, Value>,
    /// Run id (generated when absent).
    pub run_id: Option<String>,
    /// Stops the run when cancelled: running tasks are aborted, writes of tasks that
    /// finished are kept, and the run ends with [`Error::Cancelled`](crate::Error::Cancelled)
    /// and a resumable checkpoint.
    pub cancel: Option<CancelToken>,
    /// Asks the run to drain: it stops at its next superstep boundary, once the step that
    /// is running has finished and its checkpoint is saved, and ends with
    /// [`Error::Drained`](crate::Error::Drained). See [`RunControl`].
    pub control: Option<RunControl>,
    /// Told about each task of the root graph as it ends (node, time taken, failed or
    /// not): a cheap way to time nodes, e.g. for metrics, without streaming `tasks`
    /// events (which carry each task's whole input state).
    pub on_task_end: Option<TaskObserver>,
    /// Told once when the run completes (no task left: not paused, not failed, not
    /// cancelled), before its end is reported. In `sync` mode the hook's future runs while
    /// the run's last checkpoint is being put, its writes queued after the checkpoint's, so
    /// a caller recording the outcome in the same database (a server's run table) can share
    /// that checkpoint's commit instead of waiting for one more. See [`CompletionHook`].
    pub on_complete: Option<CompletionHook>,
    /// The long-term store of this run, instead of the one the graph was compiled with
    /// (none: the compiled one). Nodes see it through [`crate::Runtime::store`], and so do
    /// subgraphs and the tools they call: a server hands each run a store scoped to the
    /// run's owner this way, so one compiled graph serves several tenants.
    pub store: Option<Arc<dyn DynStore>>,
    /// What the run's `checkpoints` stream events carry (its subgraphs' too): the whole
    /// event (the default) or only the checkpoint's envelope. `debug` events carry the
    /// whole checkpoint either way.
    pub checkpoint_events: crate::stream::CheckpointEvents,
    /// What the run's `messages` stream events carry (its subgraphs' too): the models'
    /// chunks and the messages nodes return (the default), or the chunks only.
    pub message_events: crate::stream::MessageEvents,
    /// Whether a `checkpoints` event may come before its checkpoint's save is done. By
    /// default (false), in `sync` mode, each comes once its checkpoint is saved, so a run
    /// streaming them saves every checkpoint before going on. With true each comes when its
    /// checkpoint is made, as in the `async` and `exit` modes: the run's first node starts
    /// while its input is saved (on a backend that saves in order) and a completing run's
    /// last checkpoint is put alongside its [`on_complete`](Self::on_complete) hook, one
    /// commit fewer each. Every save is still done before the run's end is reported. For a
    /// caller that keeps the events, not one that reads a checkpoint as soon as its event
    /// comes. `debug` events wait for their save either way.
    pub early_checkpoint_events: bool,
}

/// A run that completed (see [`RunConfig::on_complete`]).
#[derive(Clone)]
pub struct Completion {
    /// The run's id.
    pub run_id: String,
    /// The thread, when the run has one.
    pub thread_id: Option<String>,
    /// The run's last checkpoint, when it is saved. In `sync` mode its put is in flight
    /// while the hook runs: a write that must not outlive a failed put checks that the
    /// checkpoint is there in its own transaction (see [`CompletionHook`]).
    pub checkpoint_id: Option<String>,
    /// The final state.
    pub values: Arc<dyn crate::stream::StreamValue>,
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("run_id", &self.run_id)
            .field("thread_id", &self.thread_id)
            .field("checkpoint_id", &self.checkpoint_id)
            .finish_non_exhaustive()
    }
}

/// Called with a [`Completion`] when a run of the root graph completes; the run's end is
/// reported after the returned future finishes.
///
/// In `sync` mode the run's last checkpoint is put at the same moment (its write queued
/// first), so on a backend with one group-committing writer (SQLite) a write the future
/// queues right away goes into the same commit or a later one, never an earlier one. The
/// two can still fail apart: the checkpoint's put may fail while the hook's write commits.
/// A hook that records "this run succeeded" should therefore check, in the transaction of
/// its write, that [`Completion::checkpoint_id`] is saved, and leave the outcome to its
/// caller otherwise. The hook's own result is not the run's: it reports to its caller by
/// its own means.
///
/// ```
/// use graphloom_core::{CompletionHook, RunConfig};
/// let cfg = RunConfig {
///     on_complete: Some(CompletionHook::new(|c| async move {
///         println!("run {} completed at {:?}", c.run_id, c.checkpoint_id);
///     })),
///     ..RunConfig::default()
/// };
/// # drop(cfg);
/// ```
#[derive(Clone)]
pub struct CompletionHook(Arc<dyn Fn(Completion) -> futures::future::BoxFuture<'static, ()> + Send + Sync>);

impl CompletionHook {
    /// A hook running `f`.
    pub fn new<F, Fut>(f: F) -> Self
    where
        F: Fn(Completion) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        Self(Arc::new(move |c| Box::pin(f(c))))
    }

    pub(crate) fn call(&self, c: Completion) -> futures::future::BoxFuture<'static, ()> {
        (self.0)(c)
    }
}

impl std::fmt::Debug for CompletionHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompletionHook")
    }
}

/// Receives a [`TaskEnd`] as each task of the root graph ends; called on the run's own
/// task, so it must be quick (record a metric, send on a channel).
///
/// ```
/// use graphloom_core::{RunConfig, TaskObserver};
/// let cfg = RunConfig {
///     on_task_end: Some(TaskObserver::new(|t| println!("{} took {:?}", t.node, t.elapsed))),
///     ..RunConfig::default()
/// };
/// # drop(cfg);
/// ```
#[derive(Clone)]
pub struct TaskObserver(Arc<dyn Fn(&TaskEnd<'_>) + Send + Sync>);

impl TaskObserver {
    /// An observer calling `f`.
    pub fn new(f: impl Fn(&TaskEnd<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub(crate) fn notify(&self, end: &TaskEnd<'_>) {
        (self.0)(end);
    }
}

impl std::fmt::Debug for TaskObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskObserver")
    }
}

/// A task of the root graph that ended (see [`RunConfig::on_task_end`]).
#[derive(Debug, Clone, Copy)]
pub struct TaskEnd<'a> {
    /// The task's node.
    pub node: &'a str,
    /// From the task's start to its end (its writes not yet saved).
    pub elapsed: Duration,
    /// Whether the task failed (an interrupt is not a failure).
    pub failed: bool,
}

/// A handle that cancels a run from outside (a server's cancel endpoint, a shutdown).
#[derive(Clone, Default, Debug)]
pub struct CancelToken(Arc<CancelInner>);

#[derive(Default, Debug)]
struct CancelInner {
    flag: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl CancelToken {
    /// A token not yet cancelled.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Cancel: the run stops at once, keeping what finished.
    pub fn cancel(&self) {
        self.0.flag.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }
    /// Whether [`cancel`](Self::cancel) was called.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(std::sync::atomic::Ordering::SeqCst)
    }
    /// Completes when the token is cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Asks a run to drain (LangGraph's `RunControl`): a graceful stop that loses no work.
///
/// A run given a control in [`RunConfig::control`] looks at it before each superstep,
/// after the previous step's checkpoint is saved. Once [`drain`](Self::drain) was called
/// it starts no further step: the step that is running finishes (its writes applied and
/// checkpointed as any step's), and the run ends with
/// [`Error::Drained`](crate::Error::Drained). Invoking the graph again on the same thread
/// with [`RunInput::Continue`] carries on from that checkpoint; no finished node runs
/// again. A run with nothing left to do completes as usual even if drain was asked.
///
/// Only the root graph's steps are boundaries: a subgraph node in flight finishes its
/// whole subgraph run as part of the root's step. Unlike [`CancelToken`], nothing is
/// aborted, so a drain can wait as long as the running step takes; a caller that cannot
/// wait (a server given a grace period) cancels after its deadline.
///
/// ```
/// use graphloom_core::{RunConfig, RunControl};
/// let control = RunControl::new();
/// let cfg = RunConfig::thread("t").control(control.clone());
/// control.drain(); // from a signal handler, another task, or a node
/// assert!(control.is_draining());
/// # drop(cfg);
/// ```
#[derive(Clone, Default, Debug)]
pub struct RunControl(Arc<std::sync::atomic::AtomicBool>);

impl RunControl {
    /// A control with no drain asked.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Ask the run to stop at its next superstep boundary. It cannot be taken back: a
    /// control is for one run (make a new one for the run that continues).
    pub fn drain(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    /// Whether [`drain`](Self::drain) was called.
    #[must_use]
    pub fn is_draining(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            thread_id: None,
            checkpoint_id: None,
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            interrupt_before: NodeSet::None,
            interrupt_after: NodeSet::None,
            durability: Durability::default(),
            timeout: None,
            context: None,
            metadata: Map::new(),
            run_id: None,
            cancel: None,
            control: None,
            on_task_end: None,
            on_complete: None,
            store: None,
            checkpoint_events: crate::stream::CheckpointEvents::Full,
            message_events: crate::stream::MessageEvents::All,
            early_checkpoint_events: false,
        }
    }
}

impl std::fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunConfig")
            .field("thread_id", &self.thread_id)
            .field("checkpoint_id", &self.checkpoint_id)
            .field("recursion_limit", &self.recursion_limit)
            .field("durability", &self.durability)
            .field("timeout", &self.timeout)
            .field("store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl RunConfig {
    /// A config for a thread.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: Some(thread_id.into()),
            ..Self::default()
        }
    }
    /// Set the superstep limit.
    #[must_use]
    pub fn recursion_limit(mut self, n: usize) -> Self {
        self.recursion_limit = n;
        self
    }
    /// Start from a checkpoint.
    #[must_use]
    pub fn checkpoint_id(mut self, id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }
    /// Set the durability mode.
    #[must_use]
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// Set the run timeout.
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// Pause before these nodes.
    #[must_use]
    pub fn interrupt_before(mut self, nodes: NodeSet) -> Self {
        self.interrupt_before = nodes;
        self
    }
    /// Pause after these nodes.
    #[must_use]
    pub fn interrupt_after(mut self, nodes: NodeSet) -> Self {
        self.interrupt_after = nodes;
        self
    }
    /// Hand a context value to every node ([`crate::Runtime::context`]).
    #[must_use]
    pub fn context<T: Any + Send + Sync>(mut self, ctx: T) -> Self {
        self.context = Some(Arc::new(ctx));
        self
    }
    /// Add a metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
    /// Set the run id.
    #[must_use]
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }
    /// Let `control` drain the run ([`RunConfig::control`]).
    #[must_use]
    pub fn control(mut self, control: RunControl) -> Self {
        self.control = Some(control);
        self
    }
    /// Use `store` as the run's long-term store instead of the graph's own
    /// ([`RunConfig::store`]).
    #[must_use]
    pub fn store(mut self, store: Arc<dyn DynStore>) -> Self {
        self.store = Some(store);
        self
    }
}

/// What a run starts from.
#[derive(Clone)]
pub enum RunInput<S: State> {
    /// New input: a partial update applied through the reducers.
    Update(S::Update),
    /// New input as JSON (decoded with the state's update decoder).
    Json(Value),
    /// Resume / update / goto.
    Command(Command<S>),
    /// Continue from the checkpoint: re-run what did not finish (after an error, a static
    /// interrupt, a limit).
    Continue,
}

/// `None` continues from the checkpoint, `Some(update)` is new input (LangGraph's
/// `invoke(None)` / `invoke(values)`).
impl<S: State> From<Option<S::Update>> for RunInput<S> {
    fn from(u: Option<S::Update>) -> Self {
        u.map_or(RunInput::Continue, RunInput::Update)
    }
}

/// A checkpoint's config as a run config: the same thread, from that checkpoint (what
/// [`CompiledGraph::update_state`](crate::CompiledGraph::update_state) returns can be run
/// as LangGraph's forks are).
impl From<crate::checkpoint::CheckpointConfig> for RunConfig {
    fn from(c: crate::checkpoint::CheckpointConfig) -> Self {
        let mut rc = RunConfig::thread(c.thread_id);
        rc.checkpoint_id = c.checkpoint_id;
        rc
    }
}

impl From<&crate::checkpoint::CheckpointConfig> for RunConfig {
    fn from(c: &crate::checkpoint::CheckpointConfig) -> Self {
        c.clone().into()
    }
}

impl From<&RunConfig> for RunConfig {
    fn from(c: &RunConfig) -> Self {
        c.clone()
    }
}

impl<S: State> From<Command<S>> for RunInput<S> {
    fn from(c: Command<S>) -> Self {
        RunInput::Command(c)
    }
}

/// Which stream modes a run emits and whether subgraph events are included.
#[derive(Clone, Debug, Default)]
pub struct StreamOptions {
    /// Modes to emit.
    pub modes: Vec<StreamMode>,
    /// Include events from subgraphs (tagged with their namespace).
    pub subgraphs: bool,
}

impl StreamOptions {
    /// These modes, root graph only.
    #[must_use]
    pub fn modes(modes: impl IntoIterator<Item = StreamMode>) -> Self {
        Self {
            modes: modes.into_iter().collect(),
            subgraphs: false,
        }
    }
    /// Also stream subgraph events.
    #[must_use]
    pub fn with_subgraphs(mut self) -> Self {
        self.subgraphs = true;
        self
    }
}
