//! [`Entrypoint`] (the builder) and [`CompiledEntrypoint`] (run it, stream it, read its
//! threads): an entrypoint is a one-node graph over [`FuncState`], run by the same
//! executor, checkpointers and APIs as any graph.

use super::context::{load_saved, EntrypointCtx, FuncRun};
use super::state::{FuncState, FuncUpdate};
use crate::checkpoint::{CheckpointConfig, Checkpointer, DynCheckpointer};
use crate::config::{RunConfig, RunInput, StreamOptions};
use crate::error::{Error, Result};
use crate::graph::{CompiledGraph, HistoryQuery, RunEvent, RunOutput, RunStatus, StateGraph, StateSnapshot};
use crate::runtime::Runtime;
use crate::state::StateError;
use crate::store::{DynStore, Store};
use crate::stream::{StreamData, StreamPart};
use crate::types::{Command, Interrupt, NodeError, RetryPolicy, END, START};
use futures::stream::BoxStream;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// What an entrypoint returns: the value for the caller, and optionally another value to
/// save as `previous` for the next run on the thread (LangGraph's `entrypoint.final`).
/// Any `O` converts into a `Final<O>` that saves the value it returns.
#[derive(Debug, Clone)]
pub struct Final<O> {
    value: O,
    save: Option<std::result::Result<Value, String>>,
}

impl<O> Final<O> {
    /// Return `value` to the caller and save `save` as `previous`.
    pub fn new(value: O, save: impl Serialize) -> Self {
        Self {
            value,
            save: Some(serde_json::to_value(save).map_err(|e| e.to_string())),
        }
    }
}

impl<O> From<O> for Final<O> {
    fn from(value: O) -> Self {
        Self { value, save: None }
    }
}

/// A durable async function `(input, ctx) -> output`, LangGraph's `@entrypoint`: build it,
/// give it a checkpointer (and a store), compile it.
///
/// ```
/// use graphloom_core::checkpoint::InMemorySaver;
/// use graphloom_core::func::{Entrypoint, Task};
/// use graphloom_core::{Command, RunConfig, RunStatus};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> graphloom_core::Result<()> {
/// let draft = Task::new("draft", |topic: String, _ctx| async move { Ok(format!("essay on {topic}")) });
/// let review = Entrypoint::<String, String>::new("review", move |topic, ctx| {
///     let draft = draft.clone();
///     async move {
///         let text = ctx.call(&draft, topic).await?;
///         let verdict = ctx.interrupt(format!("approve `{text}`?"))?;
///         Ok(format!("{text}: {}", verdict.as_str().unwrap_or("?")))
///     }
/// })
/// .checkpointer(InMemorySaver::new())
/// .compile()?;
///
/// let cfg = RunConfig::thread("t1");
/// let paused = review.invoke("cats".into(), cfg.clone()).await?;
/// assert_eq!(paused.status, RunStatus::Interrupted);
/// let done = review.resume(Command::resume("ok"), cfg).await?;
/// assert_eq!(done.value.as_deref(), Some("essay on cats: ok"));
/// # Ok(()) }
/// ```
#[must_use]
pub struct Entrypoint<I, O> {
    name: String,
    graph: StateGraph<FuncState>,
    _io: PhantomData<fn(I) -> O>,
}

impl<I, O> Entrypoint<I, O>
where
    I: DeserializeOwned + Serialize + Send + 'static,
    O: Serialize + DeserializeOwned + Send + 'static,
{
    /// An entrypoint called `name` running `f(input, ctx)`. `f` returns an `O`, or a
    /// [`Final<O>`] to save something else as `previous`.
    pub fn new<F, Fut, R>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(I, EntrypointCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<R, NodeError>> + Send + 'static,
        R: Into<Final<O>> + Send + 'static,
    {
        let name: String = name.into();
        let f = Arc::new(f);
        let graph = StateGraph::with_shape(FuncState::default())
            .name(name.clone())
            .add_node(name.clone(), move |s: Arc<FuncState>, rt: Runtime| {
                let f = Arc::clone(&f);
                async move { run_entrypoint::<I, O, F, Fut, R>(&f, &s, rt).await }
            })
            .add_edge(START, name.clone())
            .add_edge(name.clone(), END);
        Self {
            name,
            graph,
            _io: PhantomData,
        }
    }

    /// Persist runs with `saver` (needed for interrupts, `previous` and replay).
    pub fn checkpointer(mut self, saver: impl Checkpointer) -> Self {
        self.graph = self.graph.checkpointer(saver);
        self
    }

    /// [`Self::checkpointer`] with a shared, type-erased saver.
    pub fn checkpointer_dyn(mut self, saver: Arc<dyn DynCheckpointer>) -> Self {
        self.graph = self.graph.checkpointer_dyn(saver);
        self
    }

    /// The long-term memory store handed to the entrypoint and its tasks.
    pub fn store(mut self, store: impl Store) -> Self {
        self.graph = self.graph.store(store);
        self
    }

    /// [`Self::store`] with a shared, type-erased store.
    pub fn store_dyn(mut self, store: Arc<dyn DynStore>) -> Self {
        self.graph = self.graph.store_dyn(store);
        self
    }

    /// Retry the entrypoint on failure. A retried attempt replays the task calls that
    /// finished in earlier attempts.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.graph = self.graph.retry(&self.name, policy);
        self
    }

    /// Build the runnable entrypoint.
    ///
    /// # Errors
    /// As [`StateGraph::compile`] (not expected for this fixed one-node shape).
    pub fn compile(self) -> Result<CompiledEntrypoint<I, O>> {
        let mut graph = self.graph.compile()?;
        // Number the steps as the functional API does: `-1` the input (the entrypoint
        // next), `0` the entrypoint's step.
        if let Some(inner) = Arc::get_mut(&mut graph.inner) {
            inner.input_runs_start = true;
        }
        Ok(CompiledEntrypoint {
            graph,
            name: Arc::from(self.name),
            _io: PhantomData,
        })
    }
}

