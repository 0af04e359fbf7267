//! `create_agent` cases: the ReAct loop of `react_agent_*` built with
//! `graphloom_prebuilt::create_agent` (model node, `ToolNode` with its checks, routing by
//! command), with and without six no-op `wrap_model_call` middlewares, and the cost of a
//! stack of six no-op wrappers per model call measured on its own.
//!
//! - `create_agent_react_{10x,100x}[_checkpoint]`, `create_agent_react_1000x`: the same
//!   script, tool and input as `react_agent_*` (n tool rounds with a 3,600-character query,
//!   a 36 KB tool result, a final answer), 2n+1 supersteps. The model gets the whole
//!   conversation on every call (the `ChatModel` API takes a slice of messages); messages
//!   share their bodies, so that list is n reference counts, not n copies.
//! - `create_agent_react_100x_mw6`: the 100x agent with six no-op middlewares around the
//!   model call.
//! - `model_call_chain_{0,6}_noop_x10000`: one node calls the model chain 10,000 times with
//!   0 or 6 no-op wrappers around a model call that answers at once; the difference of the
//!   two, divided by 10,000, is what six wrappers add to one model call.

use crate::common::{case_name, fresh_config, graph_case, CaseDef, Harness, RunFn};
use crate::react::{tool, BenchModel};
use futures::future::BoxFuture;
use graphloom_core::{CompiledGraph, Message, NodeError, Runtime, StateGraph, END, START};
use graphloom_llm::ChatOptions;
use graphloom_prebuilt::middleware::{
    Hook, Hooks, Middleware, ModelExec, ModelNext, ModelRequest, ModelResponse,
};
use graphloom_prebuilt::{create_agent, AgentGraphState, AgentGraphUpdate};
use std::sync::Arc;
use std::time::Instant;

/// Model calls per run of the chain cases.
const CHAIN_CALLS: usize = 10_000;

/// A middleware whose only hook is a `wrap_model_call` that calls `next`.
struct Noop(String);

impl Middleware for Noop {
    fn name(&self) -> &str {
        &self.0
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        next.call(request)
    }
}

fn noops(n: usize) -> Vec<Arc<dyn Middleware>> {
    (0..n)
        .map(|i| Arc::new(Noop(format!("Noop{i}"))) as Arc<dyn Middleware>)
        .collect()
}

/// The agent: `n_tools` rounds, `middleware` no-op wrappers, an in-memory saver with
/// `checkpoint`.
pub fn graph(
    n_tools: usize,
    checkpoint: bool,
    middleware: usize,
) -> anyhow::Result<CompiledGraph<AgentGraphState>> {
    let tool_name = crate::common::uuid4();
    let model = BenchModel::new(n_tools, &tool_name);
    let mut b = create_agent(Arc::new(model), [tool(tool_name)]);
    for m in noops(middleware) {
        b = b.middleware_arc(m);
    }
    if checkpoint {
        b = b.checkpointer(graphloom_core::checkpoint::InMemorySaver::new());
    }
    Ok(b.build()?)
}

fn input() -> AgentGraphUpdate {
    AgentGraphUpdate::new().messages(vec![Message::human("hi?")])
}

/// A graph whose one node runs the model chain `CHAIN_CALLS` times.
fn chain_graph(wrappers: usize) -> anyhow::Result<CompiledGraph<AgentGraphState>> {
    let chain: Arc<[Arc<dyn Middleware>]> = Arc::from(noops(wrappers));
    let answer = Message::ai("ok").with_id("a1");
    let exec: ModelExec = Arc::new(move |_req: ModelRequest| {
        let m = answer.clone();
        Box::pin(async move { Ok(ModelResponse::of(m)) })
    });
    Ok(StateGraph::with_shape(AgentGraphState::default())
        .add_node("calls", move |s: Arc<AgentGraphState>, rt: Runtime| {
            let next = ModelNext::new(Arc::clone(&chain), Arc::clone(&exec));
            async move {
                let model: Arc<dyn graphloom_llm::DynChatModel> = Arc::new(BenchModel::new(0, "t"));
                let request = ModelRequest {
                    model,
                    system_prompt: None,
                    messages: Vec::new(),
                    tools: Vec::new(),
                    options: ChatOptions::new(),
                    state: s,
                    runtime: rt,
                };
                for _ in 0..CHAIN_CALLS {
                    let r = next.call(request.clone()).await?;
                    std::hint::black_box(r);
                }
                Ok(AgentGraphUpdate::new())
            }
        })
        .add_edge(START, "calls")
        .add_edge("calls", END)
        .compile()?)
}

fn chain_case(g: CompiledGraph<AgentGraphState>) -> RunFn {
    let g = Arc::new(g);
    Box::new(move || {
        let g = Arc::clone(&g);
        Box::pin(async move {
            let start = Instant::now();
            g.invoke(AgentGraphUpdate::new(), fresh_config()).await?;
            Ok(start.elapsed())
        })
    })
}

/// The cases of this family.
pub fn cases() -> Vec<CaseDef> {
    let mut out = Vec::new();
    for n in [10usize, 100] {
        for checkpoint in [false, true] {
            let name = case_name(&format!("create_agent_react_{n}x"), checkpoint);
            out.push(CaseDef::new(name, move |h: Harness| {
                Ok(graph_case(graph(n, checkpoint, 0)?, input(), h))
            }));
        }
    }
    out.push(CaseDef::new("create_agent_react_1000x", |h: Harness| {
        Ok(graph_case(graph(1000, false, 0)?, input(), h))
    }));
    out.push(CaseDef::new("create_agent_react_100x_mw6", |h: Harness| {
        Ok(graph_case(graph(100, false, 6)?, input(), h))
    }));
    for wrappers in [0usize, 6] {
        out.push(CaseDef::new(
            format!("model_call_chain_{wrappers}_noop_x10000"),
            move |_h: Harness| Ok(chain_case(chain_graph(wrappers)?)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use graphloom_core::MessageKind;

    #[tokio::test]
    async fn the_agent_has_the_react_shape() {
        for (checkpoint, mw) in [(false, 0), (true, 0), (false, 6)] {
            let g = graph(10, checkpoint, mw).unwrap();
            let out = g
                .invoke(input(), fresh_config().recursion_limit(21))
                .await
                .unwrap();
            let msgs = out.values.messages;
            assert_eq!(msgs.len(), 22);
            assert_eq!(msgs.iter().filter(|m| m.kind == MessageKind::Tool).count(), 10);
            assert_eq!(
                msgs.get(2).unwrap().text().len(),
                ("result for query: ".len() + 3600) * 10
            );
            assert_eq!(msgs.last().unwrap().text(), "answer".repeat(100));
        }
        let g = chain_graph(6).unwrap();
        g.invoke(AgentGraphUpdate::new(), fresh_config()).await.unwrap();
    }
}
