//! The error type of graphloom-core.

use crate::state::StateError;

/// Errors of a checkpointer or store backend, classified by [`BackendError::kind`].
#[derive(Debug, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct BackendError {
    /// What sort of failure.
    pub kind: BackendErrorKind,
    /// Human-readable detail (never contains stored values).
    pub message: String,
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
    /// A new error.
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    /// The class of this error.
    #[must_use]
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
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
    /// A node failed (after its retries).
    #[error("node `{node}` failed: {message}")]
    Node {
        /// The node.
        node: String,
        /// Its error message.
        message: String,
    },
    /// A node ran past its timeout (after its retries).
    #[error("node `{node}` timed out after {after_ms} ms")]
    NodeTimeout {
        /// The node.
        node: String,
        /// The timeout.
        after_ms: u64,
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
}

/// `Result` with [`Error`] as default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
