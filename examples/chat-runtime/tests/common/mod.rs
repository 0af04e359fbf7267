//! Shared test set-up: a runtime over the chat graph with an in-memory saver.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use chat_runtime::{
    graph_with, ChatRequest, ChatRun, ChatRuntime, CompletionAdapter, EventEnvelope, GraphFinal,
    InMemoryBilling, InProcGraphExecutor, LlmCaller, RunError, ToolContract, ToolRunner,
};
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::store::InMemoryStore;
use graphloom_core::{CompiledGraph, Message};
use graphloom_llm::DynChatModel;
use std::sync::Arc;

pub struct Harness {
    pub runtime: ChatRuntime,
    pub billing: Arc<InMemoryBilling>,
    pub graph: CompiledGraph<chat_runtime::ChatState>,
}

pub fn harness(model: Arc<dyn DynChatModel>, tools: Vec<ToolContract>) -> Harness {
    let graph = graph_with(
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new()),
        CompletionAdapter::new(model),
        ToolRunner::new(tools),
    )
    .unwrap();
    let billing = InMemoryBilling::new();
    let runtime = ChatRuntime::new(Arc::new(InProcGraphExecutor::new(graph.clone())), billing.clone());
    Harness {
        runtime,
        billing,
        graph,
    }
}

pub fn caller() -> LlmCaller {
    LlmCaller {
        billing_account_id: "acct-1".into(),
        virtual_key_id: "vk-1".into(),
        request_id: "req-42".into(),
        trace_id: "trace-7".into(),
    }
}

pub fn ask(h: &Harness, thread: &str, question: &str) -> ChatRun {
    h.runtime.run_chat_stream(ChatRequest {
        caller: caller(),
        thread_id: thread.into(),
        messages: vec![Message::human(question)],
    })
}

pub async fn drain(run: ChatRun) -> (Vec<EventEnvelope>, Result<GraphFinal, RunError>) {
    let events: Vec<EventEnvelope> = run.events.collect().await;
    let fin = run.final_result.await;
    (events, fin)
}

pub fn kinds(events: &[EventEnvelope]) -> Vec<&'static str> {
    events.iter().map(|e| e.event.kind()).collect()
}
