//! `react_agent_{10x,100x}[_checkpoint]`, `react_agent_1000x`,
//! `react_agent_100x_{sqlite,postgres}`: graphloom's prebuilt `create_react_agent`, as
//! LangGraph's `react_agent_*` cases run its prebuilt `create_react_agent`.
//!
//! The model answers with `n` AI messages, each calling the one tool once with
//! `{"query": uuid * 100}` (3,600 characters), then a final `"answer" * 100`; the script is
//! built before timing and replayed in a cycle, like LangGraph's fake chat model. The tool
//! returns `"result for query: <query>"` ten times (about 36 KB) as a tool message. The
//! agent hands the model the whole conversation on every call, through the `ChatModel` API
//! (a slice of messages), and runs the tool through its `ToolNode` (argument checks,
//! timeout). The same loop written by hand is `react_loop_*` (`react_loop.rs`).

use crate::common::{case_name, durable_case, graph_case, open_saver, CaseDef, Harness, Saver};
use crate::react_loop::ScriptedModel as Script;
use graphloom_core::checkpoint::{DynCheckpointer, InMemorySaver};
use graphloom_core::{CompiledGraph, Durability, Message, Seq};
use graphloom_llm::{ChatModel, ChatOptions, ChunkStream};
use graphloom_prebuilt::{AgentOptions, AgentState, AgentStateUpdate, FnTool, Tool, ToolError};
use std::sync::Arc;

/// The `react_loop_*` script as a chat model.
pub struct BenchModel(pub Script);

impl BenchModel {
    /// `n_tools` tool-calling answers for `tool`, then a final answer.
    #[must_use]
    pub fn new(n_tools: usize, tool: &str) -> Self {
        Self(Script::new(n_tools, tool))
    }
}

impl ChatModel for BenchModel {
    fn model_name(&self) -> &str {
        "bench"
    }
    fn provider(&self) -> &str {
        "bench"
    }
    async fn invoke(&self, _messages: &[Message], _options: &ChatOptions) -> graphloom_llm::Result<Message> {
        self.0
            .invoke(&Seq::new())
            .map_err(|e| graphloom_llm::Error::Scripted(e.to_string()))
    }
    fn stream(&self, _messages: &[Message], _options: &ChatOptions) -> ChunkStream {
        Box::pin(futures::stream::empty())
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    query: String,
}

/// The tool named `name`: `"result for query: <query>"` ten times.
#[must_use]
pub fn tool(name: String) -> Arc<dyn Tool> {
    FnTool::new(name, "A tool", |a: Query, _rt| async move {
        Ok::<_, ToolError>(format!("result for query: {}", a.query).repeat(10))
    })
    .arc()
}

/// The agent: `n_tools` rounds, with `saver` when given.
///
/// # Errors
/// When the graph does not compile.
pub fn graph(
    n_tools: usize,
    saver: Option<Arc<dyn DynCheckpointer>>,
) -> anyhow::Result<CompiledGraph<AgentState>> {
    let tool_name = crate::common::uuid4();
    let model = BenchModel::new(n_tools, &tool_name);
    let mut options = AgentOptions::new();
    options.checkpointer = saver;
    Ok(graphloom_prebuilt::create_react_agent(
        Arc::new(model),
        [tool(tool_name)],
        options,
    )?)
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
            let name = case_name(&format!("react_agent_{n}x"), checkpoint);
            out.push(CaseDef::new(name, move |h: Harness| {
                let saver = checkpoint.then(|| Arc::new(InMemorySaver::new()) as Arc<dyn DynCheckpointer>);
                Ok(graph_case(graph(n, saver)?, input(), h))
            }));
        }
    }
    out.push(CaseDef::new("react_agent_1000x", |h: Harness| {
        Ok(graph_case(graph(1000, None)?, input(), h))
    }));
    for saver in [Saver::Sqlite, Saver::Postgres] {
        out.push(CaseDef::new(
            format!("react_agent_100x{}", saver.suffix()),
            move |h: Harness| {
                let (s, keep) = open_saver(saver)?;
                Ok(durable_case(
                    graph(100, Some(s))?,
                    input(),
                    h,
                    Durability::Sync,
                    keep,
                ))
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
    use graphloom_core::MessageKind;

    #[tokio::test]
    async fn ten_tool_rounds_make_22_messages_in_21_supersteps() {
        for checkpoint in [false, true] {
            let saver = checkpoint.then(|| Arc::new(InMemorySaver::new()) as Arc<dyn DynCheckpointer>);
            let g = graph(10, saver).unwrap();
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
        }
    }
}
