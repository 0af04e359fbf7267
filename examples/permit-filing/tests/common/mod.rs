//! Shared setup of the permit-filing tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::{DynCheckpointer, InMemorySaver};
use graphloom_core::store::{DynStore, SearchQuery};
use graphloom_core::{CompiledGraph, InMemoryStore, Message, MessageKind, ToolCall};
use graphloom_llm::{Reply, ScriptedModel, Usage};
use permit_filing::{graph, PermitState};
use serde_json::{json, Value};
use std::sync::Arc;

pub struct Setup {
    pub graph: CompiledGraph<PermitState>,
    pub saver: Arc<dyn DynCheckpointer>,
    pub store: Arc<dyn DynStore>,
    pub model: ScriptedModel,
}

pub fn setup(model: ScriptedModel) -> Setup {
    let saver: Arc<dyn DynCheckpointer> = Arc::new(InMemorySaver::new());
    let store: Arc<dyn DynStore> = Arc::new(InMemoryStore::new());
    setup_with(model, saver, store)
}

pub fn setup_with(model: ScriptedModel, saver: Arc<dyn DynCheckpointer>, store: Arc<dyn DynStore>) -> Setup {
    let graph = graph(Arc::clone(&saver), Arc::clone(&store), Arc::new(model.clone())).unwrap();
    Setup {
        graph,
        saver,
        store,
        model,
    }
}

pub fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

pub fn tool_reply(id: &str, name: &str, args: Value) -> Reply {
    Reply::tool_calls("", vec![call(id, name, args)]).with_usage(Usage::new(100, 10))
}

pub fn text_reply(text: &str) -> Reply {
    Reply::text(text).with_usage(Usage::new(100, 10))
}

pub fn create_operator_reply() -> Reply {
    tool_reply(
        "call_create_1",
        "create_entity",
        json!({"kind": "operator", "name": "Permian Basin Energy LLC"}),
    )
}

pub async fn entities(store: &Arc<dyn DynStore>) -> Vec<Value> {
    store
        .search(
            &["kg".to_owned(), "entities".to_owned()],
            SearchQuery::new().limit(100),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.item.value)
        .collect()
}

pub async fn approval(store: &Arc<dyn DynStore>, id: &str) -> Value {
    store
        .get(&["approvals".to_owned()], id)
        .await
        .unwrap()
        .map(|i| i.value)
        .unwrap_or(Value::Null)
}

pub fn trail(s: &PermitState) -> Vec<String> {
    s.node_trail.to_vec()
}

pub fn tool_messages_for<'a>(s: &'a PermitState, call_id: &str) -> Vec<&'a Message> {
    s.messages
        .iter()
        .filter(|m| m.kind == MessageKind::Tool && m.tool_call_id.as_deref() == Some(call_id))
        .collect()
}

pub fn ai_calls(s: &PermitState, call_id: &str) -> usize {
    s.messages
        .iter()
        .filter(|m| m.kind == MessageKind::Ai && m.tool_calls.iter().any(|c| c.id == call_id))
        .count()
}
