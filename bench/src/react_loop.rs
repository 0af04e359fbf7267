//! `react_loop_{10x,100x}[_checkpoint]`, `react_loop_1000x`, `react_loop_100x_{sqlite,postgres}`:
//! the ReAct loop (`agent` <-> `tools`) written by hand over a messages state, with a
//! scripted model: two bare nodes, no `ToolNode`, no chat-model call. LangGraph's `react_agent_*` cases run its
//! prebuilt `create_react_agent`, as graphloom's `react_agent_*` (`react.rs`) run graphloom's;
//! these cases show what the graph machinery alone costs for the same conversation.
//!
//! The model answers with `n` AI messages, each calling the one tool once with
//! `{"query": uuid * 100}` (3,600 characters), then a final `"answer" * 100`; the script is
//! built before timing and replayed in a cycle, like LangGraph's fake chat model. The tool
//! returns `"result for query: <query>"` ten times (about 36 KB) as a tool message.

use crate::common::{
    attach_saver, case_name, durable_case, graph_case, uuid4, with_saver, CaseDef, Harness, Saver,
};
use graphloom_core::{
    CompiledGraph, Durability, Message, NodeError, NodeOutput, Route, Seq, State, StateGraph, ToolCall, END,
    START,
};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The agent's state.
#[derive(State, Clone, Default, Debug)]
pub struct AgentState {
    /// The conversation.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
}

/// A scripted chat model: returns its responses in order, then starts over.
pub struct ScriptedModel {
    responses: Vec<Message>,
    next: AtomicUsize,
}

impl ScriptedModel {
    /// `n_tools` tool-calling responses for `tool`, then a final answer.
    #[must_use]
    pub fn new(n_tools: usize, tool: &str) -> Self {
        let mut responses: Vec<Message> = (0..n_tools)
            .map(|_| {
                let call = ToolCall {
                    id: uuid4(),
                    name: tool.to_owned(),
                    args: json!({ "query": uuid4().repeat(100) }),
                };
                Message::ai_with_tool_calls("", vec![call]).with_id(uuid4())
            })
            .collect();
        responses.push(Message::ai("answer".repeat(100)).with_id(uuid4()));
        Self {
            responses,
            next: AtomicUsize::new(0),
        }
    }

    /// The next response (a copy, as a model returns a new message each call).
    pub fn invoke(&self, _messages: &Seq<Message>) -> Result<Message, NodeError> {
        let i = self
            .next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |i| {
                Some(if i + 1 < self.responses.len() { i + 1 } else { 0 })
            })
            .unwrap_or(0);
        self.responses
            .get(i)
            .cloned()
            .ok_or_else(|| NodeError::fatal("the scripted model has no responses"))
    }
}

/// The tool: `"result for query: <query>"` ten times.
fn run_tool(call: &ToolCall) -> Result<Message, NodeError> {
    let query = call
        .args
        .get("query")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| NodeError::fatal("tool call without a `query` string"))?;
    let mut m = Message::tool(format!("result for query: {query}").repeat(10), call.id.clone());
    m.name = Some(call.name.clone());
    Ok(m)
}

/// The compiled agent.
pub fn graph(n_tools: usize, checkpoint: bool) -> anyhow::Result<CompiledGraph<AgentState>> {
    Ok(with_saver(builder(n_tools), checkpoint).compile()?)
}

/// The agent, not yet compiled.
pub fn builder(n_tools: usize) -> StateGraph<AgentState> {
    let model = Arc::new(ScriptedModel::new(n_tools, &uuid4()));
    StateGraph::<AgentState>::new()
        .add_node("agent", move |s: Arc<AgentState>, _rt| {
            let model = Arc::clone(&model);
            async move {
                let reply = model.invoke(&s.messages)?;
                Ok(NodeOutput::Update(AgentStateUpdate::new().messages(vec![reply])))
            }
        })
        .add_node("tools", |s: Arc<AgentState>, _rt| async move {
            let last = s.messages.last().ok_or_else(|| NodeError::fatal("no messages"))?;
            let results = last
                .tool_calls
                .iter()
                .map(run_tool)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(NodeOutput::Update(AgentStateUpdate::new().messages(results)))
        })
        .add_edge(START, "agent")
        .add_conditional_edges("agent", |s: &AgentState| {
            let calls_tools = s.messages.last().is_some_and(|m| !m.tool_calls.is_empty());
            Route::from(if calls_tools { "tools" } else { END })
        })
        .add_edge("tools", "agent")
}

/// The input: one human message.
#[must_use]
pub fn input() -> AgentStateUpdate {
    AgentStateUpdate::new().messages(vec![Message::human("hi?")])
}

/// The cases of this family.
pub fn cases() -> Vec<CaseDef> {
    let mut out = Vec::new();
    for n in [10usize, 100] {
        for checkpoint in [false, true] {
            let name = case_name(&format!("react_loop_{n}x"), checkpoint);
            out.push(CaseDef::new(name, move |h: Harness| {
                Ok(graph_case(graph(n, checkpoint)?, input(), h))
            }));
        }
    }
    out.push(CaseDef::new("react_loop_1000x", |h: Harness| {
        Ok(graph_case(graph(1000, false)?, input(), h))
    }));
    for saver in [Saver::Sqlite, Saver::Postgres] {
        out.push(CaseDef::new(
            format!("react_loop_100x{}", saver.suffix()),
            move |h: Harness| {
                let (b, keep) = attach_saver(builder(100), saver)?;
                Ok(durable_case(b.compile()?, input(), h, Durability::Sync, keep))
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::common::fresh_config;
    use graphloom_core::{Error, MessageKind};

    #[tokio::test]
    async fn ten_tool_rounds_make_22_messages_in_21_supersteps() {
        for checkpoint in [false, true] {
            let g = graph(10, checkpoint).unwrap();
            let out = g
                .invoke(input(), fresh_config().recursion_limit(21))
                .await
                .unwrap();
            let msgs = out.values.messages;
            assert_eq!(msgs.len(), 22);
            assert_eq!(msgs.iter().filter(|m| m.kind == MessageKind::Tool).count(), 10);
            let tool = msgs.get(2).unwrap().text();
            assert_eq!(tool.len(), ("result for query: ".len() + 3600) * 10);
            assert_eq!(msgs.last().unwrap().text(), "answer".repeat(100));
            // The script cycles: the next run starts over.
            let err = g
                .invoke(input(), fresh_config().recursion_limit(20))
                .await
                .unwrap_err();
            assert!(matches!(err, Error::RecursionLimit { .. }), "{err}");
        }
    }
}