async fn run_entrypoint<I, O, F, Fut, R>(
    f: &F,
    s: &FuncState,
    rt: Runtime,
) -> std::result::Result<Option<FuncUpdate>, NodeError>
where
    I: DeserializeOwned,
    O: Serialize,
    F: Fn(I, EntrypointCtx) -> Fut,
    Fut: Future<Output = std::result::Result<R, NodeError>>,
    R: Into<Final<O>>,
{
    let input: I = serde_json::from_value(s.input().clone()).map_err(|e| {
        NodeError::terminal(StateError::Decode {
            field: "input".into(),
            message: e.to_string(),
        })
    })?;
    let saved = load_saved(&rt).await?;
    let ctx = EntrypointCtx {
        run: Arc::new(FuncRun {
            rt,
            saved,
            previous: s.previous().clone(),
        }),
        calls: Arc::new(AtomicUsize::new(0)),
    };
    let fin: Final<O> = f(input, ctx).await?.into();
    let output = serde_json::to_value(&fin.value).map_err(|e| {
        NodeError::terminal(StateError::Decode {
            field: "output".into(),
            message: e.to_string(),
        })
    })?;
    let previous = match fin.save {
        None => output.clone(),
        Some(Ok(v)) => v,
        Some(Err(message)) => {
            return Err(NodeError::terminal(StateError::Decode {
                field: "previous".into(),
                message,
            }))
        }
    };
    Ok(Some(FuncUpdate {
        input: None,
        output: Some(output),
        previous: Some(previous),
    }))
}

/// The result of an entrypoint run.
#[derive(Debug, Clone)]
pub struct EntrypointOutput<O> {
    /// The return value (`None` while interrupted).
    pub value: Option<O>,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// Done or interrupted.
    pub status: RunStatus,
    /// The checkpoint the run ended on (when it persists).
    pub config: Option<CheckpointConfig>,
}

/// A compiled [`Entrypoint`]. Cheap to clone.
pub struct CompiledEntrypoint<I, O> {
    graph: CompiledGraph<FuncState>,
    name: Arc<str>,
    _io: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for CompiledEntrypoint<I, O> {
    fn clone(&self) -> Self {
        Self {
            graph: self.graph.clone(),
            name: Arc::clone(&self.name),
            _io: PhantomData,
        }
    }
}

impl<I, O> CompiledEntrypoint<I, O>
where
    I: Serialize,
    O: DeserializeOwned,
{
    /// The entrypoint's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The graph the entrypoint runs as: every [`CompiledGraph`] API works on it
    /// (`get_state_history`, `update_state`, forks, `stream` with raw payloads, use as a
    /// subgraph).
    #[must_use]
    pub fn graph(&self) -> &CompiledGraph<FuncState> {
        &self.graph
    }

    /// `input` as a run input of the underlying graph.
    ///
    /// # Errors
    /// [`Error::Decode`] naming `input` when it does not serialise.
    pub fn run_input(&self, input: &I) -> Result<RunInput<FuncState>> {
        let v = serde_json::to_value(input).map_err(|e| {
            Error::Decode(StateError::Decode {
                field: "input".into(),
                message: e.to_string(),
            })
        })?;
        Ok(RunInput::Update(FuncUpdate {
            input: Some(v),
            ..FuncUpdate::default()
        }))
    }

    /// Run with new input until the entrypoint returns or pauses.
    ///
    /// # Errors
    /// The run's error: the entrypoint's ([`Error::Node`] naming it), a backend's, ...
    pub async fn invoke(&self, input: I, config: RunConfig) -> Result<EntrypointOutput<O>> {
        let input = self.run_input(&input)?;
        self.invoke_input(input, config).await
    }

    /// Resume pending interrupts (`Command::resume`), or continue after an error or a
    /// crash with a `Command` that has no resume.
    ///
    /// # Errors
    /// As [`Self::invoke`]; [`Error::InvalidResume`] when nothing is pending.
    pub async fn resume(&self, cmd: Command<FuncState>, config: RunConfig) -> Result<EntrypointOutput<O>> {
        self.invoke_input(RunInput::Command(cmd), config).await
    }

    /// Run from any input of the underlying graph (`RunInput::Continue` re-runs an
    /// entrypoint that failed or whose process died).
    ///
    /// # Errors
    /// As [`Self::invoke`].
    pub async fn invoke_input(
        &self,
        input: RunInput<FuncState>,
        config: RunConfig,
    ) -> Result<EntrypointOutput<O>> {
        let out = self.graph.invoke_input(input, config).await?;
        decode_output(out)
    }

    /// Run with new input and stream events, shaped as LangGraph streams an entrypoint:
    /// `updates` gives `{task: result}` as each task call finishes and `{entrypoint:
    /// return value}` at the end, `values` the return value, `custom` what the
    /// entrypoint and its tasks write. Ends with exactly one [`RunEvent::End`].
    pub fn stream(
        &self,
        input: I,
        config: RunConfig,
        opts: StreamOptions,
    ) -> BoxStream<'static, RunEvent<FuncState>> {
        match self.run_input(&input) {
            Ok(i) => self.stream_input(i, config, opts),
            Err(e) => futures::stream::once(async move { RunEvent::End(Err(e)) }).boxed(),
        }
    }

