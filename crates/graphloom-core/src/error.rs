//! The error type of graphloom-core.
//!
//! Errors keep their cause: a node's own error and a backend's driver error travel as the
//! [`std::error::Error::source`] of [`Error::Node`] and [`BackendError`] (an
//! [`ErrorSource`]), so a caller, a retry predicate or a log can match on their type.

pub use crate::error_source::ErrorSource;
use crate::state::StateError;
use crate::types::{NodeError, NodeErrorKind};

/// Errors of a checkpointer or store backend, classified by [`BackendError::kind`] (the
/// server maps the kind to an HTTP status), with the driver's error as its source.
///
/// ```
/// use graphloom_core::{BackendError, BackendErrorKind};
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
/// let e = BackendError::new(BackendErrorKind::Connection, "postgres get_tuple: reset by peer").with_source(io);
/// assert_eq!(e.to_string(), "Connection: postgres get_tuple: reset by peer");
/// let cause = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
/// assert_eq!(cause.map(std::io::Error::kind), Some(std::io::ErrorKind::ConnectionReset));
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct BackendError {
    /// What sort of failure.
    pub kind: BackendErrorKind,
    /// Human-readable detail (never contains stored values).
    pub message: String,
    /// The driver's (or codec's) error, when there is one.
    #[source]
    source: Option<ErrorSource>,
}

/// Classes of backend failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// The connection failed or was lost; retrying may succeed.
    Connection,
    /// A stored row could not be decoded (corrupt, tampered, or wrong key).
    Corrupt,
    /// A uniqueness or other constraint was violated.
    Conflict,
    /// The request itself was invalid (bad namespace, missing id, ...).
    InvalidInput,
    /// The referenced thread or checkpoint does not exist.
    NotFound,
    /// Anything else.
    Other,
}

impl BackendError {
    /// A new error with no underlying error (the backend found the problem itself).
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }
    /// A new error caused by `source` (a driver error, say); the message is the backend's
    /// own account of it and is what `Display` shows.
    pub fn caused_by(
        kind: BackendErrorKind,
        message: impl Into<String>,
        source: impl Into<ErrorSource>,
    ) -> Self {
        Self::new(kind, message).with_source(source)
    }
    /// This error with `source` as its cause.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<ErrorSource>) -> Self {
        self.source = Some(source.into());
        self
    }
    /// The class of this error.
    #[must_use]
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }
    /// The first `E` in this error's source chain (the driver's error, say).
    #[must_use]
    pub fn find_source<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.as_ref().and_then(ErrorSource::find)
    }
}

