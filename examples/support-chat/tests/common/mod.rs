//! Shared set-up: scripted plans and answers, a graph over in-memory or SQLite checkpoints.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use graphloom_core::checkpoint::{DynCheckpointer, InMemorySaver};
use graphloom_core::store::{DynStore, InMemoryStore};
use graphloom_core::{CompiledGraph, RunOutput};
use graphloom_llm::{Reply, ScriptedModel};
use serde_json::json;
use std::sync::Arc;
use support_chat::{
    graph_with, run_turn, AgentState, SafetyPolicy, SupportConfig, SupportEvent, ToolRegistry,
};

pub fn plan(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<_> = calls
        .iter()
        .map(|(t, q)| json!({"tool": t, "query": q}))
        .collect();
    Reply::json(json!({"next_step": "tool_use", "tool_calls": calls}))
}

pub fn direct() -> Reply {
    Reply::json(json!({"next_step": "generate", "tool_calls": []}))
}

pub fn build(
    model: &ScriptedModel,
    tools: ToolRegistry,
    config: SupportConfig,
    saver: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
) -> CompiledGraph<AgentState> {
    graph_with(
        saver,
        store,
        Arc::new(model.clone()),
        tools,
        config,
        SafetyPolicy::default(),
    )
    .unwrap()
}

pub fn in_memory(
    model: &ScriptedModel,
    tools: ToolRegistry,
    config: SupportConfig,
) -> CompiledGraph<AgentState> {
    build(
        model,
        tools,
        config,
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new()),
    )
}

pub async fn turn(
    g: &CompiledGraph<AgentState>,
    thread: &str,
    text: &str,
) -> (graphloom_core::Result<RunOutput<AgentState>>, Vec<SupportEvent>) {
    let mut events = Vec::new();
    let out = run_turn(g, thread, "u-1", text, |e| events.push(e)).await;
    (out, events)
}

pub fn named<'a>(events: &'a [SupportEvent], name: &str) -> Vec<&'a SupportEvent> {
    events.iter().filter(|e| e.event == name).collect()
}

pub fn custom_statuses(events: &[SupportEvent]) -> Vec<String> {
    named(events, "on_custom_event")
        .iter()
        .map(|e| e.data["status"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Requests the planner made (they ask for structured output).
pub fn planner_requests(model: &ScriptedModel) -> Vec<graphloom_llm::RecordedRequest> {
    model
        .requests()
        .into_iter()
        .filter(|r| r.options.response_format.is_some())
        .collect()
}
