//! `messages` stream mode: the tokens of models called inside a node, and the messages a
//! node returns.
//!
//! LangGraph emits, in `messages` mode, (a) the chunks of every chat model that streams
//! inside a node, with the node's metadata, and (b) every message a node returns in its
//! update that was neither streamed already nor part of the node's input, whole, once,
//! with the node's metadata (a message without an id gets one). Messages of a subgraph
//! carry its namespace; without subgraph streaming they surface when the parent's node
//! returns them.
//!
//! For (a), while a run streams `messages`, each of its tasks runs with its [`Runtime`] in
//! scope ([`current`]); model calls consult it (graphloom-llm's providers do) and stream
//! their chunks to it without the node opting in. For (b), the executor hands each
//! finished node's update to [`emit_returned`]. Both record message ids in the run's
//! `seen` set, which is what keeps a streamed answer from being emitted again whole. A
//! run that does not stream `messages` pays for none of it: nothing is scoped, nothing
//! is looked at.

use crate::graph::node::NodeInput;
use crate::runtime::Runtime;
use crate::state::State;
use crate::types::{CommandGraph, NodeOutput};
use std::future::Future;

tokio::task_local! {
    static CURRENT: Option<Runtime>;
}

/// The runtime of the node running on this tokio task, when its run streams in `messages`
/// mode at the node's depth, or streams `events`; `None` otherwise (and outside nodes).
///
/// Model calls use it to stream their tokens into the run as `messages` events (with
/// [`Runtime::emit_message`]) without the node asking. A task the node spawns does not
/// inherit it; a model called there streams nothing unless the node passes its runtime
/// (graphloom-llm's `stream_into`).
#[must_use]
pub fn current() -> Option<Runtime> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// Run `f` with no runtime in scope: model calls inside stream no tokens. For a layer
/// that forwards the chunks itself, so the model it wraps does not forward them again.
pub fn without<R>(f: impl FnOnce() -> R) -> R {
    CURRENT.sync_scope(None, f)
}

/// Run `fut` with `rt` (or none) as [`current`].
pub(crate) async fn scope<F: Future>(rt: Option<Runtime>, fut: F) -> F::Output {
    CURRENT.scope(rt, fut).await
}

/// (b): emit the messages a node returned (its update, or its `Command`'s update for this
/// graph) that are neither in `input` nor already streamed, giving each message without an
/// id one first (the update then stores that id). Removal markers are not messages and
/// are skipped.
pub(crate) fn emit_returned<S: State>(
    shape: &S,
    input: &NodeInput<S>,
    rt: &Runtime,
    out: &mut NodeOutput<S>,
) {
    let update = match out {
        NodeOutput::Update(u) => u,
        NodeOutput::Command(c) if matches!(c.graph, CommandGraph::Current) => match &mut c.update {
            Some(u) => u,
            None => return,
        },
        _ => return,
    };
    let messages = shape.update_messages(update);
    if messages.is_empty() {
        return;
    }
    let state = match input {
        NodeInput::State(s) => Some(s),
        NodeInput::Packet(_) => None,
    };
    for m in messages {
        if m.get("type").and_then(serde_json::Value::as_str) == Some("remove") {
            continue;
        }
        let Some(id) = m.get("id").and_then(serde_json::Value::as_str) else {
            continue;
        };
        if state.is_some_and(|s| s.has_message(id)) {
            continue;
        }
        rt.emit_whole_message(m);
    }
}
