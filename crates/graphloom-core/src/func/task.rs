//! [`Task`]: a durable step of an entrypoint, and the future a call of it returns.

use super::context::TaskContext;
use crate::types::NodeError;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

type TaskFn<A, O> = dyn Fn(A, TaskContext) -> BoxFuture<'static, Result<O, NodeError>> + Send + Sync;

/// A named async function an entrypoint calls through its context
/// ([`EntrypointCtx::call`](super::EntrypointCtx::call)), LangGraph's `@task`.
///
/// Each call's result is saved with the entrypoint's checkpoint as soon as the task
/// returns; when the entrypoint runs again (after an interrupt, an error or a crash) the
/// same call (same position in the call order, same task name) returns the saved result
/// instead of running the task again. Arguments and results travel as JSON only to and
/// from the checkpoint: the result type must round-trip through `serde`.
///
/// ```
/// use graphloom_core::func::Task;
///
/// let double = Task::new("double", |x: i64, _ctx| async move { Ok(x * 2) });
/// assert_eq!(double.name(), "double");
/// ```
pub struct Task<A, O> {
    pub(crate) name: Arc<str>,
    pub(crate) f: Arc<TaskFn<A, O>>,
}

impl<A, O> Clone for Task<A, O> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            f: Arc::clone(&self.f),
        }
    }
}

impl<A, O> Task<A, O>
where
    A: Send + 'static,
    O: Serialize + DeserializeOwned + Send + 'static,
{
    /// A task called `name` running `f(args, ctx)`.
    pub fn new<F, Fut>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(A, TaskContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    {
        let name: String = name.into();
        Self {
            name: Arc::from(name),
            f: Arc::new(move |a, ctx| Box::pin(f(a, ctx))),
        }
    }
}

impl<A, O> Task<A, O> {
    /// The task's name (it shows in `updates` events and keys its saved results).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The result of one task call: already running (it was spawned when called), resolved
/// by awaiting. Several calls awaited together (`futures::join!`, `try_join_all`) run in
/// parallel. Dropping it before it resolves stops the task.
#[must_use = "a task call does nothing useful unless its result is awaited"]
pub struct TaskCall<O> {
    pub(crate) inner: CallInner<O>,
}

pub(crate) enum CallInner<O> {
    /// Replayed from the checkpoint, or failed before it started.
    Ready(Option<Result<O, NodeError>>),
    /// Running.
    Running(tokio::task::JoinHandle<Result<O, NodeError>>),
}

// The result is only moved out, never pinned: a call can move freely.
impl<O> Unpin for TaskCall<O> {}

impl<O> Future for TaskCall<O> {
    type Output = Result<O, NodeError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            CallInner::Ready(r) => Poll::Ready(
                r.take()
                    .unwrap_or_else(|| Err(NodeError::fatal("a task call was awaited after it resolved"))),
            ),
            CallInner::Running(h) => Pin::new(h).poll(cx).map(|joined| {
                joined
                    .unwrap_or_else(|e| Err(NodeError::fatal(format!("task panicked or was cancelled: {e}"))))
            }),
        }
    }
}

impl<O> Drop for TaskCall<O> {
    fn drop(&mut self) {
        if let CallInner::Running(h) = &self.inner {
            h.abort();
        }
    }
}

/// A task's saved result no longer decodes into the task's output type (its code changed
/// since the result was saved). The entrypoint fails with this error as the source of its
/// [`Error::Node`](crate::Error::Node), rather than silently running the task again;
/// find it with [`Error::find_source`](crate::Error::find_source).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("the saved result of task `{task}` (call #{call} of its caller) does not decode into the task's output type: {message}")]
pub struct TaskResultDecodeError {
    /// The task's name.
    pub task: String,
    /// Position of the call among its caller's task calls (from 0).
    pub call: usize,
    /// The decoder's message.
    pub message: String,
}
