//! What an entrypoint and its tasks receive: [`EntrypointCtx`] and [`TaskContext`].

use super::task::{CallInner, Task, TaskCall, TaskResultDecodeError};
use crate::runtime::{interrupt_id, Runtime};
use crate::store::DynStore;
use crate::stream::{StreamData, StreamMode};
use crate::types::{Interrupt, NodeError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One attempt of an entrypoint: its runtime, and the task results saved before it.
pub(crate) struct FuncRun {
    pub rt: Runtime,
    /// Saved task results of the entrypoint's checkpoint, by task call id.
    pub saved: HashMap<String, Value>,
    /// The value the last run on the thread saved.
    pub previous: Value,
}

/// Load the task results saved against the checkpoint the entrypoint runs from.
///
/// A checkpoint not readable yet is the one a new input's first step is still saving
/// (`sync` mode issues it while the first node starts). No task may run a side effect
/// before it is durable — a crash would lose it and the re-run would give every call a new
/// id — so a marker write is saved against it first: backends that save in order make the
/// checkpoint durable no later than a write issued after it, and the others saved it
/// before the node started.
pub(crate) async fn load_saved(rt: &Runtime) -> Result<HashMap<String, Value>, NodeError> {
    let Some(sc) = rt.ctx.step_checkpoint.as_ref() else {
        return Ok(HashMap::new());
    };
    let tuple = sc
        .saver
        .get_tuple(&sc.config)
        .await
        .map_err(|e| NodeError::new(format!("reading the saved task results: {e}")).with_source(e))?;
    let Some(tuple) = tuple else {
        let ns = rt.ctx.ns.join("|");
        let marker = crate::pregel::task::task_id(&rt.ctx.task_id, &ns, rt.ctx.step, &rt.ctx.node, "started");
        sc.saver
            .put_writes(
                &sc.config,
                vec![(crate::checkpoint::NO_WRITES.to_owned(), Value::Null)],
                &marker,
                "",
            )
            .await
            .map_err(|e| NodeError::new(format!("saving the entrypoint's start: {e}")).with_source(e))?;
        return Ok(HashMap::new());
    };
    Ok(tuple
        .pending_writes
        .into_iter()
        .filter(|w| w.channel == super::RETURN)
        .map(|w| (w.task_id, w.value))
        .collect())
}

/// Call `task` as the `idx`-th call of the caller with id `parent`.
fn call_in<A, O>(run: &Arc<FuncRun>, parent: &str, idx: usize, task: &Task<A, O>, args: A) -> TaskCall<O>
where
    A: Send + 'static,
    O: Serialize + DeserializeOwned + Send + 'static,
{
    let rt = &run.rt;
    let ns = rt.ctx.ns.join("|");
    let id = crate::pregel::task::task_id(parent, &ns, rt.ctx.step, &task.name, &format!("call:{idx}"));
    if let Some(saved) = run.saved.get(&id) {
        let out = serde_json::from_value::<O>(saved.clone()).map_err(|e| {
            NodeError::terminal(TaskResultDecodeError {
                task: task.name.to_string(),
                call: idx,
                message: e.to_string(),
            })
        });
        return TaskCall {
            inner: CallInner::Ready(Some(out)),
        };
    }
    let ctx = TaskContext {
        run: Arc::clone(run),
        name: Arc::clone(&task.name),
        id: Arc::from(id.as_str()),
        interrupts: Arc::new(AtomicUsize::new(0)),
        calls: Arc::new(AtomicUsize::new(0)),
    };
    let fut = (task.f)(args, ctx.clone());
    let handle = tokio::spawn(tracing::Instrument::in_current_span(async move {
        let out = fut.await?;
        let value = serde_json::to_value(&out).map_err(NodeError::terminal)?;
        if let Some(sc) = ctx.run.rt.ctx.step_checkpoint.as_ref() {
            sc.saver
                .put_writes(
                    &sc.config,
                    vec![(super::RETURN.to_owned(), value.clone())],
                    &ctx.id,
                    "",
                )
                .await
                .map_err(|e| {
                    NodeError::new(format!("saving the result of task `{}`: {e}", ctx.name)).with_source(e)
                })?;
        }
        let run = &ctx.run.rt.ctx.run;
        let ns = &ctx.run.rt.ctx.ns;
        if run.wants(StreamMode::Updates, ns.len()) {
            run.emit(
                ns,
                StreamMode::Updates,
                StreamData::Update {
                    node: ctx.name.to_string(),
                    update: Arc::new(value),
                },
            );
        }
        Ok(out)
    }));
    TaskCall {
        inner: CallInner::Running(handle),
    }
}

/// What an entrypoint receives besides its input: task calls, `interrupt()`, the stream
/// writer, the store, and the value the previous run on the thread saved.
#[derive(Clone)]
pub struct EntrypointCtx {
    pub(crate) run: Arc<FuncRun>,
    pub(crate) calls: Arc<AtomicUsize>,
}

impl EntrypointCtx {
    /// Call `task` with `args`. The task starts at once (it is spawned); await the
    /// returned [`TaskCall`] for its result. Calls awaited together run in parallel.
    ///
    /// A call whose result was saved by an earlier attempt of this entrypoint (before an
    /// interrupt, an error or a crash) returns that result without running the task.
    /// Calls are matched by their order and the task's name, so the entrypoint must call
    /// its tasks in a deterministic order.
    pub fn call<A, O>(&self, task: &Task<A, O>, args: A) -> TaskCall<O>
    where
        A: Send + 'static,
        O: Serialize + DeserializeOwned + Send + 'static,
    {
        let idx = self.calls.fetch_add(1, Ordering::SeqCst);
        call_in(&self.run, &self.run.rt.ctx.task_id, idx, task, args)
    }

    /// Pause the run and ask the caller for a value, as [`Runtime::interrupt`]: the first
    /// time this returns `Err(NodeError::Interrupted)` (propagate it with `?`); after
    /// `Command::resume`, the entrypoint runs again from its start (finished task calls
    /// replayed) and this returns the resume value.
    ///
    /// # Errors
    /// [`NodeError::Interrupted`] when no resume value is waiting.
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, NodeError> {
        self.run.rt.interrupt(value)
    }

    /// The value the last completed run on this thread saved (its return value, or the
    /// `save` of its [`Final`](super::Final)), decoded as `P`; `None` on a new thread.
    ///
    /// # Errors
    /// A terminal error naming `previous` when the saved value does not decode as `P`.
    pub fn previous<P: DeserializeOwned>(&self) -> Result<Option<P>, NodeError> {
        if self.run.previous.is_null() {
            return Ok(None);
        }
        serde_json::from_value(self.run.previous.clone())
            .map(Some)
            .map_err(|e| {
                NodeError::terminal(crate::state::StateError::Decode {
                    field: "previous".into(),
                    message: e.to_string(),
                })
            })
    }

    /// Write a `custom` stream event.
    pub fn write(&self, value: impl Serialize) {
        self.run.rt.write(value);
    }

    /// The run's long-term memory store, if it has one.
    #[must_use]
    pub fn store(&self) -> Option<&Arc<dyn DynStore>> {
        self.run.rt.store()
    }

    /// The runtime of the graph node the entrypoint runs as (config, context, ids).
    #[must_use]
    pub fn runtime(&self) -> &Runtime {
        &self.run.rt
    }
}

/// What a task receives: `interrupt()`, the stream writer, the store, its id, and calls
/// of further tasks.
#[derive(Clone)]
pub struct TaskContext {
    run: Arc<FuncRun>,
    name: Arc<str>,
    id: Arc<str>,
    interrupts: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl TaskContext {
    /// The task's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime of the entrypoint that called this task (thread and run ids, context).
    #[must_use]
    pub fn runtime(&self) -> &Runtime {
        &self.run.rt
    }

    /// This call's id: the same for the same call (caller, position, task name) across
    /// retries, interrupts and crashes of the entrypoint.
    #[must_use]
    pub fn task_id(&self) -> &str {
        &self.id
    }

    /// An idempotency key for a side effect of this call, stable across re-runs of the
    /// entrypoint (thread, call id and `suffix`).
    #[must_use]
    pub fn idempotency_key(&self, suffix: &str) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(self.run.rt.thread_id().unwrap_or("").as_bytes());
        h.update(b"|");
        h.update(self.id.as_bytes());
        h.update(b"|");
        h.update(suffix.as_bytes());
        format!("{:032x}", h.digest128())
    }

    /// Pause the run and ask the caller for a value. The first time this returns
    /// `Err(NodeError::Interrupted)` (propagate it with `?`: the entrypoint's `await` of
    /// this call then returns it, and the entrypoint propagates it too). On resume the
    /// entrypoint runs again, calls this task again (it had not finished), and this returns
    /// the resume value. Several calls in one task are matched by their order.
    ///
    /// # Errors
    /// [`NodeError::Interrupted`] when no resume value is waiting.
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, NodeError> {
        let ctx = &self.run.rt.ctx;
        let idx = self.interrupts.fetch_add(1, Ordering::SeqCst);
        let id = interrupt_id(&ctx.ns, &self.id, idx);
        if let Some(v) = ctx.resumed.get(&id) {
            return Ok(v.clone());
        }
        if let Some(v) = ctx.run.take_resume(&id) {
            ctx.consumed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(id, v.clone());
            return Ok(v);
        }
        let value = serde_json::to_value(value).map_err(NodeError::terminal)?;
        Err(NodeError::Interrupted(vec![Interrupt {
            id,
            value,
            response_schema: None,
        }]))
    }

    /// Call another task from this one (its result is saved and replayed like the
    /// entrypoint's calls).
    pub fn call<A, O>(&self, task: &Task<A, O>, args: A) -> TaskCall<O>
    where
        A: Send + 'static,
        O: Serialize + DeserializeOwned + Send + 'static,
    {
        let idx = self.calls.fetch_add(1, Ordering::SeqCst);
        call_in(&self.run, &self.id, idx, task, args)
    }

    /// Write a `custom` stream event.
    pub fn write(&self, value: impl Serialize) {
        self.run.rt.write(value);
    }

    /// The run's long-term memory store, if it has one.
    #[must_use]
    pub fn store(&self) -> Option<&Arc<dyn DynStore>> {
        self.run.rt.store()
    }
}