    /// [`Self::stream`] from any input of the underlying graph, as a graph's
    /// [`CompiledGraph::stream`] takes it: `Command::resume(v)` resumes a paused
    /// entrypoint (LangGraph's `wf.stream(Command(resume=v), cfg)`), `None` continues.
    /// The finished task calls are replayed, not run again.
    pub fn stream_input(
        &self,
        input: impl Into<RunInput<FuncState>>,
        config: RunConfig,
        opts: StreamOptions,
    ) -> BoxStream<'static, RunEvent<FuncState>> {
        let name = Arc::clone(&self.name);
        self.graph
            .stream(input, config, opts)
            .filter_map(move |ev| {
                let ev = match ev {
                    RunEvent::Part(p) => reshape(&name, p).map(RunEvent::Part),
                    end => Some(end),
                };
                futures::future::ready(ev)
            })
            .boxed()
    }

    /// The thread's state: `values.output()` is the last return value, `next` names the
    /// entrypoint while it is paused or failed, `interrupts` what it waits for.
    ///
    /// # Errors
    /// As [`CompiledGraph::get_state`].
    pub async fn get_state(&self, config: &RunConfig) -> Result<StateSnapshot<FuncState>> {
        self.graph.get_state(config).await
    }

    /// The thread's checkpoints, newest first, numbered as the functional API numbers
    /// them: a run's input at its first step (`-1` on a new thread, source `input`, the
    /// entrypoint next), the entrypoint's step after it (source `loop`).
    ///
    /// # Errors
    /// As [`CompiledGraph::get_state_history`].
    pub async fn get_state_history(
        &self,
        config: &RunConfig,
        query: impl Into<Option<HistoryQuery>>,
    ) -> Result<Vec<StateSnapshot<FuncState>>> {
        self.graph.get_state_history(config, query).await
    }
}

/// An entrypoint's stream part as LangGraph shapes it, or `None` to drop it.
fn reshape(name: &str, p: StreamPart) -> Option<StreamPart> {
    match &p.data {
        // The step that only applied the input has no return value to show.
        StreamData::Values(_) => p
            .values::<FuncState>()
            .is_none_or(FuncState::returned)
            .then_some(p),
        StreamData::Update { node, update } if node == name => {
            let out = update
                .as_any()
                .downcast_ref::<FuncUpdate>()
                .and_then(|u| u.output.clone())
                .unwrap_or(Value::Null);
            Some(StreamPart {
                ns: p.ns,
                mode: p.mode,
                data: StreamData::Update {
                    node: node.clone(),
                    update: Arc::new(out),
                },
            })
        }
        _ => Some(p),
    }
}

fn decode_output<O: DeserializeOwned>(out: RunOutput<FuncState>) -> Result<EntrypointOutput<O>> {
    let value = match out.status {
        RunStatus::Done => Some(serde_json::from_value(out.values.output().clone()).map_err(|e| {
            Error::Decode(StateError::Decode {
                field: "output".into(),
                message: e.to_string(),
            })
        })?),
        RunStatus::Interrupted => None,
    };
    Ok(EntrypointOutput {
        value,
        interrupts: out.interrupts,
        status: out.status,
        config: out.config,
    })
}
