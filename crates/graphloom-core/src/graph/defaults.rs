//! Graph-wide node policies ([`StateGraph::node_defaults`]): retry, cache, timeout and
//! error handler for every node that does not set its own.

use super::builder::StateGraph;
use super::node::{NodeFn, NodeInput, NodeSpec};
use crate::node_failure::NodeFailure;
use crate::runtime::Runtime;
use crate::state::State;
use crate::timeout::TimeoutPolicy;
use crate::types::{CachePolicy, NodeError, NodeOutput, RetryPolicy};
use std::future::Future;
use std::sync::Arc;

/// The handler's function as the executor calls it: the failure is in the runtime.
pub(crate) type HandlerFn<S> = NodeFn<S>;

/// Wrap a typed handler into the executor's form.
pub(crate) fn handler_fn<S, F, Fut, O>(f: F) -> HandlerFn<S>
where
    S: State,
    F: Fn(Arc<S>, NodeFailure, Runtime) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    O: Into<NodeOutput<S>>,
{
    Arc::new(move |input, rt: Runtime| {
        let failure = rt.ctx.failure.as_deref().cloned();
        match (input, failure) {
            (NodeInput::State(s), Some(failure)) => {
                let fut = f(s, failure, rt);
                Box::pin(async move { fut.await.map(Into::into) })
            }
            _ => Box::pin(async {
                Err(NodeError::fatal(
                    "an error handler ran without a failure to handle",
                ))
            }),
        }
    })
}

/// Policies for every node of a graph that does not set its own (LangGraph's
/// `set_node_defaults`). Subgraphs keep their own.
///
/// ```
/// use graphloom_core::{NodeDefaults, RetryPolicy, State, StateGraph, TimeoutPolicy, END, START};
/// use std::time::Duration;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S { note: String }
///
/// let g = StateGraph::<S>::new()
///     .node_defaults(
///         NodeDefaults::new()
///             .retry(RetryPolicy::attempts(3))
///             .timeout(TimeoutPolicy::idle(Duration::from_secs(30)))
///             .error_handler(|_s, failure, _rt| async move {
///                 Ok(SUpdate::new().note(format!("{} gave up: {}", failure.node, failure.message)))
///             }),
///     )
///     .add_node("a", |_s, _rt| async { Ok(SUpdate::new()) })
///     .add_edge(START, "a")
///     .add_edge("a", END)
///     .compile();
/// assert!(g.is_ok());
/// ```
#[must_use]
pub struct NodeDefaults<S: State> {
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) cache: Option<CachePolicy<S>>,
    pub(crate) timeout: Option<TimeoutPolicy>,
    pub(crate) error_handler: Option<HandlerFn<S>>,
}

impl<S: State> Default for NodeDefaults<S> {
    fn default() -> Self {
        Self {
            retry: None,
            cache: None,
            timeout: None,
            error_handler: None,
        }
    }
}

impl<S: State> NodeDefaults<S> {
    /// No defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Retry every node without a policy of its own.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }
    /// Cache every node without a policy of its own.
    pub fn cache(mut self, policy: CachePolicy<S>) -> Self {
        self.cache = Some(policy);
        self
    }
    /// Bound every node without a timeout of its own.
    pub fn timeout(mut self, timeout: impl Into<TimeoutPolicy>) -> Self {
        self.timeout = Some(timeout.into());
        self
    }
    /// Handle the failures of every node without a handler of its own.
    pub fn error_handler<F, Fut, O>(mut self, f: F) -> Self
    where
        F: Fn(Arc<S>, NodeFailure, Runtime) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S>>,
    {
        self.error_handler = Some(handler_fn(f));
        self
    }

    /// Fill in what `spec` does not set itself.
    pub(crate) fn apply(&self, spec: &mut NodeSpec<S>) {
        if spec.retry.is_none() {
            spec.retry.clone_from(&self.retry);
        }
        if spec.cache.is_none() {
            spec.cache.clone_from(&self.cache);
        }
        if spec.timeout.is_none() {
            spec.timeout = self.timeout;
        }
        if spec.error_handler.is_none() && self.error_handler.is_some() {
            spec.error_handler.clone_from(&self.error_handler);
            spec.default_handler = true;
        }
    }
}

impl<S: State> StateGraph<S> {
    /// Give `node` an error handler: once the node's retries are spent, `f` runs in its
    /// place with the node's input and the [`NodeFailure`], and what it returns (an update,
    /// a `Command` with `goto`) is the step's result for the node; the node's own edges are
    /// not followed. See [`crate::node_failure`].
    pub fn error_handler<F, Fut, O>(self, node: &str, f: F) -> Self
    where
        F: Fn(Arc<S>, NodeFailure, Runtime) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S>>,
    {
        let handler = handler_fn(f);
        self.with_spec(node, move |s| s.error_handler = Some(handler))
    }
}
