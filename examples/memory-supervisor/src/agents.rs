//! The two model-driven sub-graphs: ReAct loops over the supervisor's state, each offered
//! only the tools of its mode (ADR-007 §2.2: no tool confusion).
//!
//! ```text
//! START → agent ─(tool calls)─▶ tools → agent ...
//!             └─(an answer)──▶ END
//! ```
//!
//! `tools` is a [`ToolNode`]: it runs every tool call of the model's message in parallel
//! and answers each with a tool message; the `add_messages` reducer merges them into the
//! conversation in call order. The tools see the state (with `user_id` / `session_id`) as
//! their `ToolRuntime::state`, and the run context, store and thread through the runtime.

use crate::state::{MemoryState, MemoryStateUpdate};
use graphloom_core::{CompiledGraph, Message, NodeError, Runtime, StateGraph, END, START};
use graphloom_llm::{ChatOptions, DynChatModel, NodeResultExt};
use graphloom_prebuilt::{tools_condition, Tool, ToolNode, TOOLS_NODE};
use std::sync::Arc;

/// System prompt of the retrieval agent (granular tools).
pub const RECALL_PROMPT: &str = "You answer questions about what the user told you before. \
Use the memory tools to look things up (you may call several at once: working memory, session facts, long-term knowledge), \
then answer briefly from what they return. Never invent memories. You never need the user's or the session's id: the tools know them.";

/// System prompt of the reasoning agent (unified tools).
pub const ASSISTANT_PROMPT: &str = "You are a helpful assistant with a memory. \
Use get_context_block or memory_query when what you know about the user helps, and memory_store when the user tells you something worth remembering. \
You never need the user's or the session's id: the tools know them.";

/// A ReAct agent over [`MemoryState`] with `tools`.
///
/// # Errors
/// Never (the graph is fixed); the builder's error type.
pub fn react_agent(
    name: &str,
    model: Arc<dyn DynChatModel>,
    tools: Vec<Arc<dyn Tool>>,
    system_prompt: &str,
) -> graphloom_core::Result<CompiledGraph<MemoryState>> {
    let node = ToolNode::new(tools);
    let options = ChatOptions::new().tools(node.specs());
    let system = system_prompt.to_owned();
    let agent = move |s: Arc<MemoryState>, _rt: Runtime| {
        let model = Arc::clone(&model);
        let options = options.clone();
        let system = system.clone();
        async move {
            let mut history = Vec::with_capacity(s.messages.len() + 1);
            history.push(Message::system(system));
            history.extend(s.messages.iter().cloned());
            let answer = model.dyn_invoke(&history, &options).await.node()?;
            Ok::<_, NodeError>(MemoryStateUpdate::new().messages(vec![answer]))
        }
    };
    StateGraph::<MemoryState>::new()
        .name(name)
        .add_node("agent", agent)
        .add_node(
            TOOLS_NODE,
            node.into_node::<MemoryState>(|s| &s.messages, |m| MemoryStateUpdate::new().messages(m)),
        )
        .add_edge(START, "agent")
        .add_conditional_edges_to(
            "agent",
            |s: &MemoryState| tools_condition(&s.messages),
            [TOOLS_NODE, END],
        )
        .add_edge(TOOLS_NODE, "agent")
        .compile()
}
