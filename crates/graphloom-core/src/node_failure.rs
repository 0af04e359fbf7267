//! Error handlers: what a node's handler is told about the failure it handles.
//!
//! A node given an error handler ([`StateGraph::error_handler`](crate::StateGraph::error_handler),
//! or for every node [`StateGraph::node_defaults`](crate::StateGraph::node_defaults)) does
//! not fail the run once its retries are spent: the handler runs instead, in the same
//! step, with the node's input and a [`NodeFailure`], and its output (an update, a
//! `Command` with `goto`) takes the node's place. The node's own edges are not followed: a
//! handler that routes nowhere ends the branch. Its update streams under the name
//! `__error_handler__<node>` (the graph's default handler: `__default_error_handler__`).
//!
//! The failure is saved (as the failed task's pending writes) before the handler starts,
//! so a run stopped while the handler runs (a crash, a cancel) resumes into the handler,
//! never into the node again. A handler that fails fails the run; a handler that
//! interrupts pauses it, and the resume runs the handler again.

use crate::error_source::ErrorSource;
use crate::types::{NodeError, NodeErrorKind};
use serde_json::{json, Value};

/// The name the graph's default handler runs (and streams its update) under.
pub(crate) const DEFAULT_HANDLER: &str = "__default_error_handler__";

/// The name a node's own handler runs (and streams its update) under; it also names the
/// handler's task id.
pub(crate) fn handler_name(node: &str) -> String {
    format!("__error_handler__{node}")
}

/// What a node's error handler is told about the failure.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeFailure {
    /// The node that failed.
    pub node: String,
    /// What sort of failure it was.
    pub kind: NodeErrorKind,
    /// The error's message.
    pub message: String,
    /// How many attempts the node made (the first included).
    pub attempts: usize,
    /// The node's own error, when it returned one. `None` in a handler resumed after the
    /// run stopped: only the kind, the message and the attempts are saved.
    pub source: Option<ErrorSource>,
}

impl NodeFailure {
    pub(crate) fn new(node: &str, error: &NodeError, attempts: usize) -> Self {
        Self {
            node: node.to_owned(),
            kind: error.kind(),
            message: error.to_string(),
            attempts,
            source: error.source().cloned(),
        }
    }

    /// The first `E` in the node's own error or its source chain.
    #[must_use]
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.as_ref().and_then(ErrorSource::find)
    }

    /// The saved form: the failed task's pending write that says its handler is due.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "node": self.node,
            "kind": kind_name(self.kind),
            "message": self.message,
            "attempts": self.attempts,
        })
    }

    pub(crate) fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            node: v.get("node")?.as_str()?.to_owned(),
            kind: kind_from(v.get("kind")?.as_str()?),
            message: v.get("message")?.as_str()?.to_owned(),
            attempts: usize::try_from(v.get("attempts")?.as_u64()?).ok()?,
            source: None,
        })
    }
}

fn kind_name(k: NodeErrorKind) -> &'static str {
    match k {
        NodeErrorKind::Retryable => "retryable",
        NodeErrorKind::TimedOut => "timed_out",
        NodeErrorKind::BudgetExceeded => "budget_exceeded",
        NodeErrorKind::Interrupted => "interrupted",
        NodeErrorKind::ParentCommand => "parent_command",
        _ => "terminal",
    }
}

fn kind_from(s: &str) -> NodeErrorKind {
    match s {
        "retryable" => NodeErrorKind::Retryable,
        "timed_out" => NodeErrorKind::TimedOut,
        "budget_exceeded" => NodeErrorKind::BudgetExceeded,
        "interrupted" => NodeErrorKind::Interrupted,
        "parent_command" => NodeErrorKind::ParentCommand,
        _ => NodeErrorKind::Terminal,
    }
}

impl std::fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node `{}` failed after {} attempt(s): {}",
            self.node, self.attempts, self.message
        )
    }
}