/// Every error graphloom-core returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The graph definition is invalid; found when compiling.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// Merging a step's writes failed.
    #[error("state error at step {step}: {source}")]
    State {
        /// Superstep number.
        step: i64,
        /// The cause.
        #[source]
        source: StateError,
    },
    /// Decoding input or stored state failed.
    #[error(transparent)]
    Decode(StateError),
    /// A node failed (after its retries). The node's own error, when it returned one, is
    /// this error's [`source`](std::error::Error::source): downcast it to match on its type
    /// (or use [`Error::find_source`]).
    #[error("node `{node}` failed: {message}")]
    Node {
        /// The node (`?` when the run itself panicked).
        node: String,
        /// Its error message.
        message: String,
        /// Whether the failure was retryable ([`NodeErrorKind::Retryable`], and the node's
        /// retries ran out) or terminal.
        kind: NodeErrorKind,
        /// The node's own error.
        source: Option<ErrorSource>,
    },
    /// A node ran past its timeout (after its retries).
    #[error("node `{node}` {kind} {after_ms} ms")]
    NodeTimeout {
        /// The node.
        node: String,
        /// The limit that fired.
        after_ms: u64,
        /// Which limit: the hard run timeout or the idle timeout.
        kind: crate::timeout::TimeoutKind,
    },
    /// The superstep limit was reached. The run can be resumed with a higher limit.
    #[error("recursion limit of {limit} supersteps reached without hitting a stop condition; raise `recursion_limit` in the run config if the graph really needs more steps")]
    RecursionLimit {
        /// The limit in force.
        limit: usize,
    },
    /// A run budget was exhausted before a model call. Raise the budget and continue the
    /// run (`RunInput::Continue`): finished tasks are not run again.
    #[error("{budget} budget exceeded in node `{node}`: {message}")]
    BudgetExceeded {
        /// The node that hit it.
        node: String,
        /// Which budget.
        budget: String,
        /// Limit and usage.
        message: String,
    },
    /// The whole run took longer than its timeout. The run can be resumed.
    #[error("run timed out after {after_ms} ms")]
    RunTimeout {
        /// The timeout.
        after_ms: u64,
    },
    /// A routing function or `Command` named a node the graph does not have.
    #[error("unknown node `{0}` named by a route, Send or Command")]
    UnknownNode(String),
    /// A resume was given that no pending interrupt can take.
    #[error("invalid resume: {0}")]
    InvalidResume(String),
    /// A feature needs a checkpointer (interrupts, resume, history).
    #[error("{0} needs a checkpointer; compile the graph with one")]
    NoCheckpointer(&'static str),
    /// The thread or checkpoint asked for does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A stored checkpoint could not be read.
    #[error("corrupt checkpoint (thread `{thread_id}`, checkpoint `{checkpoint_id}`): {message}")]
    CorruptCheckpoint {
        /// Thread id.
        thread_id: String,
        /// Checkpoint id.
        checkpoint_id: String,
        /// What was wrong.
        message: String,
    },
    /// A checkpointer or store failed.
    #[error("backend: {0}")]
    Backend(#[from] BackendError),
    /// The run was cancelled.
    #[error("run cancelled")]
    Cancelled,
    /// The run was asked to drain ([`RunControl::drain`](crate::RunControl::drain)) and
    /// stopped at a superstep boundary: every step it ran is checkpointed, nothing is lost.
    /// Not a failure: invoke again on the same thread with
    /// [`RunInput::Continue`](crate::RunInput::Continue) to carry on (LangGraph's
    /// `GraphDrained`).
    #[error("run drained: stopped at a step boundary; invoke again to continue")]
    Drained,
}

impl Error {
    /// A node's failure with a message of the runtime's own and no underlying error.
    pub(crate) fn node_failed(node: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Node {
            node: node.into(),
            message: message.into(),
            kind: NodeErrorKind::Terminal,
            source: None,
        }
    }

    /// A node's failure caused by `source`; the message is `source`'s.
    pub(crate) fn node_caused_by(node: impl Into<String>, source: ErrorSource) -> Self {
        Error::Node {
            node: node.into(),
            message: source.to_string(),
            kind: NodeErrorKind::Terminal,
            source: Some(source),
        }
    }

    /// The error a node's [`NodeError`] ends the run with, once no retry is left.
    pub(crate) fn from_node(node: impl Into<String>, error: NodeError) -> Self {
        let node = node.into();
        let kind = error.kind();
        match error {
            NodeError::BudgetExceeded { budget, message } => Error::BudgetExceeded {
                node,
                budget,
                message,
            },
            NodeError::TimedOut { after_ms, kind } => Error::NodeTimeout { node, after_ms, kind },
            NodeError::Failed { message, source, .. } => Error::Node {
                node,
                message,
                kind,
                source,
            },
            other => Error::Node {
                node,
                message: other.to_string(),
                kind,
                source: None,
            },
        }
    }

    /// Whether the run failed on an invalid update, LangGraph's `InvalidUpdateError`:
    /// two writes in one step to a field that keeps one value per step, or two
    /// `Overwrite`s of one field ([`StateError::is_invalid_update`]). One test for both,
    /// wherever the step ran: the graph's own step ([`Error::State`]), a subgraph's, or
    /// a node that reports one as its error's source.
    ///
    /// ```
    /// use graphloom_core::{RunConfig, State, StateGraph, END, START};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { owner: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> graphloom_core::Result<()> {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("a", |_s, _rt| async { Ok(SUpdate::new().owner("a".into())) })
    ///     .add_node("b", |_s, _rt| async { Ok(SUpdate::new().owner("b".into())) })
    ///     .add_edge(START, "a")
    ///     .add_edge(START, "b")
    ///     .add_edge("a", END)
    ///     .add_edge("b", END)
    ///     .compile()?;
    /// let err = graph.invoke(SUpdate::new(), RunConfig::default()).await.unwrap_err();
    /// assert!(err.is_invalid_update());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn is_invalid_update(&self) -> bool {
        match self {
            Error::State { source, .. } => source.is_invalid_update(),
            _ => self
                .find_source::<StateError>()
                .is_some_and(StateError::is_invalid_update),
        }
    }

    /// The first `E` in this error's source chain: a node's own error, a backend's driver
    /// error, ...
    ///
    /// ```
    /// use graphloom_core::{NodeError, RunConfig, State, StateGraph, END, START};
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("card declined")]
    /// struct Declined;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { n: i64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> graphloom_core::Result<()> {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("pay", |_s, _rt| async { Err::<SUpdate, _>(NodeError::terminal(Declined)) })
    ///     .add_edge(START, "pay")
    ///     .add_edge("pay", END)
    ///     .compile()?;
    /// let err = graph.invoke(SUpdate::new(), RunConfig::default()).await.unwrap_err();
    /// assert_eq!(err.to_string(), "node `pay` failed: card declined");
    /// assert!(err.find_source::<Declined>().is_some());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn find_source<E: std::error::Error + 'static>(&self) -> Option<&E> {
        std::error::Error::source(self).and_then(crate::error_source::find_in_chain)
    }
}

/// `Result` with [`Error`] as default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
